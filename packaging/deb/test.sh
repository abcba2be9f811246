#!/bin/sh
# test.sh: the install test of the Debian package ("make package-test",
# run by "make test"). It builds the package of this tree and of the
# commit before it, and in a throwaway Debian root (bookworm, minbase with
# systemd, made by mmdebstrap from Debian's packages and cached in
# $VERIFYD_CACHE, default ~/.cache/verifyd) checks:
#
#   - lintian is clean on this tree's package;
#   - the package of the previous commit installs; verifyd -check-config
#     passes on the shipped configuration; the units pass
#     "systemd-analyze verify";
#   - the old verifyd, run on the package's data directory, gets an
#     account, an API key, a validation in its history and its receipt
#     signing key; the upgrade to this tree's package keeps all of them,
#     and the new verifyd serves them: the key works, the balance, the
#     history row and the signing key are the same;
#   - the quickstart of docs/operations.md: a certificate, the shipped
#     configuration's TLS lines uncommented, verifyd started, an address
#     validated with curl over HTTPS (HSTS sent);
#   - removal keeps /var/lib/verifyd and the configuration; purge removes
#     both.
#
# Root is needed (chroot, mounts); mmdebstrap, curl, python3 and openssl
# are installed with apt-get when missing (packaging/apt-install.sh).
# verifyd in the root listens on loopback only and is
# given a loopback DNS upstream where nothing answers: nothing leaves the
# machine.
set -eu

