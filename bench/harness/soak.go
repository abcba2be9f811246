package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The soak (verifybench -soak 30m): binary A, started as for the scenarios
// (one box on Pebble, in the run's world), under a steady mixed load for a
// set time, while the harness samples verifyd's process. It looks for
// what a short run cannot see: memory, goroutines, file descriptors or
// disk that keep growing under a load that does not.
//
//  1. Fresh single validations (POST /v1/validate) at FreshRate a second,
//     cycling over the world's addresses (each is probed again when its
//     turn comes back: without cache: true verifyd always probes).
//  2. cache: true validations at CacheRate a second, of addresses the
//     singles validated (verdicts other than unknown, which verifyd does
//     not cache); every answer must say "cached": true.
//  3. A batch of BatchSize addresses every BatchEvery (the first 5 s in),
//     with a webhookUrl on a receiver the harness runs on loopback
//     (webhooks.allow_private); the receiver answers 500 to HookFail of
//     the attempts, at random, so verifyd retries on a short
//     webhooks.retry_schedule (HookRetry). Each job is polled every
//     500 ms until it ends and its CSV downloaded and checked.
//
// The singles are paced (open loop), at most soakInFlight of each kind in
// flight: a request due while that many are waiting is not sent, and
// counted. Every Sample (from the start, the load's first moment
// included) the harness reads verifyd's VmRSS (/proc/<pid>/status), the
// entries of /proc/<pid>/fd, go_goroutines from its /metrics, and the sum
// of the file sizes under <data_dir>/db, Pebble's directory (du -b; its
// write-ahead log included, which verifyd_storage_pebble_disk_usage_bytes
// leaves out until Pebble recycles the log's files), and a few figures that explain them (Go heap
// and runtime memory, the cache memo, the resolver's cache, Pebble's own
// figure, CPU time, the requests answered so far).
//
// After the warm-up (Warmup; default the first 5 minutes, or the first
// quarter of a shorter soak), each metric gets the least-squares slope of
// its samples; the slope times the soak's length is its growth, and the
// metric is flat when the growth is at most SoakTolerance of its median
// after the warm-up, or its absolute floor (soakMetrics) when that is
// larger. The verdict is "flat after warm-up" when every metric is, else
// it names the ones that grew.

// SoakOptions shape the soak.
type SoakOptions struct {
	// Duration of the load; 0: no soak (the scenarios run).
	Duration time.Duration
	// Sample is the time between two samples. Default 10 s.
	Sample time.Duration
	// Warmup is left out of the figures; 0: the first 5 minutes, or the
	// first quarter of a soak shorter than 20 minutes.
	Warmup time.Duration
	// FreshRate and CacheRate are the single validations sent a second,
	// fresh and cache: true.
	FreshRate float64
	CacheRate float64
	// A batch of BatchSize addresses is uploaded every BatchEvery.
	BatchSize  int
	BatchEvery time.Duration
	// HookFail is the fraction of webhook attempts the receiver answers
	// with a 500; HookRetry is verifyd's webhooks.retry_schedule.
	HookFail  float64
	HookRetry []time.Duration
	// RetryWindow is verifyd's jobs.retry_window: it bounds how long a
	// job waits on greylisting (the world's lasts 2 s).
	RetryWindow time.Duration
}

// DefaultSoakOptions is the soak's load, without a duration.
func DefaultSoakOptions() SoakOptions {
	return SoakOptions{
		Sample:      10 * time.Second,
		FreshRate:   20,
		CacheRate:   100,
		BatchSize:   2000,
		BatchEvery:  time.Minute,
		HookFail:    0.25,
		HookRetry:   []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second},
		RetryWindow: 2 * time.Minute,
	}
}

// WarmupTime is the warm-up the figures leave out.
func (o SoakOptions) WarmupTime() time.Duration {
	if o.Warmup > 0 {
		return o.Warmup
	}
	return min(5*time.Minute, o.Duration/4)
}

// SoakTolerance is the growth over the soak, as a fraction of the
// metric's median after the warm-up, that still counts as flat.
const SoakTolerance = 0.10

const (
	// soakInFlight bounds the singles of each kind in flight.
	soakInFlight = 512
	// soakBatchOffset is when the first batch is uploaded.
	soakBatchOffset = 5 * time.Second
	// soakJobPoll is the time between two GET /v1/jobs/{id}.
	soakJobPoll = 500 * time.Millisecond
	// soakHookGrace is how long the soak waits, once the jobs ended, for
	// their webhook events still being retried.
	soakHookGrace = time.Minute
	// soakSeeds bounds the addresses the cache: true load cycles over.
	soakSeeds = 5000
)

