#!/bin/sh
# internal/mtatest/install.sh — "make mta": unpack Debian's Postfix, Exim 4,
# OpenSMTPD and postgrey for the tests that run real MTAs (internal/mtatest,
# probe/realmta).
#
# The three MTAs conflict with one another (each Provides and Conflicts
# mail-transport-agent), and none may run as the machine's own MTA, so none
# is installed: each package is fetched with "apt-get download" and
# unpacked with "dpkg -x" into a directory of its own under
#
#	$VERIFYD_MTA_ROOT (default $HOME/.cache/verifyd/mta)
#	  postfix/    postfix
#	  exim/       exim4-base, exim4-daemon-light, exim4-config
#	  opensmtpd/  opensmtpd
#	  postgrey/   postgrey
#	  debs/       the packages downloaded
#	  versions    the packages and versions unpacked (written last)
#
# No maintainer script runs: no user is created, no service started, no
# file outside that directory changed. The tests lay each tree over /usr,
# /etc and /var in a private mount namespace of the daemon (mtatest.go).
# The plain shared libraries and Perl modules the packages depend on (lib*
# packages: libidn12 for Exim, the Net::Server, BerkeleyDB, NetAddr::IP and
# Net::DNS modules for postgrey) start no service and are installed with
# apt-get when missing. Root on Debian only; quick when already done.
set -eu
root=${VERIFYD_MTA_ROOT:-${HOME:-/root}/.cache/verifyd/mta}
groups="postfix:postfix exim:exim4-base,exim4-daemon-light,exim4-config opensmtpd:opensmtpd postgrey:postgrey"
bins="postfix/usr/lib/postfix/sbin/master exim/usr/sbin/exim4 opensmtpd/usr/sbin/smtpd postgrey/usr/sbin/postgrey"

# missing_libs prints the lib* packages and perl that the unpacked
# packages depend on and are not installed (the first of alternatives).
missing_libs() {
	for deb in "$@"; do
		dpkg-deb -f "$deb" Pre-Depends Depends
	done | sed 's/^[A-Za-z-]*: //' | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' |
		grep -e '^lib' -e '^perl$' | sort -u | while read -r p; do
		if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed'; then
			echo "$p"
		fi
	done
}

ready() {
	[ -f "$root/versions" ] || return 1
	for b in $bins; do
		[ -x "$root/$b" ] || return 1
	done
	[ -z "$(missing_libs "$root"/debs/*.deb)" ]
}

if ready; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
	echo "mta: the real-MTA tests need Debian's postfix, exim4 and opensmtpd unpacked in $root; run this as root on Debian (make mta)" >&2
	exit 1
fi
for tool in unshare mount; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "mta: $tool is missing (util-linux, mount)" >&2
		exit 1
	fi
done
export DEBIAN_FRONTEND=noninteractive
mkdir -p "$root"
work=$(mktemp -d "$root/.new.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs"
pkgs=$(echo "$groups" | tr ' ' '\n' | sed 's/^[^:]*://' | tr ',\n' '  ')
echo "mta: downloading $pkgs"
# (apt-get warns that it downloads as root, not as _apt, into a directory
# _apt cannot reach: harmless; a first failure is retried after an update,
# and that one's errors are shown.)
if ! (cd "$work/debs" && apt-get download -qq $pkgs >/dev/null 2>&1); then
	apt-get update -qq
	(cd "$work/debs" && apt-get download -qq $pkgs >/dev/null)
fi
for g in $groups; do
	dir=${g%%:*}
	mkdir -p "$work/$dir"
	for p in $(echo "${g#*:}" | tr ',' ' '); do
		dpkg -x "$work/debs/${p}"_*.deb "$work/$dir"
	done
done
libs=$(missing_libs "$work"/debs/*.deb)
if [ -n "$libs" ]; then
	echo "mta: installing libraries with apt-get: $(echo $libs)"
	# A policy-rc.d keeps any package from starting a service; one the
	# machine has already is left alone.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d; rm -rf "$work"' EXIT
	fi
	if ! apt-get install -y -qq --no-install-recommends $libs >/dev/null; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends $libs >/dev/null
	fi
fi
for deb in "$work"/debs/*.deb; do
	dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"
done >"$work/versions"
# Swap the new trees in; a test still running on the old ones keeps its
# mounts.
for g in $groups; do
	dir=${g%%:*}
	rm -rf "$root/$dir.old"
	if [ -e "$root/$dir" ]; then
		mv "$root/$dir" "$root/$dir.old"
	fi
	mv "$work/$dir" "$root/$dir"
	rm -rf "$root/$dir.old"
done
rm -rf "$root/debs"
mv "$work/debs" "$root/debs"
mv "$work/versions" "$root/versions"
cat "$root/versions"
