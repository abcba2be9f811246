package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

// TestMetricsScrape scrapes /metrics after some traffic and parses it with
// the Prometheus text parser: the format is valid and each component's
// metrics are there.
func TestMetricsScrape(t *testing.T) {
	run := testWorld(t, 0)
	cfg := strings.Replace(worldConfig(run, ""), "[metrics]\nlisten = \"\"", "[metrics]\nlisten = \"127.0.0.1:0\"", 1)
	cfg = strings.Replace(cfg, `log_level = "warn"`, `log_level = "info"`, 1)
	in := startIn(t, t.TempDir(), cfg)
	c := &client{t: t, base: in.base, key: in.key}
	for _, e := range []string{"ann@shop.test", "zed@shop.test", "x@gone.test"} {
		c.do("POST", "/v1/validate", c.key, `{"email":"`+e+`"}`)
	}
	c.do("GET", "/v1/nothing", c.key, "")
	line := in.waitLog(t, "verifyd listening")
	var l struct{ Metrics string }
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Metrics == "" {
		t.Fatalf("no metrics address in %s", line)
	}
	resp, err := http.Get("http://" + l.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as Prometheus text: %v", err)
	}
	for _, name := range []string{
		"verifyd_http_requests_total", "verifyd_http_request_duration_seconds_bucket",
		"verifyd_probe_results_total", "verifyd_probe_smtp_replies_total", "verifyd_probe_sessions_total",
		"verifyd_resolver_cache_hits_total", "verifyd_egress_sessions_total",
		"verifyd_storage_commits_total", "verifyd_storage_pebble_compactions_total",
		"verifyd_storage_pebble_disk_usage_bytes", "verifyd_credits_charged_total",
		"verifyd_probe_workers_busy", "go_goroutines",
	} {
		if _, ok := fams[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	// The runtime profiles are off unless metrics.pprof asks for them.
	if resp, err := http.Get("http://" + l.Metrics + "/debug/pprof/heap"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/debug/pprof/heap without metrics.pprof: %d, want 404", resp.StatusCode)
		}
	}
	// Labels carry what the issue asks: route and status, verdict and reason.
	found := false
	for _, m := range fams["verifyd_probe_results_total"].GetMetric() {
		lb := map[string]string{}
		for _, p := range m.GetLabel() {
			lb[p.GetName()] = p.GetValue()
		}
		v := m.GetCounter().GetValue() + m.GetUntyped().GetValue() + m.GetGauge().GetValue()
		if lb["status"] == "invalid" && lb["reason"] == "domain_not_found" && v >= 1 {
			found = true
		}
	}
	if !found {
		t.Error("no verifyd_probe_results_total{status=invalid,reason=domain_not_found} after such a validation")
	}
}

// TestMetricsPprof: with metrics.pprof, the metrics listener serves Go's
// runtime profiles beside /metrics.
func TestMetricsPprof(t *testing.T) {
	run := testWorld(t, 0)
	cfg := strings.Replace(worldConfig(run, ""), "[metrics]\nlisten = \"\"", "[metrics]\nlisten = \"127.0.0.1:0\"\npprof = true", 1)
	cfg = strings.Replace(cfg, `log_level = "warn"`, `log_level = "info"`, 1)
	in := startIn(t, t.TempDir(), cfg)
	line := in.waitLog(t, "verifyd listening")
	var l struct{ Metrics string }
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Metrics == "" {
		t.Fatalf("no metrics address in %s", line)
	}
	for path, want := range map[string]string{
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
		"/metrics":                       "go_goroutines",
	} {
		resp, err := http.Get("http://" + l.Metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d, %.200q; want 200 with %q", path, resp.StatusCode, b, want)
		}
	}
}
