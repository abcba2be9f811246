package harness

import (
	"math"
	"time"
)

// Result is the machine-readable outcome of a run, written as
// bench/results/<timestamp>.json. Durations are in seconds or milliseconds
// as the field names say; sizes in bytes or MB as they say.
type Result struct {
	Schema      int       `json:"schema"`
	Tool        string    `json:"tool"`
	Mode        string    `json:"mode"`
	StartedAt   time.Time `json:"started_at"`
	Seconds     float64   `json:"seconds"`
	Command     string    `json:"command"`
	Machine     Machine   `json:"machine"`
	Git         string    `json:"git,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
	// TimedOut: the interruption was the run's time bound (MaxTime).
	TimedOut bool `json:"timed_out,omitempty"`

	// Processes are the children the run started, all stopped by its end.
	Processes []ProcInfo `json:"processes,omitempty"`

	World    WorldInfo    `json:"world"`
	Settings Settings     `json:"settings"`
	Runs     []*RunResult `json:"runs"`
	// Ratios are B/A for the main figures, with -compare.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Regressions are the ratios beyond their noise bands on A's worse
	// side (noise.go), with -compare; Noise says where the bands came
	// from.
	Regressions []Regression `json:"regressions,omitempty"`
	Noise       string       `json:"noise,omitempty"`
	// Fleet is scenario 8 (binary A only).
	Fleet *FleetResult `json:"fleet,omitempty"`
	// Soak is the soak of -soak (binary A only), which replaces the
	// scenarios.
	Soak *SoakResult `json:"soak,omitempty"`
	// Profiles summarise verifyd's CPU profiles, with -profile.
	Profiles []ProfileSummary `json:"profiles,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
	Errors   []string         `json:"errors,omitempty"`
	Plot     string           `json:"plot,omitempty"`
	Report   string           `json:"report,omitempty"`
}

// ProcInfo names a child process.
type ProcInfo struct {
	Name string   `json:"name"`
	PID  int      `json:"pid"`
	Args []string `json:"args"`
}

// WorldInfo describes the simulated world of the run.
type WorldInfo struct {
	Options   WorldOptions `json:"options"`
	Domains   int          `json:"domains"`
	Hosts     int          `json:"hosts"`
	Addresses int          `json:"addresses"`
	// ExpectedStatus counts the world's expected verdicts.
	ExpectedStatus map[string]int `json:"expected_status"`
}

// Settings are the load shapes of the run.
type Settings struct {
	FreshLevels      []int   `json:"fresh_levels"`
	FreshCount       int     `json:"fresh_count_per_level"`
	FreshSeconds     float64 `json:"fresh_seconds_per_level"`
	CacheLevels      []int   `json:"cache_levels"`
	CacheCount       int     `json:"cache_count_per_level"`
	CacheSeconds     float64 `json:"cache_seconds_per_level"`
	BatchSize        int     `json:"batch_size"`
	BatchSeconds     float64 `json:"batch_seconds_cap"`
	MixedBatchSize   int     `json:"mixed_batch_size"`
	MixedConcurrency int     `json:"mixed_concurrency"`
	FairBatchSize    int     `json:"fair_batch_size,omitempty"`
	FairSmallSize    int     `json:"fair_small_size,omitempty"`
	Verifyd          string  `json:"verifyd_config"`
	Credits          int64   `json:"credits"`
}

// RunResult is everything measured of one verifyd binary.
type RunResult struct {
	Label      string    `json:"label"`
	Binary     string    `json:"binary"`
	Built      bool      `json:"built_by_harness"`
	CreditsVia string    `json:"credits_via,omitempty"`
	Scenarios  Scenarios `json:"scenarios"`
	Targets    []Target  `json:"targets"`
}

// Scenarios are the harness's seven scenarios; one that did not run has
// its Skipped reason set.
type Scenarios struct {
	Fresh    *FreshResult    `json:"fresh"`
	Cache    *CacheResult    `json:"cache"`
	Batch    *BatchResult    `json:"batch"`
	Mixed    *MixedResult    `json:"mixed"`
	Accuracy *AccuracyResult `json:"accuracy"`
	// RealWorld is scenario 6 (absent in results of earlier versions).
	RealWorld *RealWorldResult `json:"realworld,omitempty"`
	// Fairness is scenario 7 (absent in results of earlier versions).
	Fairness *FairnessResult `json:"fairness,omitempty"`
	// Feedback is scenario 9 (absent in results of earlier versions).
	Feedback *FeedbackResult `json:"feedback,omitempty"`
	// Typos is scenario 10 (absent in results of earlier versions).
	Typos *TyposResult `json:"typos,omitempty"`
}

