// Command verifybench is verifyd's benchmark harness. It starts a generated
// simulated mail world (mailworld, a process of its own) and a real verifyd
// configured for it, then runs five scenarios over HTTP with its own load
// generator, each bounded in count and time:
//
//  1. fresh single validations at increasing concurrency: throughput,
//     p50/p90/p99 latency, API overhead, verifyd CPU per probe;
//  2. single validations answered from the cache (cache: true): the API's
//     own ceiling;
//  3. one large batch: upload, completion and CSV download times;
//  4. single validations while a batch runs: their p99;
//  5. accuracy: every verdict against the world's expected verdict, as a
//     confusion matrix.
//
// verifyd's CPU time and peak RSS come from /proc/<pid> for each load. The
// result is written as bench/results/<timestamp>.json, the human report as
// bench/RESULTS.md, and the latency-against-throughput plot as
// bench/results/latency-throughput.svg.
//
//	verifybench                         the short run of `make bench` (under 3 minutes)
//	verifybench -full                   the whole set: 10,000 domains, 100 ms, 100,000-address batch
//	verifybench -compare OTHER_VERIFYD  also run another verifyd binary, alternately, and print B/A
//	verifybench -soak 30m               instead of the scenarios, a steady mixed load for 30 minutes,
//	                                    verifyd's RSS, goroutines, open files and disk sampled: flat or not
//
// Every process it starts is stopped by PID at the end, on SIGINT and
// SIGTERM too. bench/README.md describes the flags and the outputs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/verifyd/verifyd/bench/harness"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("verifybench", flag.ContinueOnError)
	s := harness.ShortOptions()
	full := fs.Bool("full", false, "the whole set: 10,000 domains, 100 ms per SMTP reply, levels 64-2048, a 100,000-address batch (defaults below are the short run's)")
	quiet := fs.Bool("q", false, "no progress lines")

	// Every other flag overrides a field of the chosen mode's options;
	// only the flags given are applied.
	type setter func(o *harness.Options) error
	setters := map[string]setter{}
	str := func(name, def, usage string, set func(*harness.Options, string)) {
		v := fs.String(name, def, usage)
		setters[name] = func(o *harness.Options) error { set(o, *v); return nil }
	}
	integer := func(name string, def int, usage string, set func(*harness.Options, int)) {
		v := fs.Int(name, def, usage)
		setters[name] = func(o *harness.Options) error { set(o, *v); return nil }
	}
	float := func(name string, def float64, usage string, set func(*harness.Options, float64)) {
		v := fs.Float64(name, def, usage)
		setters[name] = func(o *harness.Options) error { set(o, *v); return nil }
	}
	dur := func(name string, def time.Duration, usage string, set func(*harness.Options, time.Duration)) {
		v := fs.Duration(name, def, usage)
		setters[name] = func(o *harness.Options) error { set(o, *v); return nil }
	}
	durs := func(name string, def []time.Duration, usage string, set func(*harness.Options, []time.Duration)) {
		v := fs.String(name, joinDurs(def), usage)
		setters[name] = func(o *harness.Options) error {
			l, err := parseDurs(*v)
			if err != nil {
				return fmt.Errorf("-%s: %w", name, err)
			}
			set(o, l)
			return nil
		}
	}
	ints := func(name string, def []int, usage string, set func(*harness.Options, []int)) {
		v := fs.String(name, joinInts(def), usage)
		setters[name] = func(o *harness.Options) error {
			l, err := parseInts(*v)
			if err != nil {
				return fmt.Errorf("-%s: %w", name, err)
			}
			set(o, l)
			return nil
		}
	}

	str("verifyd", "", "verifyd binary under test (default: go build ./cmd/verifyd)", func(o *harness.Options, v string) { o.Verifyd = v })
	str("compare", "", "a second verifyd binary (B), run alternately against the same world; prints B/A ratios", func(o *harness.Options, v string) { o.Compare = v })
	str("mailworld", "", "mailworld binary (default: go build ./bench/cmd/mailworld)", func(o *harness.Options, v string) { o.Mailworld = v })

	integer("domains", s.World.Domains, "world: number of domains (10 addresses each)", func(o *harness.Options, v int) { o.World.Domains = v })
	dur("latency", s.World.Latency, "world: delay before every SMTP reply", func(o *harness.Options, v time.Duration) { o.World.Latency = v })
	dur("jitter", s.World.Jitter, "world: random extra delay up to this", func(o *harness.Options, v time.Duration) { o.World.Jitter = v })
	float("starttls", s.World.STARTTLS, "world: fraction of hosts offering STARTTLS", func(o *harness.Options, v float64) { o.World.STARTTLS = v })
	float("catchall", s.World.CatchAll, "world: fraction of catch-all domains", func(o *harness.Options, v float64) { o.World.CatchAll = v })
	float("greylist", s.World.Greylist, "world: fraction of greylisting domains", func(o *harness.Options, v float64) { o.World.Greylist = v })
	float("tarpit", s.World.Tarpit, "world: fraction of tarpit hosts", func(o *harness.Options, v float64) { o.World.Tarpit = v })
	float("auth", s.World.Auth, "world: fraction of domains with authentication records", func(o *harness.Options, v float64) { o.World.Auth = v })
	str("world-profile", s.World.Profile, `world: generator profile, "" or "realworld" (providers weighted by market share; the fractions above are then not used)`, func(o *harness.Options, v string) { o.World.Profile = v })
	str("disposable", s.World.Disposable, "world: domains made and expected disposable (must be on verifyd's list)", func(o *harness.Options, v string) { o.World.Disposable = v })
	integer("seed", int(s.World.Seed), "world and address order: random seed", func(o *harness.Options, v int) { o.World.Seed = uint64(v) })
	str("dns", s.World.DNS, "world: DNS address (loopback; port 0 picks one)", func(o *harness.Options, v string) { o.World.DNS = v })
	str("world-flags", "", "world: further mailworld flags, space-separated (e.g. \"-refuse 0.02 -busy 0\")", func(o *harness.Options, v string) { o.World.Extra = strings.Fields(v) })

	ints("levels", s.FreshLevels, "scenario 1: concurrency levels, comma-separated", func(o *harness.Options, v []int) { o.FreshLevels = v })
	integer("count", s.FreshCount, "scenario 1: at most this many requests per level", func(o *harness.Options, v int) { o.FreshCount = v })
	dur("level-time", s.FreshDuration, "scenario 1: stop sending after this long per level", func(o *harness.Options, v time.Duration) { o.FreshDuration = v })
	ints("cache-levels", s.CacheLevels, "scenario 2: concurrency levels", func(o *harness.Options, v []int) { o.CacheLevels = v })
	integer("cache-count", s.CacheCount, "scenario 2: at most this many requests per level", func(o *harness.Options, v int) { o.CacheCount = v })
	dur("cache-time", s.CacheDuration, "scenario 2: stop sending after this long per level", func(o *harness.Options, v time.Duration) { o.CacheDuration = v })
	integer("batch", s.BatchSize, "scenario 3: addresses in the batch (at most the world's)", func(o *harness.Options, v int) { o.BatchSize = v })
	dur("batch-timeout", s.BatchTimeout, "scenarios 3 and 4: how long to wait for a batch to complete", func(o *harness.Options, v time.Duration) { o.BatchTimeout = v })
	integer("mixed-batch", s.MixedBatchSize, "scenario 4: addresses in the batch", func(o *harness.Options, v int) { o.MixedBatchSize = v })
	integer("mixed-concurrency", s.MixedConcurrency, "scenario 4: concurrency of the single validations", func(o *harness.Options, v int) { o.MixedConcurrency = v })
	integer("mixed-singles", s.MixedSingles, "scenario 4: single validations sent during the batch (the same on both sides)", func(o *harness.Options, v int) { o.MixedSingles = v })
	integer("fair-batch", s.FairBatchSize, "scenario 7: addresses in account A's batch", func(o *harness.Options, v int) { o.FairBatchSize = v })
	integer("fair-small", s.FairSmallSize, "scenario 7: addresses in account B's batch", func(o *harness.Options, v int) { o.FairSmallSize = v })
	integer("fleet-concurrency", s.FleetConcurrency, "scenario 8: concurrency of fresh probes, split over the boxes", func(o *harness.Options, v int) { o.FleetConcurrency = v })
	integer("fleet-batch", s.FleetBatchSize, "scenario 8: addresses in the batch (the full shape: 100,000)", func(o *harness.Options, v int) { o.FleetBatchSize = v })
	integer("realworld-domains", s.RealWorldDomains, "scenario 6: domains of the real-world world", func(o *harness.Options, v int) { o.RealWorldDomains = v })
	integer("typo-domains", s.TypoDomains, "scenario 10: businesses of the typos world, beside its providers and the published corpus", func(o *harness.Options, v int) { o.TypoDomains = v })
	integer("feedback-domains", s.FeedbackDomains, "scenario 9: domains of the feedback world (ten addresses each)", func(o *harness.Options, v int) { o.FeedbackDomains = v })
	dur("realworld-retry-window", s.RealWorldRetryWindow, "scenario 6: the verifyds' jobs.retry_window", func(o *harness.Options, v time.Duration) { o.RealWorldRetryWindow = v })
	ds := s.Soak
	dur("soak", 0, "run the soak for this long instead of the scenarios (e.g. 30m): binary A under a steady mixed load, its RSS, goroutines, open files and Pebble's size sampled; writes its section of the report", func(o *harness.Options, v time.Duration) { o.Soak.Duration = v })
	dur("soak-sample", ds.Sample, "soak: time between two samples", func(o *harness.Options, v time.Duration) { o.Soak.Sample = v })
	dur("soak-warmup", 0, "soak: warm-up left out of the figures (default 5m, or a quarter of a shorter soak)", func(o *harness.Options, v time.Duration) { o.Soak.Warmup = v })
	float("soak-fresh-rate", ds.FreshRate, "soak: fresh single validations a second", func(o *harness.Options, v float64) { o.Soak.FreshRate = v })
	float("soak-cache-rate", ds.CacheRate, "soak: cache: true validations a second", func(o *harness.Options, v float64) { o.Soak.CacheRate = v })
	integer("soak-batch", ds.BatchSize, "soak: addresses of each batch", func(o *harness.Options, v int) { o.Soak.BatchSize = v })
	dur("soak-batch-every", ds.BatchEvery, "soak: time between two batch uploads", func(o *harness.Options, v time.Duration) { o.Soak.BatchEvery = v })
	float("soak-hook-fail", ds.HookFail, "soak: fraction of webhook attempts the receiver answers with a 500", func(o *harness.Options, v float64) { o.Soak.HookFail = v })
	durs("soak-hook-retry", ds.HookRetry, "soak: verifyd's webhooks.retry_schedule, comma-separated", func(o *harness.Options, v []time.Duration) { o.Soak.HookRetry = v })
	dur("soak-retry-window", ds.RetryWindow, "soak: verifyd's jobs.retry_window", func(o *harness.Options, v time.Duration) { o.Soak.RetryWindow = v })
	str("scenarios", "", "run only these scenarios, comma-separated: fresh,cache,batch,mixed,accuracy,realworld,fairness,fleet,feedback,typos (cache and accuracy use fresh's receipts)",
		func(o *harness.Options, v string) { o.Scenarios = strings.Split(v, ",") })

	integer("egress", len(s.Config.Egress), "verifyd: number of egress addresses, 1-16 (A's from 127.0.0.2, B's from 127.0.0.18)", func(o *harness.Options, v int) {
		o.Config.Egress = harness.EgressRange(netip.MustParseAddr("127.0.0.2"), min(max(v, 1), 16))
	})
	integer("realtime-workers", s.Config.RealtimeWorkers, "verifyd: probe.realtime_workers", func(o *harness.Options, v int) { o.Config.RealtimeWorkers = v })
	integer("batch-workers", s.Config.BatchWorkers, "verifyd: probe.batch_workers", func(o *harness.Options, v int) { o.Config.BatchWorkers = v })
	dur("command-timeout", s.Config.CommandTimeout, "verifyd: smtp.command_timeout (a tarpit costs this)", func(o *harness.Options, v time.Duration) { o.Config.CommandTimeout = v })
	integer("credits", int(s.Credits), "the demo account's balance for the run", func(o *harness.Options, v int) { o.Credits = int64(v) })
	dur("timeout", s.RequestTimeout, "load generator: bound of one request", func(o *harness.Options, v time.Duration) { o.RequestTimeout = v })
	dur("max-time", s.MaxTime, "bound of the whole run; scenarios left are skipped", func(o *harness.Options, v time.Duration) { o.MaxTime = v })

	str("out", s.OutDir, "directory of the JSON results (relative to the module root)", func(o *harness.Options, v string) { o.OutDir = v })
	str("report", s.Report, "the Markdown report", func(o *harness.Options, v string) { o.Report = v })
	str("plot", s.Plot, "the SVG plot of latency against throughput", func(o *harness.Options, v string) { o.Plot = v })
	str("soak-plot", s.SoakPlot, "the SVG plot of the soak's samples", func(o *harness.Options, v string) { o.SoakPlot = v })
	noReport := fs.Bool("no-report", false, "write the JSON result only, not the report and the plot")
	str("work", "", "work directory for binaries, world, data and logs (default: a temporary one, removed at the end)", func(o *harness.Options, v string) { o.WorkDir = v })
	keep := fs.Bool("keep", false, "keep the temporary work directory (logs of every process)")
	profile := fs.Bool("profile", false, "take a CPU profile of verifyd during every measured level into <work>/profiles/ (implies -keep)")
	noise := fs.Int("noise", 0, "learn the noise bands: run the binary (-compare's, else A's) against itself this many times, write -noise-file, and stop")
	noiseFile := fs.String("noise-file", "bench/results/noise.json", "the noise bands -compare judges regressions by (relative to the module root), and -noise writes")
	failOnRegression := fs.Bool("fail-on-regression", false, "with -compare: exit with status 3 when a figure of A is worse than B's beyond its noise band")

	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: verifybench [-full] [-compare OTHER_VERIFYD] [flags]\n       verifybench -soak DURATION [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "verifybench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o := harness.ShortOptions()
	if *full {
		o = harness.FullOptions()
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		if set, ok := setters[f.Name]; ok && ferr == nil {
			ferr = set(&o)
		}
	})
	if ferr != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", ferr)
		return 2
	}
	o.NoReport = *noReport
	o.Keep = *keep || *profile
	o.Profile = *profile
	o.Command = command()
	if !*quiet {
		o.Log = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := harness.FindRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		return 1
	}
	o.Root = root
	nf := *noiseFile
	if !filepath.IsAbs(nf) {
		nf = filepath.Join(root, nf)
	}
	if *noise > 0 {
		return learnNoise(ctx, o, *noise, nf, *quiet)
	}
	if o.Compare != "" {
		if o.Noise, err = harness.ReadNoise(nf); err != nil {
			fmt.Fprintln(os.Stderr, "verifybench:", err)
			return 1
		}
		o.NoiseFile = *noiseFile
	}
	res, err := harness.Run(ctx, o)
	if res != nil && !*quiet {
		summary(res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		return 1
	}
	if res.Interrupted {
		return 130
	}
	if *failOnRegression && len(res.Regressions) > 0 {
		return 3
	}
	return 0
}

