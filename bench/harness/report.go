package harness

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// writePlot draws scenario 1's latency against throughput, p50 and p99
// per binary, one point per concurrency level.
func writePlot(path string, res *Result) error {
	c := Chart{
		Title:  "verifyd: fresh single validations, latency against throughput",
		XLabel: "throughput (successful probes per second, sustained)",
		YLabel: "latency (ms)",
		Guides: []Guide{{X: TargetFreshPerSec, Label: "target " + itoa(TargetFreshPerSec) + "/s"}},
	}
	w := res.World.Options
	c.Subtitle = fmt.Sprintf("%s mode, %s: world of %s domains, %s per SMTP reply; %d cores shared by verifyd, the world and the load",
		res.Mode, res.StartedAt.Format("2006-01-02 15:04 UTC"), itoa(res.World.Domains), fmtDur(w.Latency), res.Machine.CPUs)
	colors := [][3]string{{"#1f77b4", "#d62728", "#7f7f7f"}, {"#17becf", "#ff7f0e", "#bcbd22"}}
	lo, hi := math.Inf(1), 0.0
	for i, run := range res.Runs {
		if run.Scenarios.Fresh == nil || len(run.Scenarios.Fresh.Levels) == 0 {
			continue
		}
		name := ""
		if len(res.Runs) > 1 {
			name = run.Label + ": "
		}
		col := colors[i%2]
		p50 := Series{Name: name + "p50", Color: col[0], Dashed: i == 1}
		p99p := Series{Name: name + "p99, prompt addresses", Color: col[1], Dashed: i == 1}
		p99 := Series{Name: name + "p99, all addresses", Color: col[2], Dashed: true}
		for _, lv := range run.Scenarios.Fresh.Levels {
			if lv.OK == 0 {
				continue
			}
			label := ""
			if i == 0 {
				label = fmt.Sprintf("c=%d", lv.Concurrency)
			}
			p50.Points = append(p50.Points, Point{X: lv.Throughput, Y: lv.Latency.P50, Label: label})
			p99.Points = append(p99.Points, Point{X: lv.Throughput, Y: lv.Latency.P99})
			lo = math.Min(lo, lv.Latency.P50)
			hi = math.Max(hi, lv.Latency.P99)
			if lv.Prompt != nil && lv.Prompt.N > 0 {
				p99p.Points = append(p99p.Points, Point{X: lv.Throughput, Y: lv.Prompt.P99})
				lo = math.Min(lo, lv.Prompt.P99)
			}
		}
		c.Series = append(c.Series, p50, p99p)
		if len(res.Runs) == 1 {
			c.Series = append(c.Series, p99)
		}
	}
	c.LogY = lo > 0 && hi/lo > 20
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeMarkdown writes the human report.
func writeMarkdown(w io.Writer, res *Result, jsonRel, plotRel string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	m := res.Machine
	p("# verifybench results\n\n")
	p("Written by `verifybench` (bench/cmd/verifybench) at the end of its last run; the numbers of every run are kept as JSON in `bench/results/`. See [README.md](README.md) for what each scenario does.\n\n")
	p("| | |\n|---|---|\n")
	p("| date | %s (%s mode, %s) |\n", res.StartedAt.Format("2006-01-02 15:04:05 UTC"), res.Mode, (time.Duration(res.Seconds * float64(time.Second))).Round(time.Second))
	p("| command | `%s` |\n", res.Command)
	p("| machine | %s, %d CPUs, %.1f GiB RAM, Linux %s, %s |\n", orDash(m.CPUModel), m.CPUs, float64(m.MemTotal)/(1<<30), orDash(m.Kernel), m.GoVersion)
	if res.Git != "" {
		p("| code | %s |\n", res.Git)
	}
	wo := res.World.Options
	if wo.Profile == world.ProfileRealWorld {
		p("| world | profile %s: %s domains (seed %d), %s hosts, %s addresses, mailbox providers and MX providers weighted by market share (bench/RESULTS.md, \"Real-world mix\"); %s before every SMTP reply |\n",
			wo.Profile, itoa(res.World.Domains), wo.Seed, itoa(res.World.Hosts), itoa(res.World.Addresses), fmtDur(wo.Latency))
	} else {
		p("| world | %s domains (seed %d), %s hosts, %s addresses; %s before every SMTP reply; STARTTLS %.0f %%, catch-all %.0f %%, greylisting %.0f %%, tarpits %.0f %%, auth records %.0f %% |\n",
			itoa(res.World.Domains), wo.Seed, itoa(res.World.Hosts), itoa(res.World.Addresses), fmtDur(wo.Latency), 100*wo.STARTTLS, 100*wo.CatchAll, 100*wo.Greylist, 100*wo.Tarpit, 100*wo.Auth)
	}
	for _, run := range res.Runs {
		built := ""
		if run.Built {
			built = " (built from this tree by the harness)"
		}
		p("| verifyd %s | `%s`%s; credits via %s |\n", run.Label, run.Binary, built, orDash(run.CreditsVia))
	}
	p("| result | [`%s`](%s) |\n\n", filepath.Base(jsonRel), jsonRel)
	p("The machine is shared: verifyd, the simulated world (`mailworld`, a separate process) and the load generator (this harness) all run on its %d cores, and other work on the machine adds noise: figures of one run can differ from the next by tens of percent, so compare runs (the JSON files in `results/`) or binaries in one run (`-compare`) rather than single numbers. verifyd's CPU and memory are read from `/proc/<pid>` alone; the world's and the client's share of the CPU is in the tables.\n\n", m.CPUs)
	if res.Interrupted {
		p("**This run was interrupted; its figures are partial.**\n\n")
	}
	for _, e := range res.Errors {
		p("**Error:** %s\n\n", oneLine(e))
	}

	// Targets.
	p("## Targets\n\n")
	if len(res.Runs) > 1 {
		p("For verifyd A; B's are in the JSON.\n\n")
	}
	if len(res.Runs) > 0 {
		p("A *machine-relative* target is a throughput or a time: it was set on one machine kind (2 vCPUs, the world and the load generator sharing them) and moves with the CPU's speed, so read it with the machine line above; the others are ratios measured within this run, or agreements, and hold on any machine.\n\n")
		p("| target | figure | measured | target | machine-relative | met |\n|---|---|---:|---|---|---|\n")
		for _, t := range res.Runs[0].Targets {
			val := "—"
			if t.Met != nil || t.Value != 0 {
				val = fmtValue(t.Value, t.Unit)
			}
			mark := "—"
			if t.Met != nil {
				mark = "**not met**"
				if *t.Met {
					mark = "met"
				}
			}
			note := ""
			if t.Note != "" {
				note = "<br>" + t.Note
			}
			rel := "no"
			if t.Relative {
				rel = "yes"
			}
			p("| %s | %s%s | %s | %s | %s | %s |\n", t.Name, t.Figure, note, val, t.Target, rel, mark)
		}
		p("\n")
	}

	// 1. Fresh.
	p("## 1. Fresh single validations\n\n")
	p("`POST /v1/validate` with each address of the world once per level, at a fixed concurrency (closed loop). Throughput is successful probes per second while the load was sustained (from the start until the last request was sent); latencies are the client's round trips; API overhead is the round trip minus the engine's own time, which verifyd sends to the microsecond in a `Server-Timing: engine;dur=…` header (the receipt's whole-millisecond `latency_ms` where a verifyd does not). CPU is verifyd's (utime + stime from `/proc/<pid>/stat`) per successful probe. The world holds some probes for seconds by design — hosts that never send a banner (a probe gives up after `smtp.command_timeout`), zones that drop queries, greylisting (retried after `egress.greylist_cooldown`) — so the p99 of all addresses is the world's; the *prompt addresses* columns leave those out and show verifyd's own latency.\n\n")
	levelTable(w, res, func(r *RunResult) []Level {
		if r.Scenarios.Fresh == nil {
			return nil
		}
		return r.Scenarios.Fresh.Levels
	}, func(r *RunResult) string {
		if r.Scenarios.Fresh == nil {
			return "did not run"
		}
		return r.Scenarios.Fresh.Skipped
	}, true)
	if plotRel != "" {
		p("![latency against throughput](%s)\n\n", plotRel)
	}
	phaseSection(w, res)

	// 2. Cache.
	p("## 2. `cache: true` hits\n\n")
	p("`POST /v1/validate` with `\"cache\": true` for addresses the account validated in scenario 1 (verdicts other than unknown, which verifyd does not cache): every answer comes from the account's own recent result, and is still charged and written to history. This is the API's own ceiling.\n\n")
	for _, run := range res.Runs {
		if run.Scenarios.Cache != nil && run.Scenarios.Cache.Seeded > 0 && len(res.Runs) > 1 {
			p("verifyd %s: %s addresses cycled.  \n", run.Label, itoa(run.Scenarios.Cache.Seeded))
		} else if run.Scenarios.Cache != nil && run.Scenarios.Cache.Seeded > 0 {
			p("%s addresses cycled.\n\n", itoa(run.Scenarios.Cache.Seeded))
		}
	}
	levelTable(w, res, func(r *RunResult) []Level {
		if r.Scenarios.Cache == nil {
			return nil
		}
		return r.Scenarios.Cache.Levels
	}, func(r *RunResult) string {
		if r.Scenarios.Cache == nil {
			return "did not run"
		}
		return r.Scenarios.Cache.Skipped
	}, false)

	// 3. Batch.
	p("## 3. One large batch\n\n")
	p("`POST /v1/batch` with the world's addresses (shuffled), then `GET /v1/jobs/{id}` every 100 ms until completed, then `GET /v1/jobs/{id}/results.csv`. Completion is counted from the start of the upload; *99 %% processed* is when the job's progress first read 99 %%, the pace of the bulk without the tail of addresses the world holds for seconds (tarpits, greylisting).\n\n")
	batchTable(w, res, func(r *RunResult) *BatchResult { return r.Scenarios.Batch })

	// 4. Mixed.
	p("## 4. Mixed: single validations while a batch runs\n\n")
	p("First a batch runs alone (the yardstick); then a batch of as many other addresses is uploaded and, while it runs, single fresh validations of addresses the world answers promptly continue at a fixed concurrency: their p99 is compared with scenario 1's for such addresses at the same concurrency, without a batch, and the batch's completion with the batch alone's.\n\n")
	mixedSection(w, res)

	// 5. Accuracy.
	p("## 5. Accuracy\n\n")
	p("Each receipt of scenario 1 against the world's expected verdict (`mailworld -write-expected`, the decision table of `probe/README.md`). Rows: expected; columns: verifyd's verdict.\n\n")
	for _, run := range res.Runs {
		a := run.Scenarios.Accuracy
		if !runHeading(w, res, run, a) {
			continue
		}
		if a.Single != nil {
			p("Single validations: verdict agrees for **%s of %s (%.2f %%)**; verdict and `checks.reason` both agree for %s (%.2f %%).\n\n",
				itoa(a.Single.Agree), itoa(a.Single.Total), 100*a.Single.Agreement(), itoa(a.Single.ReasonAgree), 100*a.Single.ReasonAgreement())
			a.Single.WriteMarkdown(w)
			p("\n")
			mismatchKinds(w, a.Single)
			a.Single.WriteGroups(w, true)
		}
		if a.Batch != nil {
			p("Batch CSV (verdict only): agrees for **%s of %s (%.2f %%)**.\n\n", itoa(a.Batch.Agree), itoa(a.Batch.Total), 100*a.Batch.Agreement())
			a.Batch.WriteMarkdown(w)
			p("\n")
			mismatchKinds(w, a.Batch)
			a.Batch.WriteGroups(w, false)
		}
	}

	realWorldSection(w, res)
	fairnessSection(w, res)
	fleetSection(w, res)
	feedbackSection(w, res)
	typosSection(w, res)
	profileSection(w, res)

	// Ratios.
	if len(res.Ratios) > 0 {
		p("## Comparison: B / A\n\n")
		p("A = `%s`, B = `%s`, run alternately against the same world (the order flips from step to step). A ratio above 1 is better where higher is better, and worse where lower is better.\n\n", res.Runs[0].Binary, res.Runs[1].Binary)
		p("| figure | A | B | B/A | better |\n|---|---:|---:|---:|---|\n")
		for _, r := range res.Ratios {
			ratio := "—" // A is 0: no ratio
			if r.A != 0 {
				ratio = fmt.Sprintf("%.3f", r.Ratio)
			}
			p("| %s | %s | %s | %s | %s |\n", r.Figure, fmtNum(r.A), fmtNum(r.B), ratio, r.Better)
		}
		p("\n")
		regressionSection(w, res)
	}
	if len(res.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range res.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	p("## verifyd's configuration\n\n```toml\n%s```\n", res.Settings.Verifyd)
}

func levelTable(w io.Writer, res *Result, levels func(*RunResult) []Level, skipped func(*RunResult) string, fresh bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	multi := len(res.Runs) > 1
	any := false
	for _, run := range res.Runs {
		if s := skipped(run); s != "" {
			p("verifyd %s: skipped: %s.\n\n", run.Label, s)
		}
		if len(levels(run)) > 0 {
			any = true
		}
	}
	if !any {
		return
	}
	head := "| "
	if multi {
		head += "bin | "
	}
	head += "concurrency | ok / sent | throughput /s | p50 ms | p90 ms | p99 ms | max ms |"
	if fresh {
		head += " p50 / p99 ms, prompt addresses | API overhead p50 / p99 ms |"
	}
	head += " verifyd CPU ms/req | verifyd syscalls/req | verifyd cores | world cores | client cores | verifyd peak RSS MB |\n"
	p("%s", head)
	cols := strings.Count(head, "|") - 1
	p("|%s\n", strings.Repeat("---:|", cols))
	type row struct {
		label string
		lv    Level
	}
	var rows []row
	for _, run := range res.Runs {
		for _, lv := range levels(run) {
			rows = append(rows, row{run.Label, lv})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].lv.Concurrency < rows[j].lv.Concurrency })
	for _, r := range rows {
		lv := r.lv
		p("| ")
		if multi {
			p("%s | ", r.label)
		}
		p("%d | %s / %s | %s | %s | %s | %s | %s |", lv.Concurrency, itoa(lv.OK), itoa(lv.Sent), fmtNum(lv.Throughput),
			fmtNum(lv.Latency.P50), fmtNum(lv.Latency.P90), fmtNum(lv.Latency.P99), fmtNum(lv.Latency.Max))
		if fresh {
			if lv.Prompt != nil {
				p(" %s / %s |", fmtNum(lv.Prompt.P50), fmtNum(lv.Prompt.P99))
			} else {
				p(" — |")
			}
			if lv.Overhead != nil {
				p(" %s / %s |", fmtNum(lv.Overhead.P50), fmtNum(lv.Overhead.P99))
			} else {
				p(" — |")
			}
		}
		calls := "—"
		if lv.SyscallsPerRequest > 0 {
			calls = fmtNum(lv.SyscallsPerRequest)
		}
		p(" %s | %s | %.2f | %.2f | %.2f | %s |\n", fmtNum(lv.Verifyd.CPUPerRequestMs), calls, lv.Verifyd.Cores, lv.World.Cores, lv.Client.Cores, fmtNum(lv.Verifyd.PeakRSSMB))
	}
	p("\n")
	for _, r := range rows {
		if len(r.lv.Errors) > 0 {
			p("Failures at concurrency %d (verifyd %s):%s\n\n", r.lv.Concurrency, r.label, strings.TrimPrefix(errSummary(r.lv.Errors), ";"))
		}
	}
}

func batchTable(w io.Writer, res *Result, get func(*RunResult) *BatchResult) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	any := false
	for _, run := range res.Runs {
		b := get(run)
		switch {
		case b == nil:
			p("verifyd %s: did not run.\n\n", run.Label)
		case b.Skipped != "":
			p("verifyd %s: **skipped: %s**.\n\n", run.Label, b.Skipped)
		default:
			any = true
			if b.Error != "" {
				p("verifyd %s: **error: %s**\n\n", run.Label, oneLine(b.Error))
			}
		}
	}
	if !any {
		return
	}
	p("| verifyd | addresses | upload s | 99 %% processed s | completion s | addresses/s | CSV download s | CSV rows | verifyd CPU ms/address | verifyd cores | world cores | verifyd peak RSS MB |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range res.Runs {
		b := get(run)
		if b == nil || b.Skipped != "" {
			continue
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n", run.Label, itoa(b.Size), fmtNum(b.UploadSeconds), fmtNum(b.Seconds99), fmtNum(b.CompletionSeconds),
			fmtNum(b.Rate), fmtNum(b.DownloadSeconds), itoa(b.Rows), fmtNum(b.Verifyd.CPUPerRequestMs), b.Verifyd.Cores, b.World.Cores, fmtNum(b.Verifyd.PeakRSSMB))
	}
	p("\n")
}

func mixedSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	for _, run := range res.Runs {
		m := run.Scenarios.Mixed
		switch {
		case m == nil:
			p("verifyd %s: did not run.\n\n", run.Label)
		case m.Skipped != "":
			p("verifyd %s: **skipped: %s**.\n\n", run.Label, m.Skipped)
		case m.Singles == nil:
			p("verifyd %s: **error: %s**\n\n", run.Label, oneLine(m.Error))
		default:
			s := m.Singles
			state := fmt.Sprintf("completed in %s s (%s/s)", fmtNum(m.Batch.CompletionSeconds), fmtNum(m.Batch.Rate))
			if m.Batch.Status != "completed" {
				state = fmt.Sprintf("was still %s when the singles were done (%s of %s processed)", orDash(m.Batch.Status), itoa(m.Batch.Processed), itoa(m.Batch.Size))
			}
			alone := ""
			if a := m.Alone; a != nil {
				switch {
				case a.Status == "completed":
					alone = fmt.Sprintf(" The same number of other addresses alone, just before: completed in %s s, 99 %% processed at %s s; beside the singles 99 %% at %s s (**%.2f×** alone's completion, %.2f× its 99 %%).",
						fmtNum(a.CompletionSeconds), fmtNum(a.Seconds99), fmtNum(m.Batch.Seconds99), m.BatchRatio, m.Bulk99Ratio)
				default:
					alone = fmt.Sprintf(" The batch alone did not complete (%s%s).", orDash(a.Status), errorSuffix(a.Error))
				}
			}
			p("verifyd %s: the batch of %s addresses %s%s.%s Meanwhile %s single validations at concurrency %d: %s/s, p50 %s ms, p90 %s ms, **p99 %s ms**; scenario 1's p99 of such addresses at that concurrency, without a batch, was %s ms (**%.2f×**). verifyd's CPU meanwhile: %s ms an operation (batch address or single), %s cores.\n\n",
				run.Label, itoa(m.Batch.Size), state, errorSuffix(m.Error), alone,
				itoa(s.OK), s.Concurrency, fmtNum(s.Throughput), fmtNum(s.Latency.P50), fmtNum(s.Latency.P90), fmtNum(s.Latency.P99),
				fmtNum(m.BaselineP99Ms), m.P99Ratio, fmtNum(m.Batch.Verifyd.CPUPerRequestMs), fmtNum(m.Batch.Verifyd.Cores))
			if sh := m.Share; sh != nil {
				p("verifyd %s's adaptive batch share while the singles ran (%d samples, 250 ms apart): limit mean %s, lowest %s; batch sessions open, mean %s; backoffs: %s for the CPU's run queue (the Go scheduler's mean latency over an interval up to %s ms), %s for queued real-time work.\n\n",
					run.Label, sh.Samples, fmtNum(sh.LimitMean), fmtNum(sh.LimitMin), fmtNum(sh.SessionsMean), fmtNum(sh.Backoffs["sched"]), fmtNum(sh.SchedMeanMaxMs), fmtNum(sh.Backoffs["queue"]))
			}
		}
	}
}

func errorSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + oneLine(e) + ")"
}

func mismatchKinds(w io.Writer, c *Confusion) {
	if len(c.MismatchKinds) == 0 {
		return
	}
	type kv struct {
		k string
		n int
	}
	var ks []kv
	for k, n := range c.MismatchKinds {
		ks = append(ks, kv{k, n})
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].n > ks[j].n || ks[i].n == ks[j].n && ks[i].k < ks[j].k })
	fmt.Fprintf(w, "Disagreements by kind (expected → got):\n\n")
	for i, e := range ks {
		if i == 12 {
			fmt.Fprintf(w, "- … %d more kinds (see the JSON)\n", len(ks)-i)
			break
		}
		fmt.Fprintf(w, "- %s: %s\n", e.k, itoa(e.n))
	}
	fmt.Fprintln(w)
}

// fmtNum writes a figure with sensible precision.
func fmtNum(f float64) string {
	a := math.Abs(f)
	switch {
	case f == 0:
		return "0"
	case a >= 1000:
		return groupThousands(int64(math.Round(f)))
	case a >= 100:
		return fmt.Sprintf("%.0f", f)
	case a >= 10:
		return fmt.Sprintf("%.1f", f)
	case a >= 1:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.3f", f)
	}
}

func fmtValue(v float64, unit string) string {
	switch unit {
	case "%":
		return fmt.Sprintf("%.2f %%", v)
	case "×":
		return fmt.Sprintf("%.2f×", v)
	}
	return fmtNum(v) + " " + unit
}

