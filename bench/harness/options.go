package harness

import (
	"io"
	"time"
)

// Options configure a run of the harness. ShortOptions and FullOptions give
// the two standard shapes; verifybench's flags override single fields.
type Options struct {
	// Root is the module's root directory: binaries are built there and
	// outputs written under it. Default: found from the working directory.
	Root string
	// Verifyd is the verifyd binary under test ("A"); empty: build
	// ./cmd/verifyd into the work directory.
	Verifyd string
	// Compare is a second verifyd binary ("B") run against the same world,
	// scenario by scenario, alternating which goes first; empty: none.
	Compare string
	// Mailworld is the mailworld binary; empty: build ./bench/cmd/mailworld.
	Mailworld string
	// SelfCompare runs binary A as B too: the noise of the machine and
	// the harness, with nothing else different (verifybench -noise).
	SelfCompare bool
	// Noise holds the noise bands the comparison's regressions are judged
	// by (nil: DefaultBand for every figure); NoiseFile names its file,
	// for the report.
	Noise     *Noise
	NoiseFile string

	Mode  string // "short" or "full", for the report
	World WorldOptions

	// FreshLevels are the concurrency levels of scenario 1; each level
	// sends at most FreshCount requests and stops sending after
	// FreshDuration.
	FreshLevels   []int
	FreshCount    int
	FreshDuration time.Duration
	// CacheLevels, CacheCount, CacheDuration shape scenario 2.
	CacheLevels   []int
	CacheCount    int
	CacheDuration time.Duration
	// BatchSize is scenario 3's batch (capped at the world's addresses);
	// BatchTimeout bounds the wait for it to complete.
	BatchSize    int
	BatchTimeout time.Duration
	// MixedBatchSize and MixedConcurrency shape scenario 4; MixedSingles
	// is how many single validations it sends during the batch, the same
	// on both sides of a comparison.
	MixedBatchSize   int
	MixedConcurrency int
	MixedSingles     int
	// FairBatchSize is account A's batch in scenario 7 (capped at the
	// world's addresses), FairSmallSize account B's.
	FairBatchSize int
	FairSmallSize int
	// FleetConcurrency is scenario 8's concurrency of fresh probes
	// (split over the boxes; its cache:true load uses the last of
	// CacheLevels), FleetBatchSize its batch.
	FleetConcurrency int
	FleetBatchSize   int
	// RealWorldDomains is the size of scenario 6's world (the real-world
	// profile; half of them business domains, the other half's addresses
	// at consumer providers); RealWorldRetryWindow is its verifyds'
	// jobs.retry_window, which bounds how long the batch waits on servers
	// that defer for ever. Not a multiple of the egress cooldown's cap
	// (12 s): with 60 s, a deferred-for-ever address's fifth retry fell
	// within a few hundred milliseconds of the window's end, and the
	// batch took 48 s or 60 s by chance (bench/README.md).
	RealWorldDomains     int
	RealWorldRetryWindow time.Duration
	// FeedbackDomains is the size of scenario 9's world (the feedback
	// profile, ten addresses a domain).
	FeedbackDomains int
	// TypoDomains is the number of businesses of scenario 10's world (the
	// typos profile), beside its providers and the published corpus.
	TypoDomains int
	// Scenarios to run, by name (fresh, cache, batch, mixed, accuracy,
	// realworld, fairness, fleet, feedback, typos); empty: all.
	Scenarios []string
	// Soak, when its Duration is set, replaces the scenarios with the
	// soak: binary A under a steady mixed load for that long, sampled
	// (soak.go).
	Soak SoakOptions

	// Verifyd's configuration (paths and world addresses are filled in).
	Config VerifydConfig
	// Credits is the balance the demo account gets.
	Credits int64
	// RequestTimeout bounds one request of the load generator.
	RequestTimeout time.Duration
	// MaxTime bounds the whole run; scenarios left when it runs out are
	// skipped.
	MaxTime time.Duration

	// OutDir receives <timestamp>.json and the plot; Report is the
	// Markdown report; Plot the SVG; SoakPlot the soak's SVG. Relative
	// paths are under Root.
	OutDir   string
	Report   string
	Plot     string
	SoakPlot string
	// NoReport writes the JSON only (not RESULTS.md or the plot).
	NoReport bool
	// WorkDir holds binaries, the world files, verifyd's data and every
	// process's logs; default a new temporary directory, removed at the
	// end unless Keep.
	WorkDir string
	Keep    bool
	// Profile takes a CPU profile of verifyd during every measured level
	// (metrics.pprof on a loopback port) into <WorkDir>/profiles/; set
	// Keep to look at them afterwards.
	Profile bool

	// Command is the command line, for the report.
	Command string
	// Log receives progress lines; nil: none.
	Log io.Writer
}

