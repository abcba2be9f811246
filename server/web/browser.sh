#!/bin/sh
# server/web/browser.sh — "make browser": make sure a Chromium exists for
# the dashboard's browser tests (cmd/verifyd TestDashboardEndToEnd).
#
# $CHROMIUM, or chromium on PATH, is used as it is. Otherwise Debian's
# chromium package is installed with apt-get: root on Debian/Ubuntu only.
set -eu
if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
	exit 0
fi
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "browser: the dashboard's tests need Chromium; install it (Debian: apt-get install chromium) or set CHROMIUM" >&2
	exit 1
fi
echo "browser: installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
chromium --version 2>/dev/null | head -1
