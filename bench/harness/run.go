package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// runner is one run: the processes, the world, the verifyds and what they
// measured.
type runner struct {
	o     Options
	work  string
	procs *Procs
	world *World
	// mailworld is the mailworld binary, for the worlds of later scenarios.
	mailworld string
	vds       []*Verifyd
	runs      []*RunResult
	res       *Result

	// pool is the world's addresses in a seeded random order; the fresh
	// levels take consecutive slices of it (the same for A and B).
	pool   []string
	cursor int
	// outcomes of scenario 1 per run, for scenario 2's seeds and
	// scenario 5.
	outcomes map[string][]outcome
	// fleetFlip alternates the order of scenario 8's sides.
	fleetFlip bool
	// loaded is when each verifyd's last measured load ended (by index
	// in vds), for restedFirst.
	loaded []time.Time
	// pgStats reads scenario 8's pg_stat_statements (nil: none).
	pgStats *pgStats
}

// outcome is one answered fresh validation.
type outcome struct {
	Email     string
	Status    string
	Reason    string
	LatencyMs int64
	// Engine is the engine's time from the Server-Timing header, when
	// HasEngine (verifyd sends it to the microsecond).
	Engine    time.Duration
	HasEngine bool
	Client    time.Duration
	OK        bool
	Bytes     int // the answer's body
}

func (r *runner) logf(format string, a ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "verifybench: "+format+"\n", a...)
	}
}

// Run runs the benchmark and writes its outputs. It returns the result
// even when it also returns an error (a partial run).
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Root == "" {
		root, err := FindRoot()
		if err != nil {
			return nil, err
		}
		o.Root = root
	}
	if o.Soak.Duration > 0 {
		if o.Compare != "" {
			return nil, errors.New("the soak runs binary A alone: -compare does not apply")
		}
		o.Mode = "soak"
		// The time bound leaves room for the setup and the drain.
		if o.MaxTime > 0 && o.MaxTime < o.Soak.Duration+10*time.Minute {
			o.MaxTime = o.Soak.Duration + 10*time.Minute
		}
	}
	if o.MaxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.MaxTime)
		defer cancel()
	}
	r := &runner{o: o, procs: &Procs{}, outcomes: map[string][]outcome{}}
	r.res = &Result{
		Schema: 1, Tool: "verifybench", Mode: o.Mode, StartedAt: start.UTC(),
		Command: o.Command, Machine: ReadMachine(), Git: gitDescribe(o.Root),
	}
	r.res.World.Options = o.World

	work := o.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "verifybench-"); err != nil {
			return nil, err
		}
	}
	r.logf("work directory %s", work)
	defer func() {
		if err := r.procs.StopAll(15 * time.Second); err != nil {
			r.logf("stopping processes: %v", err)
		}
		if !o.Keep && o.WorkDir == "" {
			os.RemoveAll(work)
		}
	}()

	err := r.run(ctx, work)
	if err != nil {
		r.res.Errors = append(r.res.Errors, err.Error())
	}
	if ctx.Err() != nil {
		r.res.Interrupted = true
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.res.TimedOut = true
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("the run's time bound (%s) ran out; later scenarios were skipped", o.MaxTime))
		}
	}
	// Stop the processes before writing, so the report's numbers are final
	// and nothing runs on after an interrupt.
	r.res.Processes = append(r.res.Processes, r.procs.Info()...)
	if err := r.procs.StopAll(15 * time.Second); err != nil {
		r.logf("stopping processes: %v", err)
	}
	r.res.Seconds = round3(time.Since(start).Seconds())
	if werr := r.write(); werr != nil {
		err = errors.Join(err, werr)
	}
	return r.res, err
}