// learnNoise runs the binary against itself rounds times (the scenarios
// chosen, no report) and writes the bands learned to path.
func learnNoise(ctx context.Context, o harness.Options, n int, path string, quiet bool) int {
	if o.Compare != "" {
		o.Verifyd, o.Compare = o.Compare, "" // -noise learns B's
	}
	o.SelfCompare, o.NoReport = true, true
	// Each round's JSON goes to a temporary directory: the bands are the
	// result.
	rounds, err := os.MkdirTemp("", "verifybench-noise-rounds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		return 1
	}
	defer os.RemoveAll(rounds)
	o.OutDir = rounds
	if o.Verifyd == "" {
		// Built once, so that every round runs the same build.
		dir, err := os.MkdirTemp("", "verifybench-noise-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "verifybench:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		o.Verifyd = filepath.Join(dir, "verifyd")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.Verifyd, "./cmd/verifyd")
		build.Dir, build.Stderr = o.Root, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "verifybench: go build ./cmd/verifyd:", err)
			return 1
		}
	}
	var results []*harness.Result
	for i := range n {
		if !quiet {
			fmt.Fprintf(os.Stderr, "\nnoise: round %d of %d\n", i+1, n)
		}
		res, err := harness.Run(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "verifybench:", err)
			return 1
		}
		if res.Interrupted {
			return 130
		}
		results = append(results, res)
	}
	nz := harness.LearnNoise(results)
	nz.Command, nz.Scenarios = command(), o.Scenarios
	old, err := harness.ReadNoise(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		return 1
	}
	if nz.Merge(old) && !quiet {
		fmt.Fprintf(os.Stderr, "\nnoise: the bands of %s that these rounds did not measure are kept (same machine and mode)\n", path)
	}
	if err := nz.Write(path); err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		return 1
	}
	if !quiet {
		fmt.Fprintf(os.Stderr, "\nnoise bands of %d rounds (%s against itself), written to %s:\n", nz.Rounds, nz.Binary, path)
		names := make([]string, 0, len(nz.Figures))
		for name := range nz.Figures {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			f := nz.Figures[name]
			fmt.Fprintf(os.Stderr, "  %-50s band ±%5.1f %%   B/A %v\n", name, 100*f.Band, f.Ratios)
		}
	}
	return 0
}

