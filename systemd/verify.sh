#!/bin/sh
# systemd/verify.sh — "make systemd-verify": check the unit files with
# systemd's own analyzer, without a running systemd.
#
#  1. Install systemd-analyze (Debian package systemd) and kill (procps,
#     ExecReload) with apt-get if missing: root on Debian/Ubuntu only.
#  2. "make install DESTDIR=$root", then copy the host's own unit files
#     (sysinit.target, network-online.target, ...) and the commands the units
#     run into $root: with --root, systemd-analyze resolves everything there.
#  3. systemd-analyze verify on verifyd.service and on an instance of the
#     template (an IPv4 one: verify reads "file:alias" at a colon).
#  4. systemd-analyze security --offline, failing above the exposure the
#     docs record (VERIFYD_EXPOSURE_MAX, EGRESS_EXPOSURE_MAX, x10).
set -eu
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
UNITDIR=/usr/lib/systemd/system

need_pkgs=""
command -v systemd-analyze >/dev/null 2>&1 || need_pkgs="$need_pkgs systemd"
[ -x /bin/kill ] || need_pkgs="$need_pkgs procps"
if [ -n "$need_pkgs" ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "systemd-verify: needs$need_pkgs; install them (Debian: apt-get install$need_pkgs) or run as root on Debian" >&2
		exit 1
	fi
	echo "systemd-verify: installing$need_pkgs with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # a list of packages
	apt-get install -y -qq --no-install-recommends $need_pkgs >/dev/null
fi
systemd-analyze --version | head -1

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT INT TERM
$MAKE --no-print-directory -s install DESTDIR="$root" PREFIX=/usr >/dev/null

for d in /usr/lib/systemd/system /lib/systemd/system; do
	if [ -d "$d" ]; then
		cp -Rn "$d/." "$root$UNITDIR/"
		break
	fi
done
for cmd in /bin/kill; do
	mkdir -p "$root$(dirname "$cmd")"
	cp "$(readlink -f "$cmd")" "$root$cmd"
done

status=0
units="$UNITDIR/verifyd.service $UNITDIR/verifyd-egress@192.0.2.10.service"
echo "systemd-analyze verify verifyd.service verifyd-egress@192.0.2.10.service"
# A warning (an unknown or misspelt key, a bad value that systemd ignores)
# fails too: systemd-analyze prints it but exits 0.
# shellcheck disable=SC2086 # a list of units
if ! warnings=$(systemd-analyze verify --man=no --root="$root" $units 2>&1) || [ -n "$warnings" ]; then
	echo "$warnings" >&2
	status=1
fi

# Every command an Exec*= line runs must exist (systemd-analyze 252 checks
# only some of them).
for f in "$root$UNITDIR/verifyd.service" "$root$UNITDIR/verifyd-egress@.service"; do
	for cmd in $(sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\([^ ]*\).*/\1/p' "$f"); do
		if [ ! -x "$root$cmd" ]; then
			echo "systemd-verify: $(basename "$f") runs $cmd, which is not installed" >&2
			status=1
		fi
	done
done

# security UNIT MAX ALLOWED...: the overall exposure is at most MAX/100, and
# no check fails but the ALLOWED ones (systemd/README.md says why each
# cannot pass). A score alone would not notice one lost setting.
security() {
	unit=$1 max=$2
	shift 2
	out=$(systemd-analyze security --offline=true --root="$root" --threshold="$max" "$unit" 2>&1) || {
		echo "$out" | grep -E '^✗' >&2
		echo "systemd-verify: $unit exposes more than $max/100; see systemd/README.md" >&2
		status=1
	}
	echo "$out" | tail -1
	echo "$out" | sed -n 's/^✗ \([^ ]*\) .*/\1/p' | while read -r check; do
		ok=0
		for a in "$@"; do [ "$check" = "$a" ] && ok=1; done
		if [ $ok = 0 ]; then
			echo "systemd-verify: $unit fails the check $check; see systemd/README.md" >&2
			echo x
		fi
	done | grep -q x && status=1
	return 0
}
security verifyd.service "${VERIFYD_EXPOSURE_MAX:-11}" \
	RootDirectory=/RootImage= PrivateNetwork= IPAddressDeny= DeviceAllow= \
	'RestrictAddressFamilies=~AF_UNIX' 'RestrictAddressFamilies=~AF_(INET|INET6)'
security verifyd-egress@192.0.2.10.service "${EGRESS_EXPOSURE_MAX:-5}" \
	RootDirectory=/RootImage= User=/DynamicUser= DeviceAllow= 'RestrictAddressFamilies=~AF_UNIX'
exit $status
