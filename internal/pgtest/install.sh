#!/bin/sh
# internal/pgtest/install.sh — "make postgres": make sure a PostgreSQL
# server's binaries exist for the tests that run one (internal/pgtest).
#
# $VERIFYD_PG_BIN (a directory holding initdb and postgres), initdb on PATH,
# or Debian's /usr/lib/postgresql/<version>/bin is used as it is.
# Otherwise Debian's postgresql package is installed with apt-get (root on
# Debian/Ubuntu only). The package's own cluster is not used: the tests
# start their own server in a temporary directory.
set -eu
has() { [ -x "$1/initdb" ] && [ -x "$1/postgres" ] && [ -x "$1/pg_ctl" ]; }
if [ -n "${VERIFYD_PG_BIN:-}" ] && has "$VERIFYD_PG_BIN"; then
	exit 0
fi
if command -v postgres >/dev/null 2>&1 && has "$(dirname "$(command -v postgres)")"; then
	exit 0
fi
for d in /usr/lib/postgresql/*/bin; do
	if has "$d"; then
		exit 0
	fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "postgres: the storage tests need PostgreSQL's server binaries; install them (Debian: apt-get install postgresql) or set VERIFYD_PG_BIN" >&2
	exit 1
fi
echo "postgres: installing postgresql with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# A policy-rc.d keeps the package from starting its own cluster's
# service; one the machine has already is left alone.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 0755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package's own cluster is not wanted at the next boot either.
if command -v systemctl >/dev/null 2>&1; then
	systemctl disable postgresql >/dev/null 2>&1 || true
fi
ls -d /usr/lib/postgresql/*/bin
