#!/bin/sh
# check.sh ("make monitoring-check", run by "make test") checks the
# monitoring assets with Prometheus's own promtool (Debian's prometheus
# package, installed with apt-get when missing):
#   - the alerting rules load, and their unit tests pass (the alerts fire
#     on the series they are about, and only on those);
#   - every query of the Grafana dashboard parses as PromQL (each goes
#     into a throwaway recording rule that promtool checks);
#   - every verifyd_* metric the rules and the dashboard name is one that
#     verifyd registers (its name is in a non-test Go file of the repo).
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$dir/.." && pwd)
"$root/packaging/apt-install.sh" promtool prometheus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

promtool check rules "$dir/verifyd.rules.yml"
(cd "$dir" && promtool test rules verifyd.rules.test.yml)

# The dashboard's queries, with Grafana's variables given values.
python3 - "$dir/grafana-dashboard.json" >"$work/dashboard.rules.yml" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("groups:\n  - name: dashboard\n    rules:")
n = 0
for p in d["panels"]:
    for t in p.get("targets", []):
        e = t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*")
        n += 1
        print("      - record: dashboard_query_%d\n        expr: %s" % (n, json.dumps(e)))
if n == 0:
    sys.exit("no queries in the dashboard")
PY
promtool check rules "$work/dashboard.rules.yml"

missing=0
for m in $(grep -ohE 'verifyd_[a-z0-9_]+' "$dir/verifyd.rules.yml" "$dir/grafana-dashboard.json" | sort -u); do
	base=$(echo "$m" | sed -E 's/_(sum|count|bucket)$//')
	if ! grep -rqE --include='*.go' --exclude='*_test.go' "[\"\`]($m|$base)[\"\`{]" "$root"; then
		echo "monitoring: $m is not a metric verifyd registers" >&2
		missing=1
	fi
done
[ $missing = 0 ]
echo "monitoring: rules, their tests, the dashboard's queries and metric names: ok"
