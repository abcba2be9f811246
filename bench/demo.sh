#!/usr/bin/env bash
# make demo: start the simulated mail world and a verifyd configured for it,
# show them talking, and stop both. Everything stays on loopback addresses.
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

dns=127.0.53.1:1053
"$BIN/mailworld" -gen -domains 200 -seed 42 -latency 20ms -dns "$dns" \
  -write-world "$work/world.json" -write-expected "$work/expected.jsonl" 2>"$work/mailworld.log" &
pids+=($!)
for _ in $(seq 50); do grep -q serving "$work/mailworld.log" && break; sleep 0.1; done
cat "$work/mailworld.log"

cat >"$work/verifyd.toml" <<TOML
data_dir = "$work/data"
log_format = "text"
[http]
listen = "127.0.0.1:8089"
[metrics]
listen = "127.0.0.1:0"
[resolver]
upstreams = ["$dns"]
[smtp]
port = 2525
helo_name = "verifyd.demo.test"
TOML
"$BIN/verifyd" -config "$work/verifyd.toml" 2>"$work/verifyd.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "API on" "$work/verifyd.log" && break; sleep 0.1; done
grep "API on" "$work/verifyd.log"
echo
echo "health: $(curl -s http://127.0.0.1:8089/healthz)"
echo
echo "a few of the world's addresses and the verdicts a correct verifier reaches:"
head -n 12 "$work/expected.jsonl"
