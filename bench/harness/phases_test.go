package harness

import (
	"strings"
	"testing"

	"github.com/verifyd/verifyd/internal/phase"
)

func TestPhaseTimes(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`# a comment
verifyd_probe_phase_seconds_bucket{phase="rcpt",vmrange="1.000e-02...1.136e-02"} 3
verifyd_probe_phase_seconds_sum{phase="rcpt"} 1.5
verifyd_probe_phase_seconds_count{phase="rcpt"} 100
verifyd_probe_phase_seconds_sum{phase="host_ip"} 0.2
verifyd_probe_phase_seconds_count{phase="host_ip"} 100
verifyd_probe_duration_seconds_sum 10
verifyd_probe_duration_seconds_count 100
`))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := parseMetrics(strings.NewReader(`verifyd_probe_phase_seconds_sum{phase="rcpt"} 3.5
verifyd_probe_phase_seconds_count{phase="rcpt"} 200
verifyd_probe_phase_seconds_sum{phase="host_ip"} 0.6
verifyd_probe_phase_seconds_count{phase="host_ip"} 300
verifyd_probe_duration_seconds_sum 22
verifyd_probe_duration_seconds_count 200
`))
	// Other phases are absent from the after snapshot: an older binary.
	if got := phaseTimes(before, after, 100); got != nil {
		t.Fatalf("phases of a binary without them: %+v", got)
	}
	for _, p := range phase.Names() {
		k := `verifyd_probe_phase_seconds_count{phase="` + p + `"}`
		if _, ok := after[k]; !ok {
			after[k] = 0
		}
	}
	got := map[string]PhaseTime{}
	for _, p := range phaseTimes(before, after, 100) {
		got[p.Phase] = p
	}
	if r := got["rcpt"]; r.PerProbe != 1 || r.MeanMs != 20 || r.MsPerProbe != 20 {
		t.Errorf("rcpt %+v, want 1 per probe, 20 ms each", r)
	}
	if h := got["host_ip"]; h.PerProbe != 2 || h.MeanMs != 2 || h.MsPerProbe != 4 {
		t.Errorf("host_ip %+v, want 2 per probe of 2 ms", h)
	}
	if e := got["engine_total"]; e.MsPerProbe != 120 {
		t.Errorf("engine_total %+v, want 120 ms per probe", e)
	}
}

func TestBucketQuantile(t *testing.T) {
	before, _ := parseMetrics(strings.NewReader(`verifyd_http_validate_overhead_seconds_bucket{vmrange="1.000e-03...1.136e-03"} 10
verifyd_http_validate_overhead_seconds_bucket{vmrange="2.783e-03...3.162e-03"} 0
`))
	after, _ := parseMetrics(strings.NewReader(`verifyd_http_validate_overhead_seconds_bucket{vmrange="1.000e-03...1.136e-03"} 108
verifyd_http_validate_overhead_seconds_bucket{vmrange="2.783e-03...3.162e-03"} 2
verifyd_http_validate_overhead_seconds_bucket{vmrange="8.799e-04...1.000e-03"} 0
`))
	// 98 new below 1.136 ms, 2 new near 3 ms: p99 is in the second bucket,
	// p50 in the first.
	if got := bucketQuantile(before, after, "verifyd_http_validate_overhead_seconds", 0.99); got != 3.162e-03 {
		t.Errorf("p99 %v", got)
	}
	if got := bucketQuantile(before, after, "verifyd_http_validate_overhead_seconds", 0.5); got != 1.136e-03 {
		t.Errorf("p50 %v", got)
	}
	if got := bucketQuantile(before, before, "verifyd_http_validate_overhead_seconds", 0.99); got != 0 {
		t.Errorf("nothing recorded: %v", got)
	}
}