func (r *runner) run(ctx context.Context, work string) error {
	r.work = work
	o := r.o
	// Binaries.
	bins := filepath.Join(work, "bin")
	vA, builtA, err := r.binary(ctx, o.Verifyd, "./cmd/verifyd", bins, "verifyd")
	if err != nil {
		return err
	}
	mw, _, err := r.binary(ctx, o.Mailworld, "./bench/cmd/mailworld", bins, "mailworld")
	if err != nil {
		return err
	}
	r.mailworld = mw
	r.runs = append(r.runs, &RunResult{Label: "A", Binary: vA, Built: builtA})
	if o.SelfCompare {
		if o.Compare != "" {
			return errors.New("-noise compares binary A with itself: -compare does not apply")
		}
		r.runs = append(r.runs, &RunResult{Label: "B", Binary: vA})
	} else if o.Compare != "" {
		vB, err := filepath.Abs(o.Compare)
		if err != nil {
			return err
		}
		if _, err := os.Stat(vB); err != nil {
			return fmt.Errorf("-compare: %w", err)
		}
		r.runs = append(r.runs, &RunResult{Label: "B", Binary: vB})
	}
	r.res.Runs = r.runs

	// The world.
	r.logf("starting the world: %d domains, %s per SMTP reply", o.World.Domains, o.World.Latency)
	wdir := filepath.Join(work, "world")
	if err := os.MkdirAll(wdir, 0o700); err != nil {
		return err
	}
	if r.world, err = StartWorld(ctx, r.procs, mw, wdir, o.World); err != nil {
		return err
	}
	r.res.World.Domains, r.res.World.Hosts, r.res.World.Addresses = r.world.Domains, r.world.Hosts, len(r.world.Expected)
	r.res.World.ExpectedStatus = map[string]int{}
	for _, e := range r.world.Expected {
		r.res.World.ExpectedStatus[e.Status]++
	}
	r.logf("world: DNS %s, SMTP port %d, %d hosts, %d addresses", r.world.DNS, r.world.SMTPPort, r.world.Hosts, len(r.world.Expected))
	r.pool = make([]string, len(r.world.Expected))
	for i, e := range r.world.Expected {
		r.pool[i] = e.Email
	}
	rng := rand.New(rand.NewPCG(o.World.Seed, 0x76657269667962))
	rng.Shuffle(len(r.pool), func(i, j int) { r.pool[i], r.pool[j] = r.pool[j], r.pool[i] })

	// The verifyds: each its own data and its own egress addresses, so
	// the world's greylisting and per-client limits see them apart.
	firsts := []string{"127.0.0.2", "127.0.0.18"}
	for i, run := range r.runs {
		cfg := o.Config
		cfg.DNS = r.world.DNS
		cfg.SMTPPort = r.world.SMTPPort
		cfg.Egress = EgressRange(netip.MustParseAddr(firsts[i]), len(o.Config.Egress))
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg.Metrics, cfg.Pprof = fmt.Sprintf("127.0.0.1:%d", port), o.Profile
		if o.Soak.Duration > 0 {
			// The receiver is on loopback; failed deliveries are retried
			// within seconds, and jobs wait on greylisting for minutes.
			cfg.WebhooksAllowPrivate = true
			cfg.WebhookRetrySchedule = o.Soak.HookRetry
			if cfg.RetryWindow == 0 {
				cfg.RetryWindow = o.Soak.RetryWindow
			}
		}
		v, err := StartVerifyd(ctx, r.procs, run.Label, run.Binary, filepath.Join(work, "verifyd-"+run.Label), cfg)
		if err != nil {
			return err
		}
		if err := v.SetCredits(ctx, o.Credits); err != nil {
			return err
		}
		run.CreditsVia = v.CreditsVia
		r.vds = append(r.vds, v)
		r.logf("verifyd %s (pid %d) on %s; credits set via %s", run.Label, v.Proc.PID, v.Base, v.CreditsVia)
		if i == 0 {
			r.res.Settings = r.settings(v.Config)
		}
	}

	if o.Soak.Duration > 0 {
		if err := r.soak(ctx); err != nil {
			return fmt.Errorf("soak: %w", err)
		}
		return r.checkAlive()
	}

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"fresh", r.scenarioFresh},
		{"cache", r.scenarioCache},
		{"batch", r.scenarioBatch},
		{"mixed", r.scenarioMixed},
		{"accuracy", r.scenarioAccuracy},
		{"realworld", r.scenarioRealWorld},
		{"fairness", r.scenarioFairness},
		{"fleet", r.scenarioFleet},
		{"feedback", r.scenarioFeedback},
		{"typos", r.scenarioTypos},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			r.skipRest(s.name, "not run: "+ctx.Err().Error())
			continue
		}
		if !o.wants(s.name) {
			r.skipRest(s.name, "not selected (-scenarios)")
			continue
		}
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("scenario %s: %w", s.name, err)
		}
		if err := r.checkAlive(); err != nil {
			return err
		}
	}
	if o.Profile {
		// The profiles taken are read even when the run's time bound ran
		// out: they are what a partial run still has to say.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		r.res.Profiles = r.summarizeProfiles(pctx)
		cancel()
	}
	for _, run := range r.runs {
		run.Targets = targets(run, r.o)
	}
	if len(r.runs) == 2 {
		r.res.Ratios = ratios(r.runs[0], r.runs[1])
		if !o.SelfCompare {
			r.res.Regressions = Regressions(r.res.Ratios, o.Noise)
			r.res.Noise = "no noise file: every band is the default"
			if o.Noise != nil {
				r.res.Noise = fmt.Sprintf("%s: %d rounds of %s against itself on %s (%d CPUs), %s",
					o.NoiseFile, o.Noise.Rounds, o.Noise.Binary, o.Noise.Machine.CPUModel, o.Noise.Machine.CPUs, o.Noise.CreatedAt.Format(time.DateOnly))
				if why := NoiseMismatch(o.Noise, r.res, o.Scenarios); why != "" {
					r.res.Noise += "; " + why
				}
			}
		}
	}
	return nil
}