// command is the command line as a reader would type it.
func command() string {
	args := append([]string{"verifybench"}, os.Args[1:]...)
	c := strings.Join(args, " ")
	if os.Getenv("MAKELEVEL") != "" {
		c = "make bench  # " + c
	}
	return c
}

// summary prints the targets of each run, or the soak's figures.
func summary(res *harness.Result) {
	if s := res.Soak; s != nil {
		fmt.Fprintf(os.Stderr, "\nsoak of %s (warm-up %s left out):\n", time.Duration(s.Seconds*float64(time.Second)), time.Duration(s.WarmupSeconds*float64(time.Second)))
		fmt.Fprintf(os.Stderr, "  %-32s %10s %10s %10s %10s %12s %12s %10s\n", "metric", "first", "median", "max", "last", "slope /h", "growth", "tolerance")
		for _, f := range s.Metrics {
			name := f.Name
			if f.Unit != "" {
				name += ", " + f.Unit
			}
			fmt.Fprintf(os.Stderr, "  %-32s %10.1f %10.1f %10.1f %10.1f %12.1f %12.1f %10.1f\n", name, f.First, f.Median, f.Max, f.Last, f.SlopePerHour, f.Growth, f.Tolerance)
		}
		for _, k := range s.Kinds {
			nerr := 0
			for _, n := range k.Errors {
				nerr += n
			}
			fmt.Fprintf(os.Stderr, "  %-20s sent %-9d ok %-9d errors %-6d not sent %d\n", k.Kind, k.Sent, k.OK, nerr, k.NotSent)
		}
		h := s.Webhooks
		fmt.Fprintf(os.Stderr, "  webhooks: %d attempts, %d answered 500, %d accepted; %d jobs ended, %d without an event\n", h.Attempts, h.Answered500, h.Accepted, h.JobsEnded, len(h.Missing))
		fmt.Fprintf(os.Stderr, "verdict: %s\n", s.Verdict)
		if res.Report != "" {
			fmt.Fprintf(os.Stderr, "\nreport: %s   plot: %s\n", res.Report, res.Plot)
		}
		return
	}
	for _, run := range res.Runs {
		fmt.Fprintf(os.Stderr, "\nverifyd %s (%s):\n", run.Label, run.Binary)
		for _, t := range run.Targets {
			mark := "  n/a    "
			if t.Met != nil {
				mark = "  NOT MET"
				if *t.Met {
					mark = "  met    "
				}
			}
			val := "—"
			if t.Met != nil || t.Value != 0 {
				val = strconv.FormatFloat(t.Value, 'f', 2, 64) + " " + t.Unit
			}
			fmt.Fprintf(os.Stderr, "%s %-42s %-22s target %s\n", mark, t.Name, val, t.Target)
		}
	}
	if len(res.Ratios) > 0 {
		fmt.Fprintf(os.Stderr, "\nB/A (B = %s, A = %s):\n", res.Runs[1].Binary, res.Runs[0].Binary)
		for _, r := range res.Ratios {
			fmt.Fprintf(os.Stderr, "  %-44s A %-12.3f B %-12.3f B/A %.3f (%s is better)\n", r.Figure, r.A, r.B, r.Ratio, r.Better)
		}
		// Last, so that it is what a reader sees: what A does worse than
		// B beyond the noise.
		fmt.Fprintf(os.Stderr, "\nregressions beyond the noise band (%s):\n", res.Noise)
		if len(res.Regressions) == 0 {
			fmt.Fprintf(os.Stderr, "  none: every figure of A is within its band of B's, or better\n")
		}
		for _, g := range res.Regressions {
			learned := ""
			if !g.Learned {
				learned = " (default band)"
			}
			fmt.Fprintf(os.Stderr, "  %-44s A %-12.3f B %-12.3f B/A %.3f (%s is better)  band ±%.0f %%%s  beyond it by %.0f %%\n",
				g.Figure, g.A, g.B, g.Ratio, g.Better, 100*g.Band, learned, 100*g.Beyond)
		}
	}
	if res.Report != "" {
		fmt.Fprintf(os.Stderr, "\nreport: %s   plot: %s\n", res.Report, res.Plot)
	}
}

func joinInts(l []int) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func joinDurs(l []time.Duration) string {
	s := make([]string, len(l))
	for i, d := range l {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}

func parseDurs(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive duration", f)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}