// ShortOptions is `make bench`: a run of under three minutes on two cores.
func ShortOptions() Options {
	return Options{
		Mode: "short",
		World: WorldOptions{
			Domains: 2000, Seed: 1, Latency: 20 * time.Millisecond,
			STARTTLS: 0.3, CatchAll: 0.05, Greylist: 0.03, Tarpit: 0.01, Auth: 0.3,
			Disposable: "mailinator.com,guerrillamail.com",
			DNS:        "127.0.53.7:0",
		},
		FreshLevels:      []int{16, 64, 256, 1024},
		FreshCount:       3000,
		FreshDuration:    6 * time.Second,
		CacheLevels:      []int{64, 256},
		CacheCount:       200000,
		CacheDuration:    5 * time.Second,
		BatchSize:        20000,
		BatchTimeout:     45 * time.Second,
		MixedBatchSize:   10000,
		MixedConcurrency: 64,
		MixedSingles:     5000,
		FairBatchSize:    20000,
		FleetConcurrency: 256,
		FleetBatchSize:   20000,
		FairSmallSize:    100,
		RealWorldDomains: 500,
		FeedbackDomains:  200,
		TypoDomains:      200,
		// The world's deferrals last for ever; a minute of retries shows
		// the batch's path without the 30 minutes of a real one.
		RealWorldRetryWindow: 54 * time.Second,
		Soak:                 DefaultSoakOptions(),
		Config:               DefaultVerifydConfig(),
		Credits:              1_000_000_000,
		RequestTimeout:       30 * time.Second,
		MaxTime:              30 * time.Minute,
		OutDir:               "bench/results",
		Report:               "bench/RESULTS.md",
		Plot:                 "bench/results/latency-throughput.svg",
		SoakPlot:             "bench/results/soak.svg",
	}
}

// FullOptions is `verifybench -full`: the whole set of the issue (10,000
// domains, 100 ms per SMTP reply, 30 % STARTTLS, a 100,000-address batch).
func FullOptions() Options {
	o := ShortOptions()
	o.Mode = "full"
	o.World.Domains = 10000
	o.World.Latency = 100 * time.Millisecond
	o.FreshLevels = []int{64, 256, 1024, 2048}
	o.FreshCount = 20000
	o.FreshDuration = 30 * time.Second
	o.CacheLevels = []int{64, 256}
	o.CacheCount = 1_000_000
	o.CacheDuration = 15 * time.Second
	o.BatchSize = 100000
	o.BatchTimeout = 10 * time.Minute
	o.MixedBatchSize = 50000
	o.MixedConcurrency = 64
	o.MixedSingles = 20000
	o.FairBatchSize = 100000
	o.FleetBatchSize = 100000
	o.FleetConcurrency = 1024
	o.RealWorldDomains = 2000
	o.FeedbackDomains = 1000
	o.TypoDomains = 1000
	o.MaxTime = 50 * time.Minute
	return o
}

func (o Options) wants(scenario string) bool {
	if len(o.Scenarios) == 0 {
		return true
	}
	for _, s := range o.Scenarios {
		if s == scenario {
			return true
		}
	}
	return false
}
