#!/bin/sh
# lintian.sh DEB... runs Debian's lintian on the packages, installing it
# with apt-get when missing (root on Debian only), and fails on any error
# or warning it reports. The overrides lintian is told to accept are in
# lintian-overrides, each with its reason.
set -eu
if ! command -v lintian >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "lintian.sh: installing lintian with apt-get" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lintian >&2 ||
			{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lintian >&2; }
	else
		echo "lintian.sh: lintian is missing; install it (apt-get install lintian)" >&2
		exit 1
	fi
fi
# --fail-on error,warning: a warning fails the build too. Overrides come
# from the package itself (usr/share/lintian/overrides/verifyd).
lintian --fail-on error,warning --tag-display-limit 0 "$@"
