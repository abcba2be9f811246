package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/cmd/verifyd/config"
)

func TestLeastSquaresSlope(t *testing.T) {
	for _, tc := range []struct {
		xs, ys []float64
		want   float64
	}{
		{[]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2},
		{[]float64{0, 1, 2, 3}, []float64{4, 4, 4, 4}, 0},
		{[]float64{0, 1, 2, 3}, []float64{1, 3, 1, 3}, 0.4},
		{[]float64{1}, []float64{9}, 0},
		{[]float64{2, 2}, []float64{1, 5}, 0},
	} {
		if got := leastSquaresSlope(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("slope of %v, %v = %v, want %v", tc.xs, tc.ys, got, tc.want)
		}
	}
}

// soakSamples makes a sample every 10 s for length, each metric from its
// function of the time in seconds.
func soakSamples(length time.Duration, rss, gor, fds, disk func(t float64) float64) []SoakSample {
	var out []SoakSample
	for t := 0.0; t <= length.Seconds(); t += 10 {
		out = append(out, SoakSample{T: t, RSSMB: rss(t), Goroutines: gor(t), OpenFiles: fds(t), PebbleDiskMB: disk(t),
			Fresh: int64(20 * t), Cache: int64(100 * t)})
	}
	return out
}

func TestSoakVerdict(t *testing.T) {
	const length = 30 * time.Minute
	warm := DefaultSoakOptions()
	warm.Duration = length
	flat := func(v float64) func(float64) float64 {
		return func(t float64) float64 {
			// Noise of ±5 % that does not trend.
			return v * (1 + 0.05*math.Sin(t/7))
		}
	}
	// A cache filling up to its bound within the warm-up: flat after it.
	filling := func(t float64) float64 { return 300 - 200*math.Exp(-t/60) }
	// One goroutine more every 5 s: 360 over the soak.
	leak := func(t float64) float64 { return 150 + t/5 }
	// One open file more a minute: 30 over the soak, against a floor of
	// 20 and a median near 60.
	slowLeak := func(t float64) float64 { return 45 + t/60 }

	for _, tc := range []struct {
		name     string
		samples  []SoakSample
		wantFlat bool
		grew     []string
	}{
		{"flat", soakSamples(length, filling, flat(150), flat(60), flat(200)), true, nil},
		{"goroutine leak", soakSamples(length, filling, leak, flat(60), flat(200)), false, []string{"goroutines"}},
		{"slow descriptor leak", soakSamples(length, flat(300), flat(150), slowLeak, flat(200)), false, []string{"open_files"}},
		// 12 MB of disk over the soak: under the 16 MB floor.
		{"small disk growth", soakSamples(length, flat(300), flat(150), flat(60), func(t float64) float64 { return 100 + t/150 }), true, nil},
		// Shrinking is not growth.
		{"shrinking", soakSamples(length, func(t float64) float64 { return 500 - t/10 }, flat(150), flat(60), flat(200)), true, nil},
	} {
		ms := soakFigures(tc.samples, warm.WarmupTime(), length)
		ok, verdict, grew := soakVerdict(ms, diskPerRecord(tc.samples, warm.WarmupTime()), length)
		if ok != tc.wantFlat || !slices.Equal(grew, tc.grew) {
			t.Errorf("%s: flat %v, verdict %q, grew %v; want flat %v, grew %v\n%+v", tc.name, ok, verdict, grew, tc.wantFlat, tc.grew, ms)
		}
		if ok && verdict != "flat after warm-up" {
			t.Errorf("%s: verdict %q", tc.name, verdict)
		}
		for _, g := range tc.grew {
			for _, m := range ms {
				if m.Key == g && !strings.Contains(verdict, m.Name) {
					t.Errorf("%s: verdict %q does not name %s", tc.name, verdict, m.Name)
				}
			}
		}
	}

	// The figures of the goroutine leak: 5 s a goroutine is 720 an hour,
	// 360 over 30 minutes; the first sample after the 5-minute warm-up
	// is at 300 s.
	ms := soakFigures(soakSamples(length, filling, leak, flat(60), flat(200)), warm.WarmupTime(), length)
	g := ms[1]
	if g.Key != "goroutines" || g.Samples != 151 || g.First != 210 || g.Last != 510 || g.Max != 510 || g.Median != 360 ||
		math.Abs(g.SlopePerHour-720) > 0.01 || math.Abs(g.Growth-360) > 0.01 || g.Tolerance != 50 {
		t.Errorf("goroutine figures %+v", g)
	}

	// Disk per record: 120 records a second after the warm-up.
	samples := soakSamples(length, flat(300), flat(150), flat(60), func(t float64) float64 { return t / 60 })
	if got := diskPerRecord(samples, warm.WarmupTime()); math.Abs(got-(1<<20)/60.0/120) > 0.01 {
		t.Errorf("disk per record %v", got)
	}

	// Too few samples after the warm-up: no verdict.
	ms = soakFigures(soakSamples(time.Minute, flat(1), flat(1), flat(1), flat(1)), 55*time.Second, time.Minute)
	if ok, verdict, _ := soakVerdict(ms, 0, time.Minute); ok || !strings.HasPrefix(verdict, "not judged") {
		t.Errorf("verdict on one sample: %v %q", ok, verdict)
	}
}

