package harness

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifyd/verifyd/internal/phase"
)

// PhaseTime is where fresh probes' time went during one level, from
// verifyd's own verifyd_probe_phase_seconds histograms (internal/phase),
// read from its /metrics before and after the level.
type PhaseTime struct {
	Phase string `json:"phase"`
	// PerProbe is how many times the phase was met per probe (a probe
	// meets egress once per session, host_ip once per MX host tried).
	PerProbe float64 `json:"per_probe"`
	// MeanMs is the mean time of one occurrence; MsPerProbe the phase's
	// total time divided by the probes of the level.
	MeanMs     float64 `json:"mean_ms"`
	MsPerProbe float64 `json:"ms_per_probe"`
	// P99Ms is the p99 of one occurrence, from the histogram's buckets
	// (the upper bound of the bucket it falls in: at most about 12 %
	// high); for storage_commit, engine_total and api_overhead only.
	P99Ms float64 `json:"p99_ms,omitempty"`
}

// sampledGauges are the gauges a snapshot keeps beside the histograms'
// sums and counts and the counters: scenario 4 follows the adaptive batch
// share with them.
var sampledGauges = map[string]bool{
	"verifyd_probe_batch_limit":           true,
	"verifyd_probe_batch_sessions":        true,
	"verifyd_probe_sched_latency_seconds": true,
}

// metricsSnapshot is the sums and counts of verifyd's histograms.
type metricsSnapshot map[string]float64

// scrapeMetrics reads verifyd's /metrics at addr (host:port), keeping the
// _sum and _count series.
func scrapeMetrics(addr string) (metricsSnapshot, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (metricsSnapshot, error) {
	m := metricsSnapshot{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		base := name
		if j := strings.IndexByte(base, '{'); j >= 0 {
			base = base[:j]
		}
		if !strings.HasSuffix(base, "_sum") && !strings.HasSuffix(base, "_count") && !strings.HasSuffix(base, "_total") && !strings.HasSuffix(base, "_bucket") && !sampledGauges[base] {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[name] = v
	}
	return m, sc.Err()
}

// phaseTimes is the breakdown between two snapshots over probes probes;
// nil when verifyd exports no phases.
func phaseTimes(before, after metricsSnapshot, probes int) []PhaseTime {
	if probes == 0 || before == nil || after == nil {
		return nil
	}
	var out []PhaseTime
	for _, p := range phase.Names() {
		sum := fmt.Sprintf(`verifyd_probe_phase_seconds_sum{phase=%q}`, p)
		cnt := fmt.Sprintf(`verifyd_probe_phase_seconds_count{phase=%q}`, p)
		a, ok := after[cnt]
		if !ok {
			return nil
		}
		n, s := a-before[cnt], after[sum]-before[sum]
		pt := PhaseTime{Phase: p, PerProbe: round3(n / float64(probes)), MsPerProbe: round3(1000 * s / float64(probes))}
		if n > 0 {
			pt.MeanMs = round3(1000 * s / n)
		}
		out = append(out, pt)
	}
	// The storage commit of the charge and the result, and the engine's
	// own time per probe, for the rest of the picture.
	for _, x := range []struct{ label, series string }{
		{"storage_commit", "verifyd_storage_sync_commit_duration_seconds"},
		{"engine_total", "verifyd_probe_duration_seconds"},
		{"api_overhead", "verifyd_http_validate_overhead_seconds"},
	} {
		n := after[x.series+"_count"] - before[x.series+"_count"]
		s := after[x.series+"_sum"] - before[x.series+"_sum"]
		pt := PhaseTime{Phase: x.label, PerProbe: round3(n / float64(probes)), MsPerProbe: round3(1000 * s / float64(probes))}
		if n > 0 {
			pt.MeanMs = round3(1000 * s / n)
			pt.P99Ms = round3(1000 * bucketQuantile(before, after, x.series, 0.99))
		}
		out = append(out, pt)
	}
	return out
}

// bucketQuantile is the q-quantile of what a VictoriaMetrics histogram
// (series_bucket{vmrange="lo...hi"}) recorded between two snapshots: the
// upper bound of the bucket where it falls; 0 when nothing was recorded.
func bucketQuantile(before, after metricsSnapshot, series string, q float64) float64 {
	type bucket struct{ hi, n float64 }
	var bs []bucket
	total := 0.0
	prefix := series + `_bucket{vmrange="`
	for k, v := range after {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rng := strings.TrimSuffix(k[len(prefix):], `"}`)
		i := strings.Index(rng, "...")
		if i < 0 {
			continue
		}
		hi, err := strconv.ParseFloat(rng[i+3:], 64)
		if err != nil {
			continue
		}
		n := v - before[k]
		if n > 0 {
			bs = append(bs, bucket{hi, n})
			total += n
		}
	}
	if total == 0 {
		return 0
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.hi, b.hi) })
	cum := 0.0
	for _, b := range bs {
		if cum += b.n; cum >= q*total {
			return b.hi
		}
	}
	return bs[len(bs)-1].hi
}

// phaseSection writes where fresh probes' time went, per level, for each
// binary that exports the phases.
func phaseSection(w io.Writer, res *Result) {
	for _, run := range res.Runs {
		f := run.Scenarios.Fresh
		if f == nil || len(f.Levels) == 0 || len(f.Levels[0].Phases) == 0 {
			continue
		}
		p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
		p("### Where a probe's time goes (verifyd %s)\n\n", run.Label)
		p("From verifyd's own `verifyd_probe_phase_seconds{phase}` histograms, read from its `/metrics` before and after each level: milliseconds per probe (the phase's total time over the level's probes), and in brackets the mean of one occurrence where a probe meets it more or less than once. `queue`, `mx`, `host_ip`, `handoff` and `egress` wait for verifyd's own resources (workers, the resolver, another validation's session to the MX address, an egress slot); `connect` to `quit` are the network and the world's %s per reply; `auth_wait` is the auth signals a verdict waits for after SMTP; `hold` and `charge` are the API's credit hold before the probe and its charge, signature and synced write after; `storage_commit` is one synced write (per commit); `engine_total` the engine's whole time per probe, and `api_overhead` verifyd's own measure of the API's time beside it; for these three, the p99 of one occurrence from the histogram's buckets (the bucket's upper bound, up to about 12 %% high).\n\n", fmtDur(res.World.Options.Latency))
		p("| phase |")
		for _, lv := range f.Levels {
			p(" c=%d |", lv.Concurrency)
		}
		p("\n|---|")
		for range f.Levels {
			p("---:|")
		}
		p("\n")
		for i, ph := range f.Levels[0].Phases {
			p("| %s |", ph.Phase)
			for _, lv := range f.Levels {
				if i >= len(lv.Phases) {
					p(" — |")
					continue
				}
				x := lv.Phases[i]
				if x.P99Ms > 0 {
					p(" %.1f (p99 %s) |", x.MsPerProbe, fmtNum(x.P99Ms))
					continue
				}
				if x.PerProbe > 0 && (x.PerProbe < 0.95 || x.PerProbe > 1.05) {
					p(" %.1f (%.1f × %.2f) |", x.MsPerProbe, x.MeanMs, x.PerProbe)
				} else {
					p(" %.1f |", x.MsPerProbe)
				}
			}
			p("\n")
		}
		p("\n")
	}
}