// FreshResult is scenario 1: single fresh validations at increasing
// concurrency.
type FreshResult struct {
	Skipped string  `json:"skipped,omitempty"`
	Levels  []Level `json:"levels"`
	// PebbleSync is a bare Pebble synced write at the first level's
	// concurrency, measured after that level (the same for every run).
	PebbleSync *PebbleSync `json:"pebble_sync,omitempty"`
}

// CacheResult is scenario 2: cache:true hits, the API's own ceiling.
type CacheResult struct {
	Skipped string `json:"skipped,omitempty"`
	// Seeded is how many addresses were hammered (each had a cached,
	// non-unknown result).
	Seeded int     `json:"seeded"`
	Levels []Level `json:"levels"`
}

// Level is one load at one concurrency.
type Level struct {
	Concurrency int            `json:"concurrency"`
	Sent        int            `json:"sent"`
	OK          int            `json:"ok"`
	Errors      map[string]int `json:"errors,omitempty"`
	// Throughput is successes per second while the load was sustained
	// (WindowSeconds); OverallThroughput includes the closing drain.
	Throughput        float64     `json:"throughput_per_s"`
	WindowSeconds     float64     `json:"window_s"`
	OverallThroughput float64     `json:"overall_throughput_per_s"`
	TotalSeconds      float64     `json:"total_s"`
	Latency           Percentiles `json:"latency_ms"`
	// Prompt are the latencies of the addresses the world answers
	// promptly, leaving out tarpits, dropped DNS and greylisting, which
	// hold a probe for seconds by design (fresh probes only).
	Prompt *Percentiles `json:"latency_prompt_ms,omitempty"`
	// Overhead is the API's time over the engine's: the client's round
	// trip minus the engine's time (fresh probes only), taken from the
	// Server-Timing header or, where an answer had none, the receipt's
	// whole-millisecond latency_ms (OverheadFrom says which).
	Overhead     *Percentiles `json:"api_overhead_ms,omitempty"`
	OverheadFrom string       `json:"api_overhead_from,omitempty"`
	Verifyd      ProcUsage    `json:"verifyd"`
	World        ProcUsage    `json:"world"`
	Client       ProcUsage    `json:"client"`
	// SyscallsPerRequest is verifyd's system calls (perf's
	// raw_syscalls:sys_enter) per successful request; 0 without perf.
	SyscallsPerRequest float64 `json:"syscalls_per_request,omitempty"`
	// Phases is where the fresh probes' time went, from verifyd's own
	// metrics (absent when the binary exports none).
	Phases []PhaseTime `json:"phases,omitempty"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	N    uint64  `json:"n"`
}

func percentiles(h *Histogram) Percentiles {
	ms := func(d time.Duration) float64 { return round3(d.Seconds() * 1000) }
	return Percentiles{
		P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P99: ms(h.Quantile(0.99)),
		Max: ms(h.Max()), Mean: ms(h.Mean()), N: h.Count(),
	}
}

// ProcUsage is one process's share of an interval.
type ProcUsage struct {
	CPUSeconds float64 `json:"cpu_s"`
	// Cores is CPU time over wall time.
	Cores float64 `json:"cores"`
	// CPUPerRequestMs is CPU time per successful request (verifyd only).
	CPUPerRequestMs float64 `json:"cpu_per_request_ms,omitempty"`
	PeakRSSMB       float64 `json:"peak_rss_mb,omitempty"`
	// PeakExact: the peak is VmHWM reset at the start of the interval (every
	// page counted), not only 50 ms samples of VmRSS.
	PeakExact bool `json:"peak_exact,omitempty"`
}

func procUsage(u Usage, ok int, withRSS bool) ProcUsage {
	p := ProcUsage{CPUSeconds: round3(u.CPU.Seconds()), Cores: round3(u.Cores())}
	if ok > 0 {
		p.CPUPerRequestMs = round3(u.CPU.Seconds() * 1000 / float64(ok))
	}
	if withRSS {
		p.PeakRSSMB = round3(float64(u.PeakRSS) / (1 << 20))
		p.PeakExact = u.PeakExact
	}
	return p
}

// BatchResult is scenario 3: one large batch through POST /v1/batch,
// GET /v1/jobs/{id} and /results.csv (spec §4.2-4.4).
type BatchResult struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	Size    int    `json:"size"`
	JobID   string `json:"job_id,omitempty"`
	// UploadSeconds is POST /v1/batch until its 202; CompletionSeconds from
	// the start of the upload until the job reads completed; DownloadSeconds
	// the CSV download.
	UploadSeconds     float64 `json:"upload_s"`
	CompletionSeconds float64 `json:"completion_s"`
	DownloadSeconds   float64 `json:"download_s"`
	// Seconds99 is when progress first read 99 % processed: the bulk's
	// pace without the tail of slow addresses (tarpits, greylisting).
	Seconds99 float64 `json:"seconds_to_99pct"`
	// Rate is addresses per second over CompletionSeconds.
	Rate        float64        `json:"rate_per_s"`
	Status      string         `json:"status,omitempty"`
	Processed   int            `json:"processed"`
	Rows        int            `json:"csv_rows"`
	CSVBytes    int            `json:"csv_bytes"`
	RowStatuses map[string]int `json:"row_statuses,omitempty"`
	Verifyd     ProcUsage      `json:"verifyd"`
	World       ProcUsage      `json:"world"`
	// Progress samples (seconds since the upload started, processed).
	Progress [][2]float64 `json:"progress,omitempty"`

	confusion *Confusion
}

// MixedResult is scenario 4: single validations while a batch runs.
type MixedResult struct {
	Skipped string       `json:"skipped,omitempty"`
	Error   string       `json:"error,omitempty"`
	Note    string       `json:"note,omitempty"`
	Batch   *BatchResult `json:"batch,omitempty"`
	Singles *Level       `json:"singles,omitempty"`
	// The singles validate addresses the world answers promptly, so their
	// p99 is verifyd's. BaselineP99Ms is scenario 1's p99 of such
	// addresses at the same concurrency, without a batch; P99Ratio is
	// Singles p99 over it.
	BaselineP99Ms float64 `json:"baseline_p99_ms,omitempty"`
	P99Ratio      float64 `json:"p99_ratio,omitempty"`
	// Alone is a batch of as many other addresses run first with nothing
	// beside it; BatchRatio is Batch's completion time over Alone's, and
	// Bulk99Ratio the same of the time to 99 % processed.
	Alone       *BatchResult `json:"alone,omitempty"`
	BatchRatio  float64      `json:"batch_ratio,omitempty"`
	Bulk99Ratio float64      `json:"bulk99_ratio,omitempty"`
	// Share is the adaptive batch share while the singles ran, from
	// verifyd's /metrics (nil for a verifyd without it).
	Share *ShareSamples `json:"share,omitempty"`
}

// ShareSamples follow verifyd's adaptive batch share (its gauges sampled
// every 250 ms, its counters before and after).
type ShareSamples struct {
	Samples      int     `json:"samples"`
	LimitMean    float64 `json:"limit_mean"`
	LimitMin     float64 `json:"limit_min"`
	SessionsMean float64 `json:"sessions_mean"`
	// SchedMeanMaxMs is the highest Go scheduler mean latency the
	// limiter read in an interval.
	SchedMeanMaxMs float64 `json:"sched_mean_max_ms"`
	// Backoffs by cause (sched, queue).
	Backoffs map[string]float64 `json:"backoffs"`
	// Phases are the engine's phases over the same time, the batch's
	// and the singles' together: MeanMs is one occurrence's mean.
	Phases []PhaseTime `json:"phases,omitempty"`
}

// AccuracyResult is scenario 5: verdicts against the world's expectations.
type AccuracyResult struct {
	Skipped string `json:"skipped,omitempty"`
	// Single compares every receipt of scenario 1 (verdict and reason).
	Single *Confusion `json:"single"`
	// Batch compares the CSV of scenario 3 (verdict only: the CSV has no
	// reason column).
	Batch *Confusion `json:"batch,omitempty"`
}

// Target is one target of an earlier issue beside the figure measured.
type Target struct {
	Name   string  `json:"name"`
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Target string  `json:"target"`
	// Met is nil when the figure could not be measured.
	Met  *bool  `json:"met"`
	Note string `json:"note,omitempty"`
	// Relative: the figure depends on the machine's speed (a throughput,
	// a time), so its target holds for the machine it was set on; a
	// ratio measured in one run, or an agreement, holds on any machine.
	Relative bool `json:"machine_relative"`
}

// Ratio is B's figure over A's.
type Ratio struct {
	Figure string  `json:"figure"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Ratio  float64 `json:"b_over_a"`
	// Better is "higher" or "lower": which way is an improvement.
	Better string `json:"better"`
}

func round3(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return math.Round(f*1000) / 1000
}