func TestSoakWarmup(t *testing.T) {
	for _, tc := range []struct{ d, set, want time.Duration }{
		{30 * time.Minute, 0, 5 * time.Minute},
		{2 * time.Minute, 0, 30 * time.Second},
		{2 * time.Hour, 0, 5 * time.Minute},
		{30 * time.Minute, time.Minute, time.Minute},
	} {
		o := SoakOptions{Duration: tc.d, Warmup: tc.set}
		if got := o.WarmupTime(); got != tc.want {
			t.Errorf("warm-up of %s (set %s) = %s, want %s", tc.d, tc.set, got, tc.want)
		}
	}
}

func TestSpliceSection(t *testing.T) {
	report := "# verifybench results\n\n| | |\n\n## 1. Fresh\n\ntable\n\n## 8. Fleet\n\nfleet\n\n## verifyd's configuration\n\n```toml\n## not a heading\n[http]\n```\n"
	soak1 := "## Soak: 2 min of steady mixed load\n\nfirst\n\n### Requests\n\nrows\n"
	soak2 := "## Soak: 30 min of steady mixed load\n\nsecond\n"

	// Inserted before the configuration, the other sections kept.
	doc := spliceSection(report, soakHeading, soak1)
	want := strings.Replace(report, "## verifyd's configuration", soak1+"\n## verifyd's configuration", 1)
	if doc != want {
		t.Fatalf("insert:\n%s\nwant:\n%s", doc, want)
	}
	if got := extractSection(doc, soakHeading); got != soak1+"\n" {
		t.Errorf("extract %q", got)
	}
	// Replaced in place.
	doc = spliceSection(doc, soakHeading, soak2)
	if want := strings.Replace(report, "## verifyd's configuration", soak2+"\n## verifyd's configuration", 1); doc != want {
		t.Errorf("replace:\n%s\nwant:\n%s", doc, want)
	}
	// A new report of the scenarios keeps the soak's section.
	kept := spliceSection(report, soakHeading, extractSection(doc, soakHeading))
	if kept != doc {
		t.Errorf("carried over:\n%s\nwant:\n%s", kept, doc)
	}
	// Without a known heading, at the end; without a report, under the
	// title; the last section replaced.
	if got := spliceSection("# r\n\n## 1. Fresh\n\nx\n", soakHeading, soak2); got != "# r\n\n## 1. Fresh\n\nx\n\n"+soak2 {
		t.Errorf("append: %q", got)
	}
	if got := spliceSection("", soakHeading, soak2); got != "# verifybench results\n\n"+soak2 {
		t.Errorf("new report: %q", got)
	}
	if got := spliceSection("# r\n\n"+soak1, soakHeading, soak2); got != "# r\n\n"+soak2 {
		t.Errorf("last section: %q", got)
	}
	// A "## " line inside a code block is not a heading.
	if got := extractSection("x\n```\n## Soak\n```\n", soakHeading); got != "" {
		t.Errorf("heading in a code block: %q", got)
	}
}

