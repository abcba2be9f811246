package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSmoke runs the whole harness once, small: it builds verifyd and
// mailworld, starts a world of 20 domains and a verifyd, sends a few
// requests per scenario, and checks the JSON result, the report and the
// plot, and that every process it started is gone.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts verifyd and mailworld")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the harness reads /proc")
	}
	out := t.TempDir()
	o := ShortOptions()
	o.World.Domains = 20
	o.World.Latency = 5 * time.Millisecond
	o.FreshLevels = []int{4, 8}
	o.FreshCount = 40
	o.FreshDuration = 5 * time.Second
	o.CacheLevels = []int{4}
	o.CacheCount = 200
	o.CacheDuration = time.Second
	o.BatchSize = 100
	o.BatchTimeout = 20 * time.Second
	o.MixedBatchSize = 50
	o.MixedConcurrency = 4
	o.MixedSingles = 30
	o.FairBatchSize = 100
	o.FairSmallSize = 5
	o.RealWorldDomains = 30
	o.RealWorldRetryWindow = 5 * time.Second
	o.TypoDomains = 30
	o.Config.CommandTimeout = 2 * time.Second // the tarpits of the world
	// A bound that only stops a run gone wrong: about two minutes on a
	// slow 2-core host under make test's other packages, which once ran
	// out a 2-minute bound before the last scenario.
	o.MaxTime = 6 * time.Minute
	o.OutDir = filepath.Join(out, "results")
	o.Report = filepath.Join(out, "RESULTS.md")
	o.Plot = filepath.Join(out, "results", "plot.svg")
	o.Command = "go test ./bench/harness -run TestSmoke"
	if testing.Verbose() {
		o.Log = os.Stderr
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	// Every child is stopped and reaped.
	if len(res.Processes) < 2 {
		t.Fatalf("processes %v: want mailworld and verifyd", res.Processes)
	}
	for _, p := range res.Processes {
		if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after the run: %v", p.Name, p.PID, err)
		}
	}

	// The JSON result, read back as a reader would.
	files, _ := filepath.Glob(filepath.Join(o.OutDir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("result files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tool    string       `json:"tool"`
		Fleet   *FleetResult `json:"fleet"`
		Machine struct {
			CPUs int `json:"cpus"`
		} `json:"machine"`
		Runs []struct {
			Label     string                     `json:"label"`
			Scenarios map[string]json.RawMessage `json:"scenarios"`
			Targets   []Target                   `json:"targets"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Tool != "verifybench" || doc.Machine.CPUs < 1 || len(doc.Runs) != 1 {
		t.Fatalf("result: %s", b)
	}
	run := doc.Runs[0]
	for _, s := range []string{"fresh", "cache", "batch", "mixed", "accuracy", "realworld", "fairness", "typos"} {
		if raw, ok := run.Scenarios[s]; !ok || string(raw) == "null" {
			t.Errorf("scenario %s missing from the result", s)
		}
	}
	var fresh FreshResult
	if err := json.Unmarshal(run.Scenarios["fresh"], &fresh); err != nil {
		t.Fatal(err)
	}
	if len(fresh.Levels) != 2 {
		t.Fatalf("fresh levels %+v", fresh.Levels)
	}
	if ps := fresh.PebbleSync; ps == nil || ps.Latency.N != uint64(ps.Writes) || ps.Latency.P99 <= 0 {
		t.Errorf("bare Pebble synced writes %+v", fresh.PebbleSync)
	}
	for _, lv := range fresh.Levels {
		var rcpt, total float64
		for _, ph := range lv.Phases {
			switch ph.Phase {
			case "rcpt":
				rcpt = ph.MsPerProbe
			case "engine_total":
				total = ph.MsPerProbe
			}
		}
		if rcpt <= 0 || total < rcpt {
			t.Errorf("fresh level c=%d: phases %+v: want rcpt time within the engine's", lv.Concurrency, lv.Phases)
		}
		if lv.OK == 0 || lv.Throughput <= 0 || lv.Latency.P50 <= 0 || lv.Latency.P99 < lv.Latency.P50 || lv.Verifyd.CPUSeconds <= 0 || lv.Verifyd.PeakRSSMB <= 0 {
			t.Errorf("fresh level %+v", lv)
		}
	}
	// Scenario 4 sends MixedSingles singles, however the batch goes: a
	// comparison's two sides do equal work.
	var mixed MixedResult
	if err := json.Unmarshal(run.Scenarios["mixed"], &mixed); err != nil {
		t.Fatal(err)
	}
	if s := mixed.Singles; s == nil || s.Sent != o.MixedSingles {
		t.Errorf("mixed: singles %+v, want %d sent", s, o.MixedSingles)
	}
	var cache CacheResult
	if err := json.Unmarshal(run.Scenarios["cache"], &cache); err != nil {
		t.Fatal(err)
	}
	if cache.Skipped != "" || len(cache.Levels) != 1 || cache.Levels[0].OK == 0 || len(cache.Levels[0].Errors) != 0 {
		t.Errorf("cache %+v", cache)
	}
	var batch BatchResult
	if err := json.Unmarshal(run.Scenarios["batch"], &batch); err != nil {
		t.Fatal(err)
	}
	// The batch endpoints may not exist yet; then the scenario says so.
	if batch.Skipped == "" && (batch.Error != "" || batch.Rows != batch.Size || batch.CompletionSeconds <= 0) {
		t.Errorf("batch %+v", batch)
	}
	var acc AccuracyResult
	if err := json.Unmarshal(run.Scenarios["accuracy"], &acc); err != nil {
		t.Fatal(err)
	}
	if acc.Single == nil || acc.Single.Total == 0 || acc.Single.Total != fresh.Levels[0].OK+fresh.Levels[1].OK {
		t.Errorf("accuracy %+v", acc.Single)
	}
	var rw RealWorldResult
	if err := json.Unmarshal(run.Scenarios["realworld"], &rw); err != nil {
		t.Fatal(err)
	}
	if rw.Error != "" || rw.Single == nil || rw.Batch == nil || rw.Single.Total != rw.Addresses || rw.Batch.Total != rw.Addresses || len(rw.Single.Groups) == 0 {
		t.Errorf("realworld %+v", rw)
	}
	// What the world saw of the egress addresses and what the pool
	// recorded: sessions and RCPTs per address from the world's log,
	// policy blocks and reputation warnings from verifyd.
	if w, e := rw.SingleWorld, rw.SingleEgress; w == nil || w.Sessions <= 0 || w.RCPTs <= 0 || e == nil || e.PolicyFrom == "" || e.ReputationFrom == "" ||
		rw.BatchWorld == nil || rw.BatchWorld.Sessions <= 0 || rw.BatchEgress == nil {
		t.Errorf("realworld cost: singles %+v %+v, batch %+v %+v", rw.SingleWorld, rw.SingleEgress, rw.BatchWorld, rw.BatchEgress)
	}
	var fr FairnessResult
	if err := json.Unmarshal(run.Scenarios["fairness"], &fr); err != nil {
		t.Fatal(err)
	}
	// The smoke world's batch of 100 may end before B's first upload
	// (when it has no tarpit): then the scenario says so, with B's and
	// A's runs alone measured.
	tooSmall := strings.Contains(fr.Skipped, "too small")
	if fr.Error != "" || len(fr.BAlone) != FairRepeats || len(fr.AAlone) < 1 || fr.AAlone[0].Processed != 100 ||
		(!tooSmall && (fr.Skipped != "" || len(fr.BWith) == 0 || len(fr.StartedAt) != len(fr.BWith) ||
			fr.BRatio <= 0 || fr.BWorstRatio < fr.BRatio || fr.ASlowdown <= 0 || len(fr.AAlone) != 2 || len(fr.AWith) != FairSamples)) {
		t.Errorf("fairness %+v", fr)
	}
	// Did you mean, against the typos world's truth: the targets
	// (precision at least 99 %, recall at least 80 % on the generated
	// slips, no suggestion for a domain that takes mail).
	var ty TyposResult
	if err := json.Unmarshal(run.Scenarios["typos"], &ty); err != nil {
		t.Fatal(err)
	}
	if g := ty.Generated; ty.Error != "" || ty.Skipped != "" || g.Slips < 100 || g.Precision() < 0.99 || g.Recall() < 0.80 ||
		ty.TakesMail == 0 || ty.FalseSuggestions != 0 || ty.BatchSuggestions != 0 || ty.Published.Slips == 0 {
		t.Errorf("typos %+v", ty)
	}
	if len(run.Targets) == 0 {
		t.Error("no targets")
	}
	// Scenario 8 runs where PostgreSQL is installed (make postgres), and
	// says why not elsewhere.
	switch f := doc.Fleet; {
	case f == nil:
		t.Error("no fleet scenario")
	case f.Skipped != "":
		if os.Getenv("VERIFYD_PG_TESTS") == "require" {
			t.Errorf("fleet skipped: %s", f.Skipped)
		}
	case f.Error != "" || f.Cache == nil || f.Fresh == nil || f.Batch == nil || f.Cache.Fleet <= 0 || f.Fresh.Fleet <= 0 ||
		f.Fresh.Single <= 0 || f.Batch.Fleet <= 0 || f.Batch.Single <= 0 || f.Batch.Error != "" || f.Cache.PostgresCPUms <= 0:
		t.Errorf("fleet %+v, cache %+v, fresh %+v, batch %+v", f, f.Cache, f.Fresh, f.Batch)
	}

	// The report and the plot.
	md, err := os.ReadFile(o.Report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# verifybench results", "## Targets", "## 1. Fresh single validations", "## 5. Accuracy", "## 6. Real-world mix", "sessions refusing the client / 10k", "## 7. Fairness between accounts", "## 8. Fleet", "## 10. Did you mean", "By kind of server and mailbox", "expected ↓ / got →", filepath.Base(files[0])} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	svg, err := os.ReadFile(o.Plot)
	if err != nil {
		t.Fatal(err)
	}
	if dots, _, _, _ := svgDots(t, svg); len(dots) < 4 {
		t.Errorf("plot has %d dots", len(dots))
	}
}