// fmtDur writes 20ms as "20 ms".
func fmtDur(d time.Duration) string {
	s := d.String()
	i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if i <= 0 || strings.ContainsAny(s[i:], "0123456789") {
		return s // compound (1m30s) or zero
	}
	return s[:i] + " " + s[i:]
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func fairnessSection(w io.Writer, res *Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 7. Fairness between accounts\n\n")
	p("Account A (the demo account) uploads a large batch %d times; each time, when A's progress reads 10 %% processed (in its bulk, before its tail of tarpits and greylisting), a second account, B, uploads a small batch of addresses the world answers promptly: the same number of samples at the same point of A's bulk on every side. The median of B's completions (upload to `completed`) is compared with the median of the same batch's on an idle verifyd (%d runs, after one unmeasured run, so its caches are as warm), and A's median completion with B with its batch alone run right after (a run alone before warms the caches: cold auth-signal lookups make a big batch up to 20 %% slower; the world's greylisting lets more of A's addresses through each time, which favours the run after, not the ones with B). The scheduler's policy is in [server/batch/README.md](../server/batch/README.md#the-scheduler-fairness).\n\n", FairSamples, FairRepeats)
	rows := false
	for _, run := range res.Runs {
		fr := run.Scenarios.Fairness
		switch {
		case fr == nil:
			p("verifyd %s: did not run.\n\n", run.Label)
		case fr.Skipped != "":
			p("verifyd %s: **skipped: %s**.\n\n", run.Label, fr.Skipped)
		case fr.Error != "":
			p("verifyd %s: **error: %s**\n\n", run.Label, oneLine(fr.Error))
		default:
			rows = true
		}
	}
	if !rows {
		return
	}
	p("| verifyd | B's addresses | B alone s | B beside A s | B ratio | B slowest | verifyd / world cores beside A | A's addresses | A alone s (after) | A with B s (median) | A slowdown | verifyd peak RSS MB (A with B) |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range res.Runs {
		fr := run.Scenarios.Fairness
		if fr == nil || fr.Skipped != "" || fr.Error != "" {
			continue
		}
		p("| %s | %s | %s | %s | **%.2f×** | %.2f× | %.2f / %.2f | %s | %s | %s | **%.3f×** | %s |\n", run.Label, itoa(fr.BWith[0].Size),
			fmtNum(fr.BAloneSeconds), fmtNum(fr.BWithSeconds), fr.BRatio, fr.BWorstRatio, fr.BCores, fr.WorldCores,
			itoa(fr.A.Size), fmtNum(fr.AAloneSeconds), fmtNum(fr.AWithSeconds), fr.ASlowdown,
			fmtNum(fr.peakRSSWith()))
	}
	p("\n")
	for _, run := range res.Runs {
		fr := run.Scenarios.Fairness
		if fr == nil || fr.Skipped != "" || fr.Error != "" {
			continue
		}
		var with, alone, aWith []string
		for i, b := range fr.BWith {
			with = append(with, fmt.Sprintf("%s s at %s", fmtNum(b.CompletionSeconds), itoa(fr.StartedAt[i])))
		}
		for _, a := range fr.AWith {
			aWith = append(aWith, fmtNum(a.CompletionSeconds))
		}
		for _, b := range fr.BAlone {
			alone = append(alone, fmtNum(b.CompletionSeconds))
		}
		p("verifyd %s: B beside A (A's addresses processed at B's upload): %s; B alone: %s s; A with B: %s s; A alone before (warming the caches) and after: %s s, %s s.\n\n", run.Label, strings.Join(with, ", "), strings.Join(alone, ", "),
			strings.Join(aWith, ", "), fmtNum(fr.AAlone[0].CompletionSeconds), fmtNum(fr.AAlone[1].CompletionSeconds))
	}
	p("\n")
}

func fleetSection(w io.Writer, res *Result) {
	fr := res.Fleet
	if fr == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## 8. Fleet: %d boxes on one PostgreSQL against one Pebble box\n\n", fr.Boxes)
	p("Binary A as %d boxes of a fleet (`storage.backend = \"postgres\"`, one PostgreSQL server started by the harness on loopback, fsync on) and as the single Pebble box of this run, in the same world, alternating which side goes first. The load is split evenly over the boxes, as a balancer would. Every process (the boxes, PostgreSQL, the world, the load generator) shares this machine's cores: the figures are what the shared database costs, not what more machines give; docs/fleet.md turns them into N machines.\n\n", fr.Boxes)
	switch {
	case fr.Skipped != "":
		p("**Skipped: %s.**\n\n", fr.Skipped)
		return
	case fr.Error != "":
		p("**Error: %s**\n\n", oneLine(fr.Error))
		return
	}
	p("| load | c | single box /s | fleet /s | fleet / single | p50 ms single / fleet | p99 ms single / fleet | verifyd CPU ms a request, single / fleet | PostgreSQL CPU ms a request | PostgreSQL cores | round trips a request |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range []struct {
		name string
		fp   *FleetPair
	}{{"cache:true hits", fr.Cache}, {"fresh probes", fr.Fresh}} {
		if x.fp == nil {
			continue
		}
		f := x.fp
		p("| %s | %d | %s | %s | **%.2f×** | %s / %s | %s / %s | %s / %s | %s | %.2f | %s |\n", x.name, f.Concurrency, fmtNum(f.Single), fmtNum(f.Fleet), f.Ratio,
			fmtNum(f.SingleP50), fmtNum(f.FleetP50), fmtNum(f.SingleP99), fmtNum(f.FleetP99), fmtNum(f.SingleCPUms), fmtNum(f.FleetCPUms),
			fmtNum(f.PostgresCPUms), f.PostgresCores, tripsCell(f.RoundTrips))
	}
	p("\n")
	for _, f := range []*FleetPair{fr.Cache, fr.Fresh} {
		if f != nil && f.Errors != "" {
			p("Errors: %s\n\n", f.Errors)
		}
	}
	if b := fr.Batch; b != nil {
		if b.Error != "" {
			p("Batch: **error: %s**\n\n", oneLine(b.Error))
		} else {
			p("Batch of %s addresses: single box **%s s** (99 %% at %s s), fleet **%s s** (99 %% at %s s): **%.2f×**; PostgreSQL %s CPU-s, %s ms an address; %s round trips an address.\n\n",
				itoa(b.Size), fmtNum(b.Single), fmtNum(b.Single99), fmtNum(b.Fleet), fmtNum(b.Fleet99), b.Ratio, fmtNum(b.PostgresCPUs), fmtNum(b.PostgresCPUPerAddrMs), tripsCell(b.RoundTrips))
		}
	}
	statements := func(name string, st []PGStatement) {
		if len(st) == 0 {
			return
		}
		p("**%s**: where the database's time went (pg_stat_statements, per request; *exec ms* is the server's time running the statement, a COMMIT's WAL flush and a lock's wait included; *plans* how often it was planned, a prepared statement whose plan is kept being planned once; the %d statements with the most):\n\n", name, min(len(st), fleetStatementsShown))
		p("| statement | calls | rows | exec ms | share | plans | plan ms |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range st[:min(len(st), fleetStatementsShown)] {
			p("| `%s` | %s | %s | %s | %.1f %% | %s | %s |\n", strings.ReplaceAll(x.Query, "|", "\\|"), fmtNum(x.Calls), fmtNum(x.Rows), fmtNum(x.ExecMs), 100*x.Share,
				fmtNum(x.Plans), fmtNum(x.PlanMs))
		}
		p("\n")
	}
	if fr.Fresh != nil {
		statements("Fresh probes", fr.Fresh.Statements)
	}
	if fr.Cache != nil {
		statements("cache:true hits", fr.Cache.Statements)
	}
	if fr.Batch != nil {
		statements("The batch (per address)", fr.Batch.Statements)
	}
}

// fleetStatementsShown is how many statements of a fleet load the report
// lists.
const fleetStatementsShown = 10

// tripsCell is a round-trip count, or "—" when the binary did not count.
func tripsCell(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmtNum(v)
}

func profileSection(w io.Writer, res *Result) {
	if len(res.Profiles) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## CPU profiles: the hottest paths\n\n")
	p("`-profile`: verifyd's own CPU profile (`/debug/pprof/profile` on its metrics listener) over each measured level, and over the first 6 s of scenario 3's batch (its upload and bulk), read with `go tool pprof -top`. *Paths* are the functions with the most time in them and below (`-cum`; the runtime's, the HTTP server's and the worker pools' frames, which every stack shares, left out); *hot spots* those with the most time in themselves. A share is of the profile's samples; the sample total over the duration is the cores verifyd used. The profile files stay in the work directory (`-keep`).\n\n")
	for _, ps := range res.Profiles {
		p("### %s\n\n%s\n\n", ps.Name, ps.Header)
		p("| paths (cum %%) | | hot spots (flat %%) | |\n|---|---:|---|---:|\n")
		for i := range max(len(ps.Cum), len(ps.Flat)) {
			var a, b, c, d string
			if i < len(ps.Cum) {
				a, b = "`"+ps.Cum[i].Func+"`", fmt.Sprintf("%.1f", ps.Cum[i].CumPct)
			}
			if i < len(ps.Flat) {
				c, d = "`"+ps.Flat[i].Func+"`", fmt.Sprintf("%.1f", ps.Flat[i].FlatPct)
			}
			p("| %s | %s | %s | %s |\n", a, b, c, d)
		}
		p("\n")
	}
}

// runHeading opens a run's part of a scenario's section: its heading when
// the report has two runs, then whether it did not run or was skipped;
// false when there is nothing more to write.
func runHeading(w io.Writer, res *Result, run *RunResult, r scenarioStatus) bool {
	if len(res.Runs) > 1 {
		fmt.Fprintf(w, "### verifyd %s\n\n", run.Label)
	}
	switch ran, skipped := r.status(); {
	case !ran:
		fmt.Fprintf(w, "Did not run.\n\n")
		return false
	case skipped != "":
		fmt.Fprintf(w, "Skipped: %s.\n\n", skipped)
		return false
	}
	return true
}

// scenarioStatus is a scenario's result (a nil pointer: it did not run).
type scenarioStatus interface {
	status() (ran bool, skipped string)
}

func (a *AccuracyResult) status() (bool, string) {
	if a == nil {
		return false, ""
	}
	return true, a.Skipped
}

func (r *RealWorldResult) status() (bool, string) {
	if r == nil {
		return false, ""
	}
	return true, r.Skipped
}

func (f *FeedbackResult) status() (bool, string) {
	if f == nil {
		return false, ""
	}
	return true, f.Skipped
}

// regressionSection lists the figures whose B/A lies beyond their noise
// bands on A's worse side (noise.go).
func regressionSection(w io.Writer, res *Result) {
	if len(res.Runs) < 2 || res.Runs[0].Binary == res.Runs[1].Binary {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Regressions beyond the noise band\n\n")
	p("A figure is listed when B/A says A did worse than B by more than runs of one binary against itself differ on this machine (`verifybench -noise N`; bands: %s). *Band* is how far such runs strayed (widened by a quarter; %.0f %% where no noise run measured the figure); *beyond* how far past it A is.\n\n",
		res.Noise, 100*DefaultBand)
	if len(res.Regressions) == 0 {
		p("None: every figure is within its band or better.\n\n")
		return
	}
	p("| figure | A | B | B/A | better | band | beyond |\n|---|---:|---:|---:|---|---:|---:|\n")
	for _, g := range res.Regressions {
		band := fmt.Sprintf("%.0f %%", 100*g.Band)
		if !g.Learned {
			band += " (default)"
		}
		p("| %s | %s | %s | %.3f | %s | %s | %.0f %% |\n", g.Figure, fmtNum(g.A), fmtNum(g.B), g.Ratio, g.Better, band, 100*g.Beyond)
	}
	p("\n")
}