func TestParseSeries(t *testing.T) {
	text := "# HELP x\ngo_goroutines 123\ngo_goroutines_other 7\nverifyd_webhooks_attempts_total{outcome=\"failed\"} 4\nbad line\n"
	m, err := parseSeries(strings.NewReader(text), func(n string) bool {
		return n == "go_goroutines" || strings.HasPrefix(n, "verifyd_webhooks_")
	})
	if err != nil || len(m) != 2 || m["go_goroutines"] != 123 || m[`verifyd_webhooks_attempts_total{outcome="failed"}`] != 4 {
		t.Errorf("%v %v", m, err)
	}
}

// TestSoakConfigParses checks the soak's webhook settings with verifyd's
// own parser.
func TestSoakConfigParses(t *testing.T) {
	c := DefaultVerifydConfig()
	c.DataDir, c.AdminSocket, c.DNS, c.SMTPPort = "/tmp/d", "/tmp/a.sock", "127.0.53.7:53", 2525
	c.WebhooksAllowPrivate = true
	c.WebhookRetrySchedule = []time.Duration{2 * time.Second, 5 * time.Second}
	c.RetryWindow = 2 * time.Minute
	got, err := config.Parse(c.TOML())
	if err != nil {
		t.Fatalf("%v\n%s", err, c.TOML())
	}
	if !got.Webhooks.AllowPrivate || !slices.Equal(got.Webhooks.RetrySchedule, c.WebhookRetrySchedule) || got.Jobs.RetryWindow != 2*time.Minute {
		t.Errorf("webhooks %+v, jobs %+v", got.Webhooks, got.Jobs)
	}
	if strings.Contains(DefaultVerifydConfig().TOML(), "[webhooks]") {
		t.Error("the scenarios' config has a [webhooks] table")
	}
}