// checkAlive fails the run when a process died under load.
func (r *runner) checkAlive() error {
	if !r.world.Proc.Running() {
		return fmt.Errorf("mailworld exited during the run; its stderr ends:\n%s", r.world.Proc.Tail(15))
	}
	for _, v := range r.vds {
		if !v.Proc.Running() {
			return fmt.Errorf("verifyd %s exited during the run; its stderr ends:\n%s", v.Label, v.Proc.Tail(15))
		}
	}
	return nil
}

// skipRest marks a scenario skipped in every run.
func (r *runner) skipRest(name, why string) {
	for _, run := range r.runs {
		s := &run.Scenarios
		switch name {
		case "fresh":
			if s.Fresh == nil {
				s.Fresh = &FreshResult{Skipped: why}
			}
		case "cache":
			if s.Cache == nil {
				s.Cache = &CacheResult{Skipped: why}
			}
		case "batch":
			if s.Batch == nil {
				s.Batch = &BatchResult{Skipped: why}
			}
		case "mixed":
			if s.Mixed == nil {
				s.Mixed = &MixedResult{Skipped: why}
			}
		case "accuracy":
			if s.Accuracy == nil {
				s.Accuracy = &AccuracyResult{Skipped: why}
			}
		case "realworld":
			if s.RealWorld == nil {
				s.RealWorld = &RealWorldResult{Skipped: why}
			}
		case "feedback":
			if s.Feedback == nil {
				s.Feedback = &FeedbackResult{Skipped: why}
			}
		case "typos":
			if s.Typos == nil {
				s.Typos = &TyposResult{Skipped: why}
			}
		}
	}
}

func (r *runner) settings(cfg VerifydConfig) Settings {
	o := r.o
	cfg.DataDir, cfg.AdminSocket = "<work>/verifyd-A/data", "<work>/verifyd-A/admin.sock"
	return Settings{
		FreshLevels: o.FreshLevels, FreshCount: o.FreshCount, FreshSeconds: o.FreshDuration.Seconds(),
		CacheLevels: o.CacheLevels, CacheCount: o.CacheCount, CacheSeconds: o.CacheDuration.Seconds(),
		BatchSize: min(o.BatchSize, len(r.pool)), BatchSeconds: o.BatchTimeout.Seconds(),
		MixedBatchSize: min(o.MixedBatchSize, len(r.pool)), MixedConcurrency: o.MixedConcurrency,
		FairBatchSize: min(o.FairBatchSize, len(r.pool)), FairSmallSize: o.FairSmallSize,
		Verifyd: cfg.TOML(), Credits: o.Credits,
	}
}

// take returns the next n addresses of the pool, wrapping around.
func (r *runner) take(n int) []string {
	out := make([]string, 0, n)
	for len(out) < n {
		out = append(out, r.pool[r.cursor])
		r.cursor = (r.cursor + 1) % len(r.pool)
	}
	return out
}

