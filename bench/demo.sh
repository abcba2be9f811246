#!/usr/bin/env bash
# make demo: the whole product in one command, without port 25. Starts the
# simulated mail world (bench/demo/world.json) and a verifyd configured for
# it, validates addresses of every kind, prints the signed receipts, and
# verifies one with verifyctl against the published key set. Everything runs
# on loopback addresses and stops at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

dns=127.0.53.2:1053
api=127.0.0.1:8089
"$BIN/mailworld" -world bench/demo/world.json -dns "$dns" 2>"$work/mailworld.log" &
pids+=($!)
for _ in $(seq 50); do grep -q serving "$work/mailworld.log" && break; sleep 0.1; done
sed 's/^/  /' "$work/mailworld.log"

cat >"$work/verifyd.toml" <<TOML
data_dir = "$work/data"
log_format = "text"
log_level = "warn"
demo_account = true
[http]
listen = "$api"
[metrics]
listen = ""
[resolver]
upstreams = ["$dns"]
[smtp]
port = 2525
helo_name = "verifyd.demo.test"
command_timeout = "4s"
[egress]
addresses = ["127.0.0.2", "127.0.0.3"]
greylist_cooldown = "3s"
self_check_interval = "0s"
[probe]
realtime_budget = "15s"
lists_dir = "$work/lists"
TOML
"$BIN/verifyd" -config "$work/verifyd.toml" >"$work/verifyd.out" 2>"$work/verifyd.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "API on" "$work/verifyd.log" && break; sleep 0.1; done
key=$(grep -o 'svc_live_[A-Za-z0-9_]*' "$work/verifyd.out" | head -1)
echo "  verifyd on http://$api, demo key ${key:0:22}…"
echo

validate() {
  local email=$1 note=$2
  printf '%-24s %s\n' "$email" "($note)"
  curl -s -X POST "http://$api/v1/validate" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d "{\"email\":\"$email\"}" | tee "$work/last.json" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); c=r["checks"]; print("   -> status=%s reason=%s score=%s mx_host=%s catch_all=%s disposable=%s role=%s latency=%sms credits_remaining=%s" % (r["status"], c.get("reason"), r["score"], c.get("mx_host",""), c["is_catch_all"], c["is_disposable"], c["is_role_based"], r["latency_ms"], r["credits_remaining"]))'
  cp "$work/last.json" "$work/$email.json"
}
validate ann@shop.test          "an existing mailbox"
validate nobody@shop.test       "no such mailbox: 550 5.1.1"
validate sales@shop.test        "a role address"
validate whoever@anything.test  "a catch-all domain"
validate temp@mailinator.com    "a disposable domain"
validate bob@slowpoke.test      "greylisted: 450 4.2.0, retried after 3 s from the same address"
validate anyone@tarpit.test     "a tarpit: never greets"
validate x@gone.test            "NXDOMAIN"
echo
echo "The full receipt of ann@shop.test:"
python3 -m json.tool "$work/ann@shop.test.json" | sed 's/^/  /'
echo
echo "Verifying it against the published key set (GET /.well-known/jwks.json):"
curl -s "http://$api/.well-known/jwks.json" >"$work/jwks.json"
"$BIN/verifyctl" receipt verify --jwks "$work/jwks.json" "$work/ann@shop.test.json"
echo "And a tampered copy (score changed to 99):"
sed 's/"score":[0-9]*/"score":99/' "$work/ann@shop.test.json" >"$work/tampered.json"
"$BIN/verifyctl" receipt verify --jwks "$work/jwks.json" "$work/tampered.json" || true
