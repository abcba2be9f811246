#!/bin/sh
# apt-install.sh COMMAND [PACKAGE]: installs Debian's PACKAGE (default
# COMMAND) with apt-get when COMMAND is not on PATH: the tools the checks
# of make test need (lintian, promtool, mmdebstrap, curl, python3,
# openssl). Root on Debian only; elsewhere it says what to install.
set -eu
cmd=$1
pkg=${2:-$1}
command -v "$cmd" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "$cmd is missing: install Debian's $pkg package" >&2
	exit 1
fi
echo "installing $pkg with apt-get (for $cmd)" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" >&2 ||
	{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" >&2; }
