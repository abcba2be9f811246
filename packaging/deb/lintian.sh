#!/bin/sh
# lintian.sh DEB... runs Debian's lintian on the packages, installing it
# with apt-get when missing (root on Debian only), and fails on any error
# or warning it reports. The overrides lintian is told to accept are in
# lintian-overrides, each with its reason.
set -eu
"$(dirname "$0")/../apt-install.sh" lintian
# --fail-on error,warning: a warning fails the build too. Overrides come
# from the package itself (usr/share/lintian/overrides/verifyd).
lintian --fail-on error,warning --tag-display-limit 0 "$@"