// restedFirst returns the verifyds in the order to run a step of its
// own (scenarios 3 and 4), the one whose last measured load ended first
// going first: each then starts after at least the other's run of the
// step before, at rest from its own. With A always first, A's batch began
// the moment its last fresh level (run after B's) ended, and its CPU per
// address came out 2 to 40 % above B's in 8 of 9 runs, whichever binary A
// was (this tree's, f370b3b's, the same build): work left over from its
// load (Pebble's compactions of its writes, the garbage it left) charged
// to the batch. A regression the bench made up. Since, the same build
// gives B/A 1.010 and 1.025.
func (r *runner) restedFirst() []int {
	idx := r.order(0)
	if len(r.loaded) == len(idx) {
		sort.SliceStable(idx, func(a, b int) bool { return r.loaded[idx[a]].Before(r.loaded[idx[b]]) })
	}
	return idx
}

// doneLoading records that v's measured load ended now (a verifyd not
// of vds, scenario 8's boxes, is not recorded).
func (r *runner) doneLoading(v *Verifyd) {
	if len(r.loaded) != len(r.vds) {
		r.loaded = make([]time.Time, len(r.vds))
	}
	for i, x := range r.vds {
		if x == v {
			r.loaded[i] = time.Now()
		}
	}
}

// order returns the verifyds in the order to run step k: alternating, so
// neither binary always runs first on a warming machine.
func (r *runner) order(k int) []int {
	idx := make([]int, len(r.vds))
	for i := range idx {
		idx[i] = i
	}
	if k%2 == 1 {
		sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	}
	return idx
}

// binary returns path if set, else builds pkg into dir.
func (r *runner) binary(ctx context.Context, path, pkg, dir, name string) (string, bool, error) {
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", false, err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", false, err
		}
		return abs, false, nil
	}
	out := filepath.Join(dir, name)
	r.logf("building %s", pkg)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = r.o.Root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, true, nil
}

// FindRoot returns the directory of the go.mod of module
// github.com/verifyd/verifyd, from the working directory up.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/verifyd/verifyd\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the verifyd module (no go.mod of github.com/verifyd/verifyd above the working directory)")
		}
		dir = parent
	}
}

// gitDescribe names the commit of root, noting uncommitted changes.
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		s += " with uncommitted changes"
	}
	return s
}

// write writes the JSON result, and unless the run was interrupted or
// NoReport is set, the plot and RESULTS.md.
func (r *runner) write() error {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(r.o.Root, p)
	}
	outDir := abs(r.o.OutDir)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	var errs []error
	// An interrupt (^C) leaves the report of the last whole run; a run
	// whose time bound ran out writes its own, marked partial.
	writeReport := !r.o.NoReport && (!r.res.Interrupted || r.res.TimedOut) && len(r.runs) > 0
	soak := r.res.Soak != nil
	plot := r.o.Plot
	if soak {
		plot = r.o.SoakPlot
	}
	if writeReport && plot != "" {
		write := writePlot
		if soak {
			write = writeSoakPlot
		}
		if err := write(abs(plot), r.res); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plot = relTo(r.o.Root, abs(plot))
		}
	}
	if writeReport && r.o.Report != "" {
		r.res.Report = relTo(r.o.Root, abs(r.o.Report))
	}
	name := filepath.Join(outDir, r.res.StartedAt.Format("20060102-150405")+".json")
	b, err := json.MarshalIndent(r.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
		errs = append(errs, err)
	} else {
		r.logf("wrote %s", name)
	}
	if writeReport && r.o.Report != "" {
		report := abs(r.o.Report)
		jsonRel := relTo(filepath.Dir(report), name)
		plotRel := ""
		if r.res.Plot != "" {
			plotRel = relTo(filepath.Dir(report), abs(plot))
		}
		// The soak writes its section into the report of the last run of
		// the scenarios, and that run keeps the last soak's section.
		old, err := os.ReadFile(report)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Writing now would lose the sections it could not read.
			return errors.Join(append(errs, err)...)
		}
		var buf bytes.Buffer
		var doc string
		if soak {
			writeSoakSection(&buf, r.res, jsonRel, plotRel)
			doc = spliceSection(string(old), soakHeading, buf.String())
		} else {
			writeMarkdown(&buf, r.res, jsonRel, plotRel)
			doc = buf.String()
			if sec := extractSection(string(old), soakHeading); sec != "" {
				doc = spliceSection(doc, soakHeading, sec)
			}
		}
		if err := os.WriteFile(report, []byte(doc), 0o644); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote %s", report)
		}
	}
	return errors.Join(errs...)
}

func relTo(base, p string) string {
	if rel, err := filepath.Rel(base, p); err == nil {
		return rel
	}
	return p
}
