#!/bin/sh
# verifyd-egress — the helper behind verifyd-egress@ADDR.service; installed
# as /usr/libexec/verifyd/verifyd-egress.
#
#   verifyd-egress start ADDR   create $DIR/ADDR, reload verifyd (adds ADDR);
#                               with $HELO_NAME set, ADDR says that name in EHLO
#   verifyd-egress stop ADDR    remove $DIR/ADDR, reload verifyd (drains ADDR)
#   verifyd-egress check ADDR   only say whether ADDR is usable
#
# DIR is $RUNTIME_DIRECTORY (/run/verifyd-egress under the unit), which must
# be verifyd's egress.addresses_dir. ADDR is an IPv4 or IPv6 address without
# zone, neither unspecified nor multicast; verifyd checks it again when it
# reads the directory. The reload does not wait (--no-block): verifyd's
# reload job is ordered after the unit's own job. $SYSTEMCTL replaces
# systemctl in tests.
set -eu

die() { echo "verifyd-egress: $*" >&2; exit 1; }

# is_ipv4 A: four decimal octets 0-255 without leading zeros, as Go's
# netip.ParseAddr wants them.
is_ipv4() {
	case $1 in *[!0-9.]* | .* | *. | *..*) return 1 ;; esac
	old_ifs=$IFS
	IFS=.
	# shellcheck disable=SC2086 # split on dots on purpose
	set -- $1
	IFS=$old_ifs
	[ $# -eq 4 ] || return 1
	for o in "$@"; do
		case $o in 0) ;; 0*) return 1 ;; esac
		[ ${#o} -le 3 ] && [ "$o" -le 255 ] || return 1
	done
}

# is_ipv6 A: groups of 1-4 hex digits, at most one "::", optionally an IPv4
# address as the last 32 bits.
is_ipv6() {
	a=$1
	case $a in *:*) ;; *) return 1 ;; esac
	case $a in *[!0-9A-Fa-f:.]*) return 1 ;; esac
	case $a in *:::* | *::*::*) return 1 ;; esac
	case $a in :[!:]* | *[!:]:) return 1 ;; esac
	groups=8
	case $a in *.*)
		is_ipv4 "${a##*:}" || return 1
		a=${a%:*}:0:0
		;;
	esac
	compressed=0
	case $a in *::*) compressed=1 ;; esac
	# Count and check the groups; the empty ones come from "::".
	n=0
	rest=$a
	while [ -n "$rest" ]; do
		g=${rest%%:*}
		if [ "$g" = "$rest" ]; then rest=""; else rest=${rest#*:}; fi
		[ -z "$g" ] && continue
		[ ${#g} -le 4 ] || return 1
		n=$((n + 1))
	done
	if [ $compressed -eq 1 ]; then [ $n -lt $groups ]; else [ $n -eq $groups ]; fi
}

# usable A: an address the egress pool takes.
usable() {
	if is_ipv4 "$1"; then
		first=${1%%.*}
		[ "$1" != 0.0.0.0 ] || die "$1: the unspecified address cannot be an egress address"
		[ "$first" -lt 224 ] || [ "$first" -gt 239 ] || die "$1: a multicast address cannot be an egress address"
		return 0
	fi
	is_ipv6 "$1" || die "\"$1\" is not an IP address (verifyd-egress@ADDR.service takes one)"
	case $1 in [Ff][Ff]*) die "$1: a multicast address cannot be an egress address" ;; esac
	case $1 in *[1-9A-Fa-f]*) ;; *) die "$1: the unspecified address cannot be an egress address" ;; esac
}

# is_hostname N: letters, digits, hyphens and dots, no empty label, at
# most 253 characters (verifyd checks it again).
is_hostname() {
	n=${1%.}
	[ -n "$n" ] && [ ${#n} -le 253 ] || return 1
	case $n in *[!A-Za-z0-9.-]* | .* | *..* | -* | *.-* | *-. | *-) return 1 ;; esac
}

[ $# -eq 2 ] || die "usage: verifyd-egress start|stop|check ADDR"
action=$1 addr=$2
dir=${RUNTIME_DIRECTORY:-/run/verifyd-egress}
dir=${dir%%:*}
systemctl=${SYSTEMCTL:-systemctl}

reload() {
	# Nothing happens if verifyd is not running: it reads the directory at start.
	$systemctl --no-block try-reload-or-restart verifyd.service
}

case $action in
check)
	usable "$addr"
	;;
start)
	usable "$addr"
	helo=${HELO_NAME:-}
	[ -z "$helo" ] || is_hostname "$helo" || die "HELO_NAME \"$helo\" is not a host name"
	mkdir -p "$dir"
	{
		printf '# verifyd-egress@%s.service\n' "$addr"
		[ -z "$helo" ] || printf 'helo_name = %s\n' "$helo"
	} >"$dir/.$addr.tmp"
	mv -f "$dir/.$addr.tmp" "$dir/$addr"
	reload
	;;
stop)
	# No check: whatever start wrote goes.
	case $addr in */* | . | .. | "") die "\"$addr\" is not an IP address" ;; esac
	rm -f "$dir/$addr"
	reload
	;;
*)
	die "usage: verifyd-egress start|stop|check ADDR"
	;;
esac
