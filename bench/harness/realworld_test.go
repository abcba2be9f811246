package harness

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/bench/world"
)

func TestWorldCost(t *testing.T) {
	egress := EgressRange(netip.MustParseAddr("127.0.0.34"), 2)
	before := &world.LogStats{
		Clients:       map[string]uint64{"127.0.0.34": 10, "127.0.0.50": 7},
		ClientRcpts:   map[string]uint64{"127.0.0.34": 20},
		ClientRefused: map[string]uint64{},
	}
	after := &world.LogStats{
		Clients:       map[string]uint64{"127.0.0.34": 30, "127.0.0.35": 20, "127.0.0.50": 100},
		ClientRcpts:   map[string]uint64{"127.0.0.34": 70, "127.0.0.35": 50, "127.0.0.50": 300},
		ClientRefused: map[string]uint64{"127.0.0.35": 2, "127.0.0.50": 9},
	}
	c := worldCost(before, after, egress, 20)
	if c == nil || c.Sessions != 2 || c.RCPTs != 5 || c.Refused != 2 || c.RefusedPer10k != 1000 {
		t.Errorf("cost %+v, want 2 sessions, 5 RCPTs, 2 refused (1,000 per 10k) per address", c)
	}
	if worldCost(nil, after, egress, 20) != nil || worldCost(before, after, egress, 0) != nil {
		t.Error("a cost without both reads or addresses")
	}
}

func TestEgressCost(t *testing.T) {
	before := metricsSnapshot{
		`verifyd_egress_outcomes_total{addr="127.0.0.34",outcome="policy"}`: 1,
		`verifyd_egress_outcomes_total{addr="127.0.0.34",outcome="ok"}`:     50,
	}
	after := metricsSnapshot{
		`verifyd_egress_outcomes_total{addr="127.0.0.34",outcome="policy"}`:     4,
		`verifyd_egress_outcomes_total{addr="127.0.0.35",outcome="policy"}`:     2,
		`verifyd_egress_outcomes_total{addr="127.0.0.34",outcome="ok"}`:         90,
		`verifyd_egress_cooldowns_total{addr="127.0.0.34",reason="policy"}`:     3,
		`verifyd_egress_reputation_warnings_total{addr="127.0.0.34"}`:           0,
		`verifyd_egress_reputation_warnings_total{addr="127.0.0.35"}`:           1,
		`verifyd_egress_cooldowns_total{addr="127.0.0.34",reason="greylisted"}`: 8,
	}
	c := egressCost(before, after, 7, 2000)
	if c.PolicyBlocks != 5 || c.PolicyBlocksPer10k != 25 || c.PolicyFrom != "verifyd_egress_outcomes_total" ||
		c.ReputationWarnings != 1 || c.ReputationWarningsPer10k != 5 || c.ReputationFrom != "verifyd_egress_reputation_warnings_total" {
		t.Errorf("cost %+v", c)
	}
	// An older verifyd (a447808): no reputation counter, the log lines
	// count.
	old := metricsSnapshot{`verifyd_egress_cooldowns_total{addr="127.0.0.34",reason="policy"}`: 3}
	c = egressCost(metricsSnapshot{}, old, 4, 10000)
	if c.PolicyBlocks != 3 || c.PolicyFrom != "verifyd_egress_cooldowns_total" || c.ReputationWarnings != 4 || c.ReputationFrom != "log" || c.ReputationWarningsPer10k != 4 {
		t.Errorf("older verifyd: %+v", c)
	}
	if egressCost(nil, after, 0, 10) != nil {
		t.Error("a cost without the first scrape")
	}
}

func TestReputationLogLine(t *testing.T) {
	for line, want := range map[string]bool{
		`{"time":"2026-11-27T10:00:00Z","level":"WARN","msg":"egress reputation","pkg":"egress","event":"reputation","addr":"127.0.0.34"}`: true,
		`time=2026-11-27T10:00:00Z level=WARN msg="egress reputation" pkg=egress addr=127.0.0.34`:                                          true,
		`{"time":"2026-11-27T10:00:00Z","level":"INFO","msg":"egress policy_block","addr":"127.0.0.34"}`:                                   false,
		`{"level":"INFO","msg":"egress addresses changed"}`:                                                                                false,
	} {
		if got := isReputationLog(line); got != want {
			t.Errorf("%s: %v, want %v", line, got, want)
		}
	}
}

func TestEgressTargetsAndSummary(t *testing.T) {
	c := NewConfusion()
	for range 1000 {
		c.AddExpected(world.Expectation{Email: "a@x.test", Status: "valid", Reason: "ok"}, "valid", "ok", true)
	}
	rw := &RealWorldResult{Single: c, Batch: c,
		SingleWorld:  &WorldCost{Sessions: 1.2, RCPTs: 2.5, Refused: 3, RefusedPer10k: 30},
		BatchWorld:   &WorldCost{Sessions: 1.1, RCPTs: 2.4, Refused: 2, RefusedPer10k: 20},
		SingleEgress: &EgressCost{PolicyBlocks: 3, PolicyBlocksPer10k: 30, PolicyFrom: "verifyd_egress_outcomes_total", ReputationFrom: "log"},
		BatchEgress:  &EgressCost{PolicyBlocks: 2, PolicyBlocksPer10k: 20},
	}
	ts := egressTargets(rw)
	if len(ts) != 2 || ts[0].Met == nil || !*ts[0].Met || ts[1].Met == nil || !*ts[1].Met || ts[1].Value != 25 {
		t.Errorf("targets %+v", ts)
	}
	rw.BatchEgress.ReputationWarnings, rw.BatchEgress.PolicyBlocks = 4, 9
	ts = egressTargets(rw)
	if *ts[0].Met || *ts[1].Met || ts[0].Value != 20 {
		t.Errorf("with warnings and blocks beyond the refusals: %+v", ts)
	}
	if ts := egressTargets(nil); ts[0].Met != nil || ts[1].Met != nil {
		t.Errorf("not run: %+v", ts)
	}
	var b bytes.Buffer
	egressSummary(&b, &Result{Runs: []*RunResult{{Label: "A", Scenarios: Scenarios{RealWorld: rw}}, {Label: "B", Scenarios: Scenarios{RealWorld: &RealWorldResult{Skipped: "x"}}}}})
	for _, want := range []string{"| A | singles | 100.00 % | 100.00 % | 1.200 | 2.500 | 30.0 | 30.0 (3) | 0.0 (0) |", "| A | batch | 100.00 % | — | 1.100 | 2.400 | 20.0 | 20.0 (9) | 0.0 (4) |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "| B |") {
		t.Errorf("a skipped run in the summary:\n%s", b.String())
	}
}