// soakMetric is one judged metric: its name, unit, absolute floor of the
// tolerance, and its value in a sample.
type soakMetric struct {
	key, name, unit string
	floor           float64
	get             func(SoakSample) (float64, bool)
}

// soakMetrics are the metrics the verdict judges. The floors keep small
// numbers from failing on noise: a few MB of RSS or disk, a few dozen
// goroutines or descriptors (one connection more in flight at the sample).
var soakMetrics = []soakMetric{
	{"rss", "RSS (VmRSS)", "MB", 16, func(s SoakSample) (float64, bool) { return s.RSSMB, s.RSSMB > 0 }},
	{"goroutines", "goroutines (go_goroutines)", "", 50, func(s SoakSample) (float64, bool) { return s.Goroutines, s.Goroutines > 0 }},
	{"open_files", "open files (/proc/pid/fd)", "", 20, func(s SoakSample) (float64, bool) { return s.OpenFiles, s.OpenFiles > 0 }},
	{"pebble_disk", "Pebble on disk", "MB", 16, func(s SoakSample) (float64, bool) { return s.PebbleDiskMB, s.PebbleDiskMB > 0 }},
}

// SoakResult is what the soak measured.
type SoakResult struct {
	Error string `json:"error,omitempty"`
	// Seconds is the load's length as asked; RanSeconds as it ran (less
	// when interrupted).
	Seconds       float64 `json:"seconds"`
	RanSeconds    float64 `json:"ran_seconds"`
	SampleSeconds float64 `json:"sample_seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	Tolerance     float64 `json:"tolerance"`
	Load          struct {
		FreshPerSecond float64   `json:"fresh_per_s"`
		CachePerSecond float64   `json:"cache_per_s"`
		BatchSize      int       `json:"batch_size"`
		BatchEverySec  float64   `json:"batch_every_s"`
		HookFail       float64   `json:"webhook_fail_fraction"`
		HookRetry      []float64 `json:"webhook_retry_schedule_s"`
		RetryWindowSec float64   `json:"jobs_retry_window_s"`
		InFlight       int       `json:"in_flight_bound"`
	} `json:"load"`
	Samples []SoakSample  `json:"samples"`
	Metrics []SoakFigures `json:"metrics"`
	// Flat is the verdict: every metric flat after the warm-up; Verdict
	// says it in words, Grew names the others.
	Flat    bool     `json:"flat"`
	Verdict string   `json:"verdict"`
	Grew    []string `json:"grew,omitempty"`
	// DiskPerRecord is Pebble's growth after the warm-up over the records
	// stored meanwhile (each answered validation and batch address writes
	// one), in bytes.
	DiskPerRecord float64    `json:"disk_bytes_per_record,omitempty"`
	Kinds         []SoakKind `json:"kinds"`
	Webhooks      SoakHooks  `json:"webhooks"`
	// Verifyd and World are the processes' CPU over the load.
	Verifyd ProcUsage `json:"verifyd"`
	World   ProcUsage `json:"world"`
}

// SoakSample is one reading of verifyd's process.
type SoakSample struct {
	T          float64 `json:"t_s"`
	RSSMB      float64 `json:"rss_mb"`
	Goroutines float64 `json:"goroutines"`
	OpenFiles  float64 `json:"open_files"`
	// PebbleDiskMB is the sum of the file sizes under <data_dir>/db (du
	// -b), write-ahead log included; DataDirMB the same of the whole
	// data directory; PebbleMetricMB Pebble's own
	// verifyd_storage_pebble_disk_usage_bytes, which lags PebbleDiskMB
	// until Pebble recycles the write-ahead log's files.
	PebbleDiskMB   float64 `json:"pebble_disk_mb"`
	DataDirMB      float64 `json:"data_dir_mb"`
	PebbleMetricMB float64 `json:"pebble_metric_mb"`
	// HeapInuseMB (go_memstats_heap_inuse_bytes), GoHeldMB (what the Go
	// runtime holds from the OS and has not given back:
	// go_memstats_sys_bytes - go_memstats_heap_released_bytes; RSS beyond
	// it is mostly memory allocated outside Go, Pebble's block cache and
	// memtables in a binary built with cgo), MemoMB
	// (verifyd_storage_cache_memo_bytes) and ResolverEntries
	// (verifyd_resolver_cache_entries) explain the RSS; CPUSeconds is
	// verifyd's utime + stime so far.
	HeapInuseMB     float64 `json:"go_heap_inuse_mb"`
	GoHeldMB        float64 `json:"go_held_mb"`
	MemoMB          float64 `json:"cache_memo_mb"`
	ResolverEntries float64 `json:"resolver_cache_entries"`
	CPUSeconds      float64 `json:"cpu_s"`
	// Fresh, Cache and BatchAddresses are the successes so far: answered
	// validations, and addresses of completed jobs.
	Fresh          int64 `json:"fresh_ok"`
	Cache          int64 `json:"cache_ok"`
	BatchAddresses int64 `json:"batch_addresses"`
	// Missing names what could not be read this time.
	Missing []string `json:"missing,omitempty"`
}

// SoakFigures are one metric's figures after the warm-up.
type SoakFigures struct {
	Key     string  `json:"key"`
	Name    string  `json:"name"`
	Unit    string  `json:"unit"`
	Samples int     `json:"samples"`
	First   float64 `json:"first"`
	Median  float64 `json:"median"`
	Max     float64 `json:"max"`
	Last    float64 `json:"last"`
	// SlopePerHour is the least-squares line's slope; Growth is it times
	// the soak's length; Tolerance the largest growth still flat.
	SlopePerHour float64 `json:"slope_per_hour"`
	Growth       float64 `json:"growth"`
	Tolerance    float64 `json:"tolerance"`
	Flat         bool    `json:"flat"`
}

// SoakKind counts one kind of request.
type SoakKind struct {
	Kind string `json:"kind"`
	Sent int64  `json:"sent"`
	OK   int64  `json:"ok"`
	// NotSent were due while the in-flight bound was reached.
	NotSent int64          `json:"not_sent,omitempty"`
	Errors  map[string]int `json:"errors,omitempty"`
	// Latency is of the successes: the round trip, or for a job, upload
	// to its end.
	Latency Percentiles `json:"latency_ms"`
}

// SoakHooks is what the webhook receiver saw.
type SoakHooks struct {
	URL string `json:"url"`
	// Attempts reached the receiver; Answered500 of them were refused on
	// purpose (retried by verifyd), Accepted answered 200.
	Attempts    int `json:"attempts"`
	Answered500 int `json:"answered_500"`
	Accepted    int `json:"accepted"`
	// Events are the distinct event ids accepted, by type; Retried the
	// accepted ones that needed more than one attempt; Duplicates
	// accepted again after a first acceptance.
	Events     map[string]int `json:"events"`
	Retried    int            `json:"retried"`
	Duplicates int            `json:"duplicates"`
	// JobsEnded is the soak's jobs that ended (each owes a
	// batch.completed or batch.failed event); Missing are those whose
	// event was not accepted when the soak gave up waiting.
	JobsEnded int      `json:"jobs_ended"`
	Missing   []string `json:"missing,omitempty"`
	// Verifyd is verifyd's own webhook counters at the end.
	Verifyd map[string]float64 `json:"verifyd_counters,omitempty"`
}

// soakCounter counts one kind of request.
type soakCounter struct {
	name              string
	sent, ok, notSent atomic.Int64
	hist              *Histogram
	logf              func(string, ...any)

	mu      sync.Mutex
	errs    map[string]int
	lastErr time.Time
}

func newSoakCounter(name string, logf func(string, ...any)) *soakCounter {
	return &soakCounter{name: name, errs: map[string]int{}, hist: NewHistogram(), logf: logf}
}

func (c *soakCounter) success(lat time.Duration) {
	c.ok.Add(1)
	c.hist.Record(lat)
}

func (c *soakCounter) fail(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[kind]++
	// The first failures of each kind are worth a line; then one a
	// minute at most.
	if c.errs[kind] <= 3 || time.Since(c.lastErr) > time.Minute {
		c.lastErr = time.Now()
		c.logf("soak: %s: %s (%d so far)", c.name, kind, c.errs[kind])
	}
}

func (c *soakCounter) result() SoakKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := SoakKind{Kind: c.name, Sent: c.sent.Load(), OK: c.ok.Load(), NotSent: c.notSent.Load(), Latency: percentiles(c.hist)}
	if len(c.errs) > 0 {
		k.Errors = maps.Clone(c.errs)
	}
	return k
}

// soakRun is one soak in progress.
type soakRun struct {
	r     *runner
	v     *Verifyd
	o     SoakOptions
	start time.Time
	end   time.Time

	fresh, cache, upload, poll, job, csv *soakCounter
	batchAddrs                           atomic.Int64

	seedMu sync.Mutex
	seeds  []string
	seeded map[string]bool

	jobMu sync.Mutex
	ended []string // jobs that ended

	hooks *hookReceiver
}

// soak runs the soak against r.vds[0] and fills r.res.Soak.
func (r *runner) soak(ctx context.Context) error {
	o := r.o.Soak
	v := r.vds[0]
	res := &SoakResult{
		Seconds: o.Duration.Seconds(), SampleSeconds: o.Sample.Seconds(), WarmupSeconds: o.WarmupTime().Seconds(),
		Tolerance: SoakTolerance,
	}
	res.Load.FreshPerSecond, res.Load.CachePerSecond = o.FreshRate, o.CacheRate
	res.Load.BatchSize, res.Load.BatchEverySec = min(o.BatchSize, len(r.pool)), o.BatchEvery.Seconds()
	res.Load.HookFail, res.Load.RetryWindowSec, res.Load.InFlight = o.HookFail, o.RetryWindow.Seconds(), soakInFlight
	for _, d := range o.HookRetry {
		res.Load.HookRetry = append(res.Load.HookRetry, d.Seconds())
	}
	r.res.Soak = res

	hooks, err := startHookReceiver(o.HookFail, r.o.World.Seed)
	if err != nil {
		return err
	}
	defer hooks.close()
	res.Webhooks.URL = hooks.url

	s := &soakRun{r: r, v: v, o: o, hooks: hooks, seeded: map[string]bool{}}
	s.fresh = newSoakCounter("fresh single", r.logf)
	s.cache = newSoakCounter("cache hit", r.logf)
	s.upload = newSoakCounter("batch upload", r.logf)
	s.poll = newSoakCounter("job status poll", r.logf)
	s.job = newSoakCounter("batch job", r.logf)
	s.csv = newSoakCounter("CSV download", r.logf)

	r.logf("soak: %s of fresh singles at %g/s, cache: true at %g/s, a batch of %d every %s (webhooks to %s, %.0f %% answered 500); a sample every %s, warm-up %s",
		o.Duration, o.FreshRate, o.CacheRate, res.Load.BatchSize, o.BatchEvery, hooks.url, 100*o.HookFail, o.Sample, o.WarmupTime())
	startV, _ := ReadProc(v.Proc.PID)
	startW, _ := ReadProc(r.world.Proc.PID)
	s.start = time.Now()
	s.end = s.start.Add(o.Duration)

	var wg sync.WaitGroup
	wg.Add(3)
	// The clients' connections stay open until the last sample is taken
	// (it is at the end, with the load's last requests).
	freshHC := NewClient(v.Addr, soakInFlight, r.o.RequestTimeout)
	cacheHC := NewClient(v.Addr, soakInFlight, r.o.RequestTimeout)
	go func() { defer wg.Done(); s.singles(ctx, o.FreshRate, freshHC, s.fresh, s.freshOne) }()
	go func() { defer wg.Done(); s.singles(ctx, o.CacheRate, cacheHC, s.cache, s.cacheOne) }()
	// Jobs uploaded before the end are waited for after it, up to the
	// batch timeout or the retry window and a minute.
	jctx, jcancel := context.WithDeadline(ctx, s.end.Add(max(r.o.BatchTimeout, o.RetryWindow+time.Minute)))
	defer jcancel()
	go func() { defer wg.Done(); s.batches(ctx, jctx) }()
	res.Samples = s.sample(ctx)
	ran := time.Since(s.start)
	endV, _ := ReadProc(v.Proc.PID)
	endW, _ := ReadProc(r.world.Proc.PID)
	r.logf("soak: load over after %s; waiting for the requests and jobs in flight", ran.Round(time.Second))
	wg.Wait()
	freshHC.CloseIdleConnections()
	cacheHC.CloseIdleConnections()
	res.RanSeconds = round3(min(ran, o.Duration).Seconds())
	res.Verifyd = procUsage(Usage{Wall: ran, CPU: endV.CPU - startV.CPU}, 0, false)
	res.World = procUsage(Usage{Wall: ran, CPU: endW.CPU - startW.CPU}, 0, false)

	// The events of the last jobs may still be on their retries.
	s.jobMu.Lock()
	ended := slices.Clone(s.ended)
	s.jobMu.Unlock()
	deadline := time.Now().Add(soakHookGrace)
	for len(hooks.missing(ended)) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	res.Webhooks = hooks.result(ended)
	if snap, err := scrapeSeries(v.Config.Metrics, func(name string) bool {
		return strings.HasPrefix(name, "verifyd_webhooks_") && (strings.HasSuffix(name, "_total") || strings.Contains(name, "_total{"))
	}); err == nil {
		res.Webhooks.Verifyd = snap
	}

	for _, c := range []*soakCounter{s.fresh, s.cache, s.upload, s.poll, s.job, s.csv} {
		res.Kinds = append(res.Kinds, c.result())
	}
	res.Metrics = soakFigures(res.Samples, o.WarmupTime(), o.Duration)
	res.DiskPerRecord = diskPerRecord(res.Samples, o.WarmupTime())
	res.Flat, res.Verdict, res.Grew = soakVerdict(res.Metrics, res.DiskPerRecord, o.Duration)
	if ctx.Err() != nil {
		res.Error = "interrupted after " + ran.Round(time.Second).String()
	}
	r.logf("soak: %s", res.Verdict)
	return nil
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// singles calls one with hc about rate times a second until the end, each
// call on its own goroutine, at most soakInFlight at once; a call due while that
// many run is not made, and counted. It returns once every call returned.
func (s *soakRun) singles(ctx context.Context, rate float64, hc *fasthttp.HostClient, c *soakCounter, one func(i int, hc *fasthttp.HostClient)) {
	if rate <= 0 {
		return
	}
	every := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, soakInFlight)
	var wg sync.WaitGroup
	next := s.start
	for i := 0; next.Before(s.end); i++ {
		if !sleepUntil(ctx, next) {
			break
		}
		select {
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				one(i, hc)
			}()
		default:
			c.notSent.Add(1)
		}
		next = next.Add(every)
		if late := time.Since(next); late > time.Second {
			// The harness was held up (a loaded machine): no burst to
			// catch up, the pace goes on from now.
			next = time.Now()
		}
	}
	wg.Wait()
}

// post sends one POST /v1/validate and hands its answer to check, which
// returns "" for a success or the failure's name.
func (s *soakRun) post(hc *fasthttp.HostClient, c *soakCounter, body []byte, check func(status int, body []byte) string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + hc.Addr + "/v1/validate")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.Set("Authorization", "Bearer "+s.v.Key)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	c.sent.Add(1)
	t0 := time.Now()
	err := hc.DoTimeout(req, resp, s.r.o.RequestTimeout)
	lat := time.Since(t0)
	if err != nil {
		c.fail("transport: " + errorKind(err))
		return
	}
	if f := check(resp.StatusCode(), resp.Body()); f != "" {
		c.fail(f)
		return
	}
	c.success(lat)
}

// freshOne validates the next address of the pool.
func (s *soakRun) freshOne(i int, hc *fasthttp.HostClient) {
	email := s.r.pool[i%len(s.r.pool)]
	s.post(hc, s.fresh, validateBodies([]string{email}, false)[0], func(status int, body []byte) string {
		if status != http.StatusOK {
			return httpFailure(status, body)
		}
		var rc receiptLite
		if err := json.Unmarshal(body, &rc); err != nil || rc.Status == "" {
			return "HTTP 200 without a receipt"
		}
		if rc.Status != "unknown" {
			s.addSeed(email)
		}
		return ""
	})
}

// cacheOne validates with cache: true an address the singles validated.
func (s *soakRun) cacheOne(i int, hc *fasthttp.HostClient) {
	email, ok := s.seed(i)
	if !ok {
		return // none validated yet
	}
	s.post(hc, s.cache, validateBodies([]string{email}, true)[0], func(status int, body []byte) string {
		if status != http.StatusOK {
			return httpFailure(status, body)
		}
		var rc receiptLite
		if err := json.Unmarshal(body, &rc); err != nil || rc.Status == "" {
			return "HTTP 200 without a receipt"
		}
		if !rc.Cached {
			return `answered without "cached": true`
		}
		return ""
	})
}

func (s *soakRun) addSeed(email string) {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	if len(s.seeds) < soakSeeds && !s.seeded[email] {
		s.seeded[email] = true
		s.seeds = append(s.seeds, email)
	}
}

func (s *soakRun) seed(i int) (string, bool) {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	if len(s.seeds) == 0 {
		return "", false
	}
	return s.seeds[i%len(s.seeds)], true
}

// batches uploads a batch every BatchEvery until the end, and waits for
// each (jctx bounds the wait past the end).
func (s *soakRun) batches(ctx, jctx context.Context) {
	n := min(s.o.BatchSize, len(s.r.pool))
	if n == 0 || s.o.BatchEvery <= 0 {
		return
	}
	var wg sync.WaitGroup
	for k := 0; ; k++ {
		at := s.start.Add(soakBatchOffset + time.Duration(k)*s.o.BatchEvery)
		if !at.Before(s.end) || !sleepUntil(ctx, at) {
			break
		}
		// From the middle of the pool on, the singles from its start:
		// the two meet only once a long soak wrapped around.
		emails := make([]string, n)
		for j := range emails {
			emails[j] = s.r.pool[(len(s.r.pool)/2+k*n+j)%len(s.r.pool)]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.batch(jctx, k, emails)
		}()
	}
	wg.Wait()
}

// batch uploads one job with the receiver's webhookUrl, polls it to its
// end, and downloads and checks its CSV.
func (s *soakRun) batch(ctx context.Context, k int, emails []string) {
	body, _ := json.Marshal(map[string]any{"emails": emails, "listName": "soak-" + strconv.Itoa(k), "webhookUrl": s.hooks.url})
	api := newBatchAPI(s.v, s.v.Key)
	s.upload.sent.Add(1)
	t0 := time.Now()
	status, data, err := api.do(ctx, "POST", "/v1/batch", body)
	switch {
	case err != nil:
		s.upload.fail("POST /v1/batch: " + errorKind(err))
		return
	case status != http.StatusAccepted:
		s.upload.fail(httpFailure(status, data))
		return
	}
	var j jobView
	if err := json.Unmarshal(data, &j); err != nil || j.JobID == "" {
		s.upload.fail("202 without a job_id")
		return
	}
	s.upload.success(time.Since(t0))

	s.job.sent.Add(1)
	for {
		if !sleepUntil(ctx, time.Now().Add(soakJobPoll)) {
			s.job.fail("not ended when the soak stopped waiting")
			return
		}
		s.poll.sent.Add(1)
		p0 := time.Now()
		status, data, err := api.do(ctx, "GET", "/v1/jobs/"+j.JobID, nil)
		if err != nil {
			if ctx.Err() != nil {
				s.job.fail("not ended when the soak stopped waiting")
				return
			}
			s.poll.fail(errorKind(err))
			continue
		}
		if status != http.StatusOK {
			s.poll.fail(httpFailure(status, data))
			continue
		}
		s.poll.success(time.Since(p0))
		if err := json.Unmarshal(data, &j); err != nil {
			s.poll.fail("unreadable job")
			continue
		}
		if j.Status == "completed" || j.Status == "failed" {
			break
		}
	}
	s.jobMu.Lock()
	s.ended = append(s.ended, j.JobID)
	s.jobMu.Unlock()
	if j.Status == "failed" {
		s.job.fail(fmt.Sprintf("failed (%d of %d processed)", j.Progress.Processed, len(emails)))
		return
	}
	s.job.success(time.Since(t0))
	s.batchAddrs.Add(int64(j.Progress.Processed))

	rb := &runningBatch{api: api, res: &BatchResult{Size: len(emails), JobID: j.JobID}, start: t0}
	s.csv.sent.Add(1)
	c0 := time.Now()
	rb.download(ctx, s.r.world)
	if rb.res.Error != "" {
		s.csv.fail(rb.res.Error)
		return
	}
	s.csv.success(time.Since(c0))
}

// sample reads verifyd every Sample from the start to the end, the end
// included.
func (s *soakRun) sample(ctx context.Context) []SoakSample {
	var out []SoakSample
	every := s.o.Sample
	for k := 0; ; k++ {
		at := s.start.Add(time.Duration(k) * every)
		if at.After(s.end) || !sleepUntil(ctx, at) {
			break
		}
		if !s.v.Proc.Running() {
			s.r.logf("soak: verifyd exited; its stderr ends:\n%s", s.v.Proc.Tail(15))
			break
		}
		smp := s.read(time.Since(s.start))
		out = append(out, smp)
		if k%max(1, int(time.Minute/every)) == 0 {
			s.r.logf("soak %s/%s: RSS %.0f MB, %.0f goroutines, %.0f open files, Pebble %.1f MB; %s fresh, %s cache hits, %s batch addresses",
				time.Duration(smp.T*float64(time.Second)).Round(time.Second), s.o.Duration, smp.RSSMB, smp.Goroutines, smp.OpenFiles, smp.PebbleDiskMB,
				itoa(int(smp.Fresh)), itoa(int(smp.Cache)), itoa(int(smp.BatchAddresses)))
		}
	}
	return out
}

// read takes one sample at t since the start.
func (s *soakRun) read(t time.Duration) SoakSample {
	pid := s.v.Proc.PID
	smp := SoakSample{T: round3(t.Seconds()), Fresh: s.fresh.ok.Load(), Cache: s.cache.ok.Load(), BatchAddresses: s.batchAddrs.Load()}
	if p, err := ReadProc(pid); err == nil {
		smp.RSSMB, smp.CPUSeconds = round3(float64(p.RSS)/(1<<20)), round3(p.CPU.Seconds())
	} else {
		smp.Missing = append(smp.Missing, "rss")
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		smp.OpenFiles = float64(len(fds))
	} else {
		smp.Missing = append(smp.Missing, "open_files")
	}
	db := filepath.Join(s.v.Config.DataDir, "db")
	if all, inDB, err := dirBytes(s.v.Config.DataDir, db); err == nil {
		smp.DataDirMB, smp.PebbleDiskMB = round3(float64(all)/(1<<20)), round3(float64(inDB)/(1<<20))
	} else {
		smp.Missing = append(smp.Missing, "pebble_disk")
	}
	want := map[string]bool{
		"go_goroutines": true, "go_memstats_heap_inuse_bytes": true, "go_memstats_sys_bytes": true, "go_memstats_heap_released_bytes": true,
		"verifyd_storage_pebble_disk_usage_bytes": true, "verifyd_storage_cache_memo_bytes": true,
		"verifyd_resolver_cache_entries": true,
	}
	m, err := scrapeSeries(s.v.Config.Metrics, func(name string) bool { return want[name] })
	if err != nil {
		smp.Missing = append(smp.Missing, "metrics")
	}
	if g, ok := m["go_goroutines"]; ok {
		smp.Goroutines = g
	} else {
		smp.Missing = append(smp.Missing, "goroutines")
	}
	smp.HeapInuseMB = round3(m["go_memstats_heap_inuse_bytes"] / (1 << 20))
	smp.GoHeldMB = round3((m["go_memstats_sys_bytes"] - m["go_memstats_heap_released_bytes"]) / (1 << 20))
	smp.PebbleMetricMB = round3(m["verifyd_storage_pebble_disk_usage_bytes"] / (1 << 20))
	smp.MemoMB = round3(m["verifyd_storage_cache_memo_bytes"] / (1 << 20))
	smp.ResolverEntries = m["verifyd_resolver_cache_entries"]
	return smp
}

// dirBytes sums the sizes of the files under dir (du -b), and of those
// under sub, a directory inside it.
func dirBytes(dir, sub string) (all, inSub int64, err error) {
	sub += string(filepath.Separator)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file compacted away meanwhile
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				all += fi.Size()
				if strings.HasPrefix(path, sub) {
					inSub += fi.Size()
				}
			}
		}
		return nil
	})
	return all, inSub, err
}

// scrapeSeries reads verifyd's /metrics at addr and keeps the series
// (name with its labels) keep accepts.
func scrapeSeries(addr string, keep func(string) bool) (map[string]float64, error) {
	if addr == "" {
		return nil, errors.New("no metrics listener")
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return parseSeries(resp.Body, keep)
}

func parseSeries(r io.Reader, keep func(string) bool) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !keep(line[:i]) {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// soakFigures computes each metric's figures over the samples taken at or
// after warm; length is the soak's, for the growth.
func soakFigures(samples []SoakSample, warm, length time.Duration) []SoakFigures {
	var out []SoakFigures
	for _, m := range soakMetrics {
		f := SoakFigures{Key: m.key, Name: m.name, Unit: m.unit}
		var xs, ys []float64
		for _, s := range samples {
			v, ok := m.get(s)
			if !ok || s.T < warm.Seconds() {
				continue
			}
			xs = append(xs, s.T/3600)
			ys = append(ys, v)
		}
		f.Samples = len(ys)
		if len(ys) == 0 {
			out = append(out, f)
			continue
		}
		f.First, f.Last = ys[0], ys[len(ys)-1]
		sorted := slices.Clone(ys)
		slices.Sort(sorted)
		f.Median, f.Max = median(sorted), sorted[len(sorted)-1]
		f.SlopePerHour = leastSquaresSlope(xs, ys)
		f.Growth = f.SlopePerHour * length.Hours()
		f.Tolerance = math.Max(SoakTolerance*f.Median, m.floor)
		f.Flat = len(ys) >= 3 && f.Growth <= f.Tolerance
		f.First, f.Median, f.Max, f.Last = round3(f.First), round3(f.Median), round3(f.Max), round3(f.Last)
		f.SlopePerHour, f.Growth, f.Tolerance = round3(f.SlopePerHour), round3(f.Growth), round3(f.Tolerance)
		out = append(out, f)
	}
	return out
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// leastSquaresSlope is the slope of the least-squares line through
// (xs, ys); 0 for fewer than two distinct xs.
func leastSquaresSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// diskPerRecord is Pebble's growth from the first sample after warm to
// the last, over the records stored meanwhile; 0 when none were.
func diskPerRecord(samples []SoakSample, warm time.Duration) float64 {
	var first, last *SoakSample
	for i := range samples {
		s := &samples[i]
		if s.T < warm.Seconds() || s.PebbleDiskMB <= 0 {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil {
		return 0
	}
	records := (last.Fresh + last.Cache + last.BatchAddresses) - (first.Fresh + first.Cache + first.BatchAddresses)
	if records <= 0 {
		return 0
	}
	return round3((last.PebbleDiskMB - first.PebbleDiskMB) * (1 << 20) / float64(records))
}

// soakVerdict says whether every metric stayed flat after the warm-up,
// and names those that grew.
func soakVerdict(ms []SoakFigures, perRecord float64, length time.Duration) (bool, string, []string) {
	var grew, parts, unjudged []string
	for _, f := range ms {
		if f.Samples < 3 {
			unjudged = append(unjudged, f.Name)
			continue
		}
		if f.Flat {
			continue
		}
		grew = append(grew, f.Key)
		part := fmt.Sprintf("%s (+%s%s over %s against a tolerance of %s%s)", f.Name, fmtNum(f.Growth), unitSuffix(f.Unit), fmtLength(length), fmtNum(f.Tolerance), unitSuffix(f.Unit))
		if f.Key == "pebble_disk" && perRecord > 0 {
			part += fmt.Sprintf(", %s bytes a record stored", fmtNum(perRecord))
		}
		parts = append(parts, part)
	}
	switch {
	case len(unjudged) > 0:
		return false, fmt.Sprintf("not judged: fewer than 3 samples after the warm-up of %s", strings.Join(unjudged, ", ")), nil
	case len(grew) == 0:
		return true, "flat after warm-up", nil
	}
	return false, "grew: " + strings.Join(parts, "; "), grew
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// fmtLength writes 30m0s as "30 min".
func fmtLength(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return d.String()
}

// hookReceiver is the webhook receiver of the soak: it answers 500 to a
// fraction of the attempts at random, 200 to the others, and remembers
// the events it accepted.
type hookReceiver struct {
	url  string
	srv  *http.Server
	fail float64

	mu          sync.Mutex
	rng         *rand.Rand
	attempts    int
	answered500 int
	accepted    int
	events      map[string]string // event id → type
	jobs        map[string]bool   // jobs whose batch.completed or batch.failed was accepted
	retried     int
	duplicates  int
}

func startHookReceiver(fail float64, seed uint64) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{
		url: "http://" + ln.Addr().String() + "/hooks/verifybench", fail: fail,
		rng:    rand.New(rand.NewPCG(seed, 0x736f616b)),
		events: map[string]string{}, jobs: map[string]bool{},
	}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	return h, nil
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	id, typ := req.Header.Get("X-SVC-Event-Id"), req.Header.Get("X-SVC-Event")
	attempt, _ := strconv.Atoi(req.Header.Get("X-SVC-Delivery-Attempt"))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if h.rng.Float64() < h.fail {
		h.answered500++
		http.Error(w, "verifybench: refused on purpose", http.StatusInternalServerError)
		return
	}
	h.accepted++
	if _, seen := h.events[id]; seen {
		h.duplicates++
	} else {
		h.events[id] = typ
		if attempt > 1 {
			h.retried++
		}
		var ev struct {
			JobID string `json:"job_id"`
		}
		if (typ == "batch.completed" || typ == "batch.failed") && json.Unmarshal(body, &ev) == nil {
			h.jobs[ev.JobID] = true
		}
	}
	w.WriteHeader(http.StatusOK)
}

// missing returns the jobs of ended whose event was not accepted.
func (h *hookReceiver) missing(ended []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, j := range ended {
		if !h.jobs[j] {
			out = append(out, j)
		}
	}
	return out
}

func (h *hookReceiver) result(ended []string) SoakHooks {
	miss := h.missing(ended)
	h.mu.Lock()
	defer h.mu.Unlock()
	r := SoakHooks{URL: h.url, Attempts: h.attempts, Answered500: h.answered500, Accepted: h.accepted,
		Events: map[string]int{}, Retried: h.retried, Duplicates: h.duplicates, JobsEnded: len(ended), Missing: miss}
	for _, typ := range h.events {
		r.Events[typ]++
	}
	return r
}

func (h *hookReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
}