// TestSoakSmoke runs a soak of 40 s end to end in a world of 20 domains:
// the samples, the figures, the requests of every kind, webhooks retried
// after the receiver's 500s, the JSON, and the report's section spliced
// into an existing report. It takes about a minute, so it runs only with
// VERIFYD_SOAK_TESTS=1 (go test ./bench/... stays fast; make test does not
// run it).
func TestSoakSmoke(t *testing.T) {
	if os.Getenv("VERIFYD_SOAK_TESTS") == "" || testing.Short() {
		t.Skip("a soak of 40 s: set VERIFYD_SOAK_TESTS=1")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the harness reads /proc")
	}
	out := t.TempDir()
	o := ShortOptions()
	o.World.Domains = 20
	o.World.Latency = 5 * time.Millisecond
	o.Config.CommandTimeout = 2 * time.Second
	o.Soak.Duration = 40 * time.Second
	o.Soak.Sample = 2 * time.Second
	o.Soak.Warmup = 10 * time.Second
	o.Soak.FreshRate = 10
	o.Soak.CacheRate = 30
	o.Soak.BatchSize = 50
	o.Soak.BatchEvery = 8 * time.Second
	o.Soak.HookFail = 0.5
	o.Soak.HookRetry = []time.Duration{500 * time.Millisecond, time.Second}
	o.Soak.RetryWindow = 20 * time.Second
	o.OutDir = filepath.Join(out, "results")
	o.Report = filepath.Join(out, "RESULTS.md")
	o.SoakPlot = filepath.Join(out, "results", "soak.svg")
	o.Command = "go test ./bench/harness -run TestSoakSmoke"
	if testing.Verbose() {
		o.Log = os.Stderr
	}
	old := "# verifybench results\n\n## 1. Fresh single validations\n\nkept\n\n## verifyd's configuration\n\n```toml\n[http]\n```\n"
	if err := os.WriteFile(o.Report, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, p := range res.Processes {
		if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after the run: %v", p.Name, p.PID, err)
		}
	}

	files, _ := filepath.Glob(filepath.Join(o.OutDir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("result files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Mode string      `json:"mode"`
		Soak *SoakResult `json:"soak"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Soak
	if doc.Mode != "soak" || s == nil || s.Error != "" {
		t.Fatalf("result: %s", b)
	}
	// A sample every 2 s from 0 to 40 s.
	if len(s.Samples) < 18 || s.Samples[0].T > 1 || s.Samples[len(s.Samples)-1].T < 38 {
		t.Errorf("%d samples, from %v", len(s.Samples), s.Samples)
	}
	for _, smp := range s.Samples {
		if smp.RSSMB <= 0 || smp.Goroutines <= 0 || smp.OpenFiles <= 0 || smp.PebbleDiskMB <= 0 || len(smp.Missing) > 0 {
			t.Errorf("sample %+v", smp)
		}
	}
	if last := s.Samples[len(s.Samples)-1]; last.PebbleMetricMB <= 0 || last.DataDirMB < last.PebbleDiskMB || last.GoHeldMB < last.HeapInuseMB || last.HeapInuseMB <= 0 {
		t.Errorf("last sample %+v", last)
	}
	if len(s.Metrics) != 4 {
		t.Fatalf("metrics %+v", s.Metrics)
	}
	for _, f := range s.Metrics {
		if f.Samples < 10 || f.Median <= 0 || f.Max < f.Median || f.Tolerance <= 0 {
			t.Errorf("figures %+v", f)
		}
	}
	if s.Verdict == "" || (s.Flat != (s.Verdict == "flat after warm-up")) {
		t.Errorf("verdict %v %q", s.Flat, s.Verdict)
	}
	kinds := map[string]SoakKind{}
	for _, k := range s.Kinds {
		kinds[k.Kind] = k
	}
	for _, name := range []string{"fresh single", "cache hit", "batch upload", "job status poll", "batch job", "CSV download"} {
		k := kinds[name]
		if k.OK == 0 || len(k.Errors) > 0 || k.Latency.P50 <= 0 {
			t.Errorf("%s: %+v", name, k)
		}
	}
	// 40 s at 10 and 30 a second; the cache load starts with the first
	// answers.
	if n := kinds["fresh single"].Sent; n < 300 || n > 410 {
		t.Errorf("%d fresh singles sent", n)
	}
	if n := kinds["batch job"].OK; n != 5 {
		t.Errorf("%d jobs completed, want 5 (at 5, 13, 21, 29, 37 s)", n)
	}
	h := s.Webhooks
	if h.JobsEnded != 5 || len(h.Missing) > 0 || h.Events["batch.completed"] != 5 || h.Answered500 == 0 || h.Retried == 0 ||
		h.Attempts != h.Answered500+h.Accepted || h.Verifyd[`verifyd_webhooks_attempts_total{outcome="failed"}`] != float64(h.Answered500) {
		t.Errorf("webhooks %+v", h)
	}

	md, err := os.ReadFile(o.Report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 1. Fresh single validations\n\nkept", "## Soak: 40s of steady mixed load", "**Verdict: ", "| RSS (VmRSS), MB |",
		"| goroutines (go_goroutines) |", "| open files (/proc/pid/fd) |", "| Pebble on disk, MB |", "### Requests", "| fresh single |",
		"**Webhooks.**", filepath.Base(files[0]), "soak.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if i, j := bytes.Index(md, []byte("## Soak")), bytes.Index(md, []byte("## verifyd's configuration")); i < 0 || j < i {
		t.Errorf("the soak's section is not before the configuration")
	}
	svg, err := os.ReadFile(o.SoakPlot)
	if err != nil {
		t.Fatal(err)
	}
	if dots, _, _, _ := svgDots(t, svg); len(dots) < 4*18 {
		t.Errorf("plot has %d dots", len(dots))
	}
}