log() { echo "package-test: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (chroot, mount)"
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root_dir"
cache=${VERIFYD_CACHE:-$HOME/.cache/verifyd}
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
tarball=$cache/test-root-bookworm-$arch.tar

for tool in curl python3 openssl; do
	./packaging/apt-install.sh $tool
done
if [ ! -s "$tarball" ]; then
	./packaging/apt-install.sh mmdebstrap
	mkdir -p "$cache"
	log "making the Debian root (cached in $tarball)"
	rm -rf "$tarball.tmp"
	mmdebstrap --variant=minbase --include=systemd,adduser,procps,ca-certificates,curl --mode=root --format=tar \
		bookworm "$tarball.tmp" http://deb.debian.org/debian >&2
	mv "$tarball.tmp" "$tarball"
fi

work=$(mktemp -d)
root=$work/root
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
	umount "$root/proc" 2>/dev/null || true
	git -C "$root_dir" worktree remove --force "$work/prev" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The packages: this tree's, and the previous commit's (built with this
# tree's packaging when that commit has none).
log "building the packages"
./packaging/deb/build.sh "$arch" "$work/new" >/dev/null
if git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then
	git worktree add -q --detach "$work/prev" HEAD~1
	if [ ! -x "$work/prev/packaging/deb/build.sh" ]; then
		# A commit from before the package: this tree's packaging on
		# its files (its make install stages them).
		rm -rf "$work/prev/packaging"
		cp -r packaging "$work/prev/packaging"
	fi
	(cd "$work/prev" && ./packaging/deb/build.sh "$arch" "$work/old" >/dev/null)
else
	# A checkout without history (a shallow clone): the upgrade is from
	# this tree's own package under a lower version, which still shows
	# that the maintainer scripts keep the data across an upgrade.
	v=0.0.$(git rev-list --count HEAD)
	log "no previous commit in this checkout: upgrading from this tree's package as version $v~prev"
	DEB_VERSION="$v~prev" ./packaging/deb/build.sh "$arch" "$work/old" >/dev/null
fi
new=$(ls "$work/new"/*.deb)
old=$(ls "$work/old"/*.deb)
log "old $(basename "$old"), new $(basename "$new")"
./packaging/deb/lintian.sh "$new" >&2 || fail "lintian"

mkdir -p "$root"
tar -C "$root" -xf "$tarball"
mount -t proc proc "$root/proc"
cp "$old" "$new" "$root/tmp/"
in_root() { chroot "$root" "$@"; }

# --- install the previous package
in_root dpkg -i "/tmp/$(basename "$old")" >&2 || fail "the previous package does not install"
in_root getent passwd verifyd >/dev/null || fail "no verifyd user"
[ -d "$root/var/lib/verifyd" ] || fail "no /var/lib/verifyd"
in_root /usr/sbin/verifyd -check-config >&2 || fail "verifyd -check-config fails on the shipped configuration"
in_root systemd-analyze verify /usr/lib/systemd/system/verifyd.service /usr/lib/systemd/system/verifyd-egress@.service >&2 ||
	fail "systemd-analyze verify"

# --- the old verifyd writes accounts, keys, history and its signing key
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
	echo $((20000 + $$ % 20000)))
cat >"$root/etc/verifyd/test.toml" <<EOF
data_dir = "/var/lib/verifyd"
demo_account = false
[http]
listen = "127.0.0.1:$port"
[admin]
socket = "/run/verifyd/admin.sock"
[metrics]
listen = ""
[resolver]
upstreams = ["127.0.0.1:9"]
timeout = "200ms"
[egress]
self_check_interval = "0s"
EOF
install -d -o "$(in_root id -u verifyd)" -g "$(in_root id -g verifyd)" -m 0750 "$root/run/verifyd"
# serve LABEL URL [CURL-OPTION...] -- VERIFYD-ARG...: runs verifyd in the
# root as its user and waits until URL/healthz answers.
serve() {
	label=$1 url=$2
	shift 2
	opts=
	while [ "$1" != -- ]; do
		opts="$opts $1"
		shift
	done
	shift
	chroot --userspec=verifyd:verifyd "$root" /usr/sbin/verifyd "$@" >"$work/verifyd-$label.log" 2>&1 &
	pid=$!
	i=0
	# shellcheck disable=SC2086 # opts are words
	until curl -fsS $opts "$url/healthz" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
			cat "$work/verifyd-$label.log" >&2
			fail "verifyd ($label) did not serve"
		fi
		sleep 0.1
	done
}
start() { serve "$1" "http://127.0.0.1:$port" -- -config /etc/verifyd/test.toml; }
stop() {
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
}
ctl() { in_root verifyctl -socket /run/verifyd/admin.sock -json "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

start old
acct=$(ctl accounts create --name pkgtest --plan growth --credits 100 | json 'd["id"]')
key=$(ctl keys mint "$acct" --scopes validate:read,validate:write | json 'd["key"]')
answer=$(curl -sS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
	-d '{"email":"nobody@pkgtest.invalid"}' "http://127.0.0.1:$port/v1/validate")
echo "$answer" | json 'd["status"]' >/dev/null || fail "validation with the old verifyd: $answer"
results_old=$(curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/results" | json '[r["id"] for r in d["results"]]')
balance_old=$(curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/balance" | json 'd["credits"]')
jwks_old=$(curl -fsS "http://127.0.0.1:$port/.well-known/jwks.json" | json 'sorted(k["kid"] for k in d["keys"])')
stop
log "old verifyd: account $acct, balance $balance_old, results $results_old, signing keys $jwks_old"

# --- upgrade
in_root dpkg -i "/tmp/$(basename "$new")" >&2 || fail "the upgrade does not install"
start new
curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/balance" >/dev/null || fail "the key does not work after the upgrade"
balance_new=$(curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/balance" | json 'd["credits"]')
results_new=$(curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/results" | json '[r["id"] for r in d["results"]]')
jwks_new=$(curl -fsS "http://127.0.0.1:$port/.well-known/jwks.json" | json 'sorted(k["kid"] for k in d["keys"])')
ctl accounts list | grep -q "$acct" || fail "the account is gone after the upgrade"
stop
[ "$balance_new" = "$balance_old" ] || fail "balance $balance_old before the upgrade, $balance_new after"
[ "$results_new" = "$results_old" ] || fail "history $results_old before the upgrade, $results_new after"
[ "$jwks_new" = "$jwks_old" ] || fail "signing keys $jwks_old before the upgrade, $jwks_new after"
log "new verifyd serves the same data: balance $balance_new, results $results_new, signing keys $jwks_new"

# --- the quickstart of docs/operations.md, on the shipped configuration:
# a certificate and its key, the TLS lines uncommented, start, validate
# with curl over HTTPS. The test also moves the listener to a free
# loopback port, turns the metrics listener off and gives the resolver a
# loopback upstream where nothing answers: nothing leaves the machine.
install -d -m 0750 -g "$(in_root id -g verifyd)" "$root/etc/verifyd/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
	-keyout "$root/etc/verifyd/tls/privkey.pem" -out "$root/etc/verifyd/tls/fullchain.pem" 2>/dev/null
chgrp "$(in_root id -g verifyd)" "$root/etc/verifyd/tls/privkey.pem" "$root/etc/verifyd/tls/fullchain.pem"
chmod 0640 "$root/etc/verifyd/tls/privkey.pem" "$root/etc/verifyd/tls/fullchain.pem"
cfg=$root/etc/verifyd/verifyd.toml
sed -i -e 's|^#tls_cert = |tls_cert = |' -e 's|^#tls_key = |tls_key = |' \
	-e "0,/^#listen = \"127.0.0.1:8080\"/s||listen = \"127.0.0.1:$port\"|" \
	-e 's|^#listen = "127.0.0.1:9464"|listen = ""|' -e 's|^#upstreams = .*|upstreams = ["127.0.0.1:9"]|' "$cfg"
grep -q '^tls_cert = ' "$cfg" && grep -q "^listen = \"127.0.0.1:$port\"" "$cfg" || fail "the shipped configuration has no TLS lines to uncomment"
in_root /usr/sbin/verifyd -check-config >&2 || fail "-check-config with TLS"
serve https "https://127.0.0.1:$port" --cacert "$root/etc/verifyd/tls/fullchain.pem" --
answer=$(curl -sS -D "$work/headers" --cacert "$root/etc/verifyd/tls/fullchain.pem" -H "Authorization: Bearer $key" \
	-H 'Content-Type: application/json' -d '{"email":"not..an@address"}' "https://127.0.0.1:$port/v1/validate")
echo "$answer" | json 'd["status"]' >/dev/null || fail "validation over HTTPS: $answer"
grep -qi '^strict-transport-security: max-age=31536000' "$work/headers" || fail "no HSTS over HTTPS"
stop
log "quickstart: HTTPS from the shipped configuration; validated over HTTPS: $(echo "$answer" | json 'd["status"] + "/" + d["checks"]["reason"]')"

# --- remove keeps the data, purge removes it
in_root dpkg -r verifyd >&2 || fail "remove"
[ -d "$root/var/lib/verifyd/db" ] || fail "remove deleted /var/lib/verifyd"
[ -f "$root/etc/verifyd/verifyd.toml" ] || fail "remove deleted the configuration"
[ ! -e "$root/usr/sbin/verifyd" ] || fail "remove left the binary"
in_root dpkg -P verifyd >&2 || fail "purge"
[ ! -e "$root/var/lib/verifyd" ] || fail "purge kept /var/lib/verifyd"
[ ! -e "$root/etc/verifyd" ] || fail "purge kept /etc/verifyd"
log "ok: lintian, install, check-config, systemd-analyze verify, upgrade keeping the data, HTTPS quickstart, remove, purge"
