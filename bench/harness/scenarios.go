package harness

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// receiptLite is the part of a receipt (spec §2.4) the harness reads.
type receiptLite struct {
	Status    string `json:"status"`
	LatencyMs int64  `json:"latency_ms"`
	Cached    bool   `json:"cached"`
	Checks    struct {
		Reason string `json:"reason"`
	} `json:"checks"`
}

// measured runs l against v while metering verifyd, the world and the
// harness itself, and returns the level. Inside another meter's interval
// (nested), verifyd's peak RSS comes from samples only, leaving the outer
// meter's VmHWM alone.
func (r *runner) measured(ctx context.Context, v *Verifyd, l Load, nested bool) (Level, LoadStats) {
	mv := StartMeter(v.Proc.PID)
	if nested {
		mv = StartSampledMeter(v.Proc.PID)
	}
	mw := StartMeter(r.world.Proc.PID)
	mc := StartMeter(os.Getpid())
	prof := r.startProfile(v, l)
	sc := startSyscalls(v.Proc.PID)
	var before metricsSnapshot
	if v.Config.Metrics != "" {
		before, _ = scrapeMetrics(v.Config.Metrics)
	}
	st := l.Run(ctx)
	r.doneLoading(v)
	uv, uw, uc := mv.Stop(), mw.Stop(), mc.Stop()
	calls, callsOK := sc.stop()
	prof()
	var after metricsSnapshot
	if before != nil {
		after, _ = scrapeMetrics(v.Config.Metrics)
	}
	lv := Level{
		Concurrency:       l.Concurrency,
		Sent:              st.Sent,
		OK:                st.OK,
		Errors:            st.Errors,
		Throughput:        round3(st.Throughput()),
		WindowSeconds:     round3(st.Window.Seconds()),
		OverallThroughput: round3(st.OverallThroughput()),
		TotalSeconds:      round3(st.Total.Seconds()),
		Latency:           percentiles(st.Hist),
		Verifyd:           procUsage(uv, st.OK, true),
		World:             procUsage(uw, 0, false),
		Client:            procUsage(uc, 0, false),
	}
	if len(lv.Errors) == 0 {
		lv.Errors = nil
	}
	if callsOK && st.OK > 0 {
		lv.SyscallsPerRequest = round3(calls / float64(st.OK))
	}
	if l.Path == "/v1/validate" {
		lv.Phases = phaseTimes(before, after, st.OK)
	}
	return lv, st
}

// validateBodies returns the JSON bodies of POST /v1/validate.
func validateBodies(emails []string, cache bool) [][]byte {
	out := make([][]byte, len(emails))
	for i, e := range emails {
		q, _ := json.Marshal(e)
		if cache {
			out[i] = []byte(`{"email":` + string(q) + `,"cache":true}`)
		} else {
			out[i] = []byte(`{"email":` + string(q) + `}`)
		}
	}
	return out
}

// freshLoad validates emails once each at concurrency c and records every
// receipt's outcome.
func (r *runner) freshLoad(ctx context.Context, v *Verifyd, scenario string, c int, emails []string, d time.Duration, nested bool) (Level, []outcome) {
	bodies := validateBodies(emails, false)
	outs := make([]outcome, len(emails))
	client := NewClient(v.Addr, c, r.o.RequestTimeout)
	defer client.CloseIdleConnections()
	l := Load{
		Name:   scenario,
		Client: client, Path: "/v1/validate", Key: v.Key,
		Concurrency: c, Count: len(emails), Duration: d, Timeout: r.o.RequestTimeout,
		Body: func(i int) []byte { return bodies[i] },
		Check: func(i, status int, body []byte, lat time.Duration) string {
			if status != http.StatusOK {
				return httpFailure(status, body)
			}
			var rc receiptLite
			if err := json.Unmarshal(body, &rc); err != nil || rc.Status == "" {
				return "HTTP 200 without a receipt"
			}
			outs[i] = outcome{Email: emails[i], Status: rc.Status, Reason: rc.Checks.Reason,
				LatencyMs: rc.LatencyMs, Client: lat, OK: true, Bytes: len(body)}
			return ""
		},
		Timing: func(i int, h []byte) {
			if d, ok := EngineTiming(h); ok {
				outs[i].Engine, outs[i].HasEngine = d, true
			}
		},
	}
	lv, _ := r.measured(ctx, v, l, nested)
	ovh, prompt := NewHistogram(), NewHistogram()
	var got []outcome
	timed := 0
	for _, o := range outs {
		if !o.OK {
			continue
		}
		got = append(got, o)
		engine := time.Duration(o.LatencyMs) * time.Millisecond
		if o.HasEngine {
			engine = o.Engine
			timed++
		}
		ovh.Record(max(0, o.Client-engine))
		if !r.world.Slow(o.Email) {
			prompt.Record(o.Client)
		}
	}
	po, pp := percentiles(ovh), percentiles(prompt)
	lv.Overhead, lv.Prompt = &po, &pp
	switch timed {
	case len(got):
		lv.OverheadFrom = "server-timing"
	case 0:
		lv.OverheadFrom = "latency_ms"
	default:
		lv.OverheadFrom = "mixed"
	}
	return lv, got
}

// httpFailure names a non-200 answer, with the error code of the envelope.
func httpFailure(status int, body []byte) string {
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		msg := env.Error.Message
		if strings.HasPrefix(msg, "insufficient credits") {
			msg = "insufficient credits"
		} else if len(msg) > 40 {
			msg = msg[:40] + "…"
		}
		return fmt.Sprintf("HTTP %d %s: %s", status, env.Error.Code, msg)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// pause lets a verifyd settle between loads (background work of the last
// load: auth lookups, closing sessions).
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(500 * time.Millisecond):
	}
}

// scenarioFresh is scenario 1: single fresh validations at increasing
// concurrency, each address once per level.
func (r *runner) scenarioFresh(ctx context.Context) error {
	for _, run := range r.runs {
		run.Scenarios.Fresh = &FreshResult{}
	}
	for j, c := range r.o.FreshLevels {
		// At least five requests per worker, so the level is more than
		// its ramp.
		emails := r.take(min(max(r.o.FreshCount, 5*c), len(r.pool)))
		for _, i := range r.order(j) {
			if ctx.Err() != nil {
				return nil
			}
			v, run := r.vds[i], r.runs[i]
			lv, outs := r.freshLoad(ctx, v, "fresh", c, emails, r.o.FreshDuration, false)
			run.Scenarios.Fresh.Levels = append(run.Scenarios.Fresh.Levels, lv)
			r.outcomes[run.Label] = append(r.outcomes[run.Label], outs...)
			r.logf("fresh %s c=%d: %d ok of %d, %.0f/s sustained, p50 %.1f ms, p99 %.1f ms (prompt addresses %.1f ms), API overhead p99 %.1f ms, verifyd %.2f ms CPU/probe (%.2f cores, world %.2f, client %.2f)%s",
				v.Label, c, lv.OK, lv.Sent, lv.Throughput, lv.Latency.P50, lv.Latency.P99, lv.Prompt.P99, lv.Overhead.P99,
				lv.Verifyd.CPUPerRequestMs, lv.Verifyd.Cores, lv.World.Cores, lv.Client.Cores, errSummary(lv.Errors))
			pause(ctx)
		}
		if j == 0 && ctx.Err() == nil {
			// Back to back, small (the floor of a synced write at this
			// concurrency), then at the API's pace and size (what the
			// level's charges met on this disk).
			ps, err := measurePebbleSync(filepath.Join(r.work, "pebble-sync"), c, 2000, 200, 0)
			if err != nil {
				r.logf("bare Pebble synced writes: %v", err)
				continue
			}
			r.logf("bare Pebble synced writes at c=%d: p50 %.2f ms, p99 %.2f ms", c, ps.Latency.P50, ps.Latency.P99)
			size, think := r.chargeShape(r.runs[0].Label, len(emails))
			paced, err := measurePebbleSync(filepath.Join(r.work, "pebble-sync"), c, 20*c, size, think)
			if err != nil {
				r.logf("bare Pebble synced writes at the API's pace: %v", err)
			} else {
				ps.Paced = &PacedSync{Writes: paced.Writes, Bytes: size, ThinkMs: round3(think.Seconds() * 1000), Latency: paced.Latency}
				r.logf("bare Pebble synced writes at c=%d of %d bytes, %.0f ms apart: p50 %.2f ms, p99 %.2f ms", c, size, think.Seconds()*1000, paced.Latency.P50, paced.Latency.P99)
			}
			for _, run := range r.runs {
				run.Scenarios.Fresh.PebbleSync = &ps
			}
		}
	}
	return nil
}

// chargeShape is what one charge of the last n receipts of label wrote
// and how far apart a worker's charges came: the median receipt's size
// plus its history row and ledger entry (storage.Charge writes the result
// with its receipt once, and small rows beside it), and the mean engine
// time.
func (r *runner) chargeShape(label string, n int) (size int, think time.Duration) {
	outs := r.outcomes[label]
	outs = outs[max(0, len(outs)-n):]
	var sizes []int
	var engine time.Duration
	for _, o := range outs {
		sizes = append(sizes, o.Bytes)
		engine += o.Engine
	}
	if len(sizes) == 0 {
		return 200, 0
	}
	slices.Sort(sizes)
	return sizes[len(sizes)/2] + 300, engine / time.Duration(len(sizes))
}

func errSummary(errs map[string]int) string {
	if len(errs) == 0 {
		return ""
	}
	var parts []string
	for k, n := range errs {
		parts = append(parts, fmt.Sprintf("%d× %s", n, k))
	}
	return "; failures: " + strings.Join(parts, ", ")
}

// scenarioCache is scenario 2: validations with cache:true of addresses
// the account probed before, so each is answered from its own cache.
func (r *runner) scenarioCache(ctx context.Context) error {
	const want = 2000
	seeds := map[string][]string{}
	for k, run := range r.runs {
		v := r.vds[k]
		var s []string
		for _, o := range r.outcomes[run.Label] {
			// verifyd does not cache unknown verdicts.
			if o.Status != "unknown" && len(s) < want {
				s = append(s, o.Email)
			}
		}
		if len(s) < 100 {
			r.logf("cache %s: seeding the cache with fresh validations", v.Label)
			_, outs := r.freshLoad(ctx, v, "cache-seed", 64, r.take(500), 30*time.Second, false)
			s = s[:0]
			for _, o := range outs {
				if o.Status != "unknown" {
					s = append(s, o.Email)
				}
			}
		}
		run.Scenarios.Cache = &CacheResult{Seeded: len(s)}
		seeds[run.Label] = s
		if len(s) == 0 {
			run.Scenarios.Cache.Skipped = "no address with a cacheable result"
		}
	}
	for j, c := range r.o.CacheLevels {
		for _, i := range r.order(j) {
			v, run := r.vds[i], r.runs[i]
			s := seeds[run.Label]
			if ctx.Err() != nil || len(s) == 0 {
				continue
			}
			lv := r.cacheLoad(ctx, v, "cache", c, s, false)
			run.Scenarios.Cache.Levels = append(run.Scenarios.Cache.Levels, lv)
			r.logf("cache %s c=%d: %d ok, %.0f/s sustained, p50 %.2f ms, p99 %.2f ms, verifyd %.3f ms CPU/request (%.2f cores)%s",
				v.Label, c, lv.OK, lv.Throughput, lv.Latency.P50, lv.Latency.P99, lv.Verifyd.CPUPerRequestMs, lv.Verifyd.Cores, errSummary(lv.Errors))
			pause(ctx)
		}
	}
	return nil
}

// batchAPI is the part of the API a batch uses, over net/http (few
// requests, large bodies), with one account's key.
type batchAPI struct {
	v   *Verifyd
	key string
	hc  *http.Client
}

func newBatchAPI(v *Verifyd, key string) *batchAPI {
	return &batchAPI{v: v, key: key, hc: &http.Client{Timeout: 5 * time.Minute}}
}

func (b *batchAPI) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.v.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// jobView is the batch job resource (spec §2.8) and the 202 answer (§2.7).
type jobView struct {
	JobID    string `json:"job_id"`
	Status   string `json:"status"`
	Progress struct {
		Processed int `json:"processed"`
		Total     int `json:"total"`
	} `json:"progress"`
	ResultsURL *string `json:"results_url"`
}

// runningBatch is an uploaded batch being waited for.
type runningBatch struct {
	api   *batchAPI
	res   *BatchResult
	start time.Time
	// bulk, when set, is closed once the job reads 99 % processed (or
	// ends): scenario 4's singles run until then.
	bulk     chan struct{}
	bulkOnce sync.Once
}

// bulkDone closes rb.bulk, once.
func (rb *runningBatch) bulkDone() {
	if rb.bulk != nil {
		rb.bulkOnce.Do(func() { close(rb.bulk) })
	}
}

// uploadBatch sends POST /v1/batch as the demo account; on a 404 the
// result is marked skipped.
func (r *runner) uploadBatch(ctx context.Context, v *Verifyd, emails []string) (*runningBatch, error) {
	return r.uploadBatchAs(ctx, v, v.Key, emails)
}

// uploadBatchAs is uploadBatch with the key of another account.
func (r *runner) uploadBatchAs(ctx context.Context, v *Verifyd, key string, emails []string) (*runningBatch, error) {
	res := &BatchResult{Size: len(emails)}
	body, err := json.Marshal(map[string]any{"emails": emails, "listName": "verifybench"})
	if err != nil {
		return nil, err
	}
	api := newBatchAPI(v, key)
	start := time.Now()
	status, data, err := api.do(ctx, "POST", "/v1/batch", body)
	res.UploadSeconds = round3(time.Since(start).Seconds())
	rb := &runningBatch{api: api, res: res, start: start}
	switch {
	case err != nil:
		res.Error = "POST /v1/batch: " + err.Error()
	case status == http.StatusNotFound:
		res.Skipped = "endpoint not available (404): this verifyd has no POST /v1/batch"
	case status != http.StatusAccepted:
		res.Error = fmt.Sprintf("POST /v1/batch: %s", httpFailure(status, data))
	default:
		var j jobView
		if err := json.Unmarshal(data, &j); err != nil || j.JobID == "" {
			res.Error = fmt.Sprintf("POST /v1/batch: 202 without a job_id: %.200s", data)
		}
		res.JobID = j.JobID
	}
	return rb, nil
}

// wait polls GET /v1/jobs/{id} until the job ends or timeout: every
// 100 ms, or every 10 ms for a job of at most 1,000 addresses, whose
// whole life may be a fraction of a second.
func (rb *runningBatch) wait(ctx context.Context, timeout time.Duration) {
	res := rb.res
	deadline := time.Now().Add(timeout)
	every := 100 * time.Millisecond
	if res.Size <= 1000 {
		every = 10 * time.Millisecond
	}
	lastSample := -1.0
	defer rb.bulkDone()
	for {
		status, data, err := rb.api.do(ctx, "GET", "/v1/jobs/"+res.JobID, nil)
		now := time.Since(rb.start).Seconds()
		if err != nil {
			if ctx.Err() != nil {
				res.Error = "interrupted while waiting for the job"
				return
			}
			res.Error = "GET /v1/jobs/{id}: " + err.Error()
			return
		}
		if status != http.StatusOK {
			res.Error = "GET /v1/jobs/{id}: " + httpFailure(status, data)
			return
		}
		var j jobView
		if err := json.Unmarshal(data, &j); err != nil {
			res.Error = fmt.Sprintf("GET /v1/jobs/{id}: unreadable: %.200s", data)
			return
		}
		res.Status, res.Processed = j.Status, j.Progress.Processed
		if res.Seconds99 == 0 && res.Size > 0 && 100*j.Progress.Processed >= 99*res.Size {
			res.Seconds99 = round3(now)
			rb.bulkDone()
		}
		if now-lastSample >= 1 || j.Status == "completed" || j.Status == "failed" {
			res.Progress = append(res.Progress, [2]float64{round3(now), float64(j.Progress.Processed)})
			lastSample = now
		}
		switch j.Status {
		case "completed":
			res.CompletionSeconds = round3(now)
			if now > 0 {
				res.Rate = round3(float64(res.Size) / now)
			}
			return
		case "failed":
			res.Error = fmt.Sprintf("the job failed after %.1f s (%d of %d processed)", now, j.Progress.Processed, res.Size)
			return
		}
		if time.Now().After(deadline) {
			res.Error = fmt.Sprintf("not completed within %s: %s, %d of %d processed", timeout, j.Status, j.Progress.Processed, res.Size)
			return
		}
		select {
		case <-ctx.Done():
			res.Error = "interrupted while waiting for the job"
			return
		case <-time.After(every):
		}
	}
}

// csvHeader is spec §4.4's column order.
var csvHeader = []string{"email", "status", "score", "is_disposable", "is_role_based", "is_catch_all", "is_free_provider", "mx_host", "latency_ms", "probed_at"}

// download fetches the CSV, checks its header and compares each row's
// status with the world's expectation.
func (rb *runningBatch) download(ctx context.Context, w *World) {
	res := rb.res
	start := time.Now()
	status, data, err := rb.api.do(ctx, "GET", "/v1/jobs/"+res.JobID+"/results.csv", nil)
	res.DownloadSeconds = round3(time.Since(start).Seconds())
	switch {
	case err != nil:
		res.Error = "GET results.csv: " + err.Error()
		return
	case status != http.StatusOK:
		res.Error = "GET results.csv: " + httpFailure(status, data)
		return
	}
	res.CSVBytes = len(data)
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = len(csvHeader)
	head, err := cr.Read()
	if err != nil {
		res.Error = "results.csv: " + err.Error()
		return
	}
	if strings.Join(head, ",") != strings.Join(csvHeader, ",") {
		res.Error = fmt.Sprintf("results.csv: header %q, want %q", head, csvHeader)
		return
	}
	conf := NewConfusion()
	res.RowStatuses = map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Error = "results.csv: " + err.Error()
			return
		}
		res.Rows++
		res.RowStatuses[rec[1]]++
		if e, ok := w.Expect[lower(rec[0])]; ok {
			conf.AddExpected(e, rec[1], "", false)
		}
	}
	if res.Rows != res.Size {
		res.Error = fmt.Sprintf("results.csv has %d rows for %d addresses", res.Rows, res.Size)
	}
	res.confusion = conf
}

// scenarioBatch is scenario 3: one large batch, upload to CSV.
func (r *runner) scenarioBatch(ctx context.Context) error {
	n := min(r.o.BatchSize, len(r.pool))
	emails := make([]string, n)
	copy(emails, r.pool) // the shuffled pool: domains interleaved as in a real list
	for _, i := range r.restedFirst() {
		v, run := r.vds[i], r.runs[i]
		if ctx.Err() != nil {
			return nil
		}
		mv, mw := StartMeter(v.Proc.PID), StartMeter(r.world.Proc.PID)
		// The profile covers the upload and the bulk (scenario 3 of
		// bench/RESULTS.md: 99 % processed within about 6 s).
		prof := r.startProfileAs(v, v.Label+"-batch", 6*time.Second)
		rb, err := r.uploadBatch(ctx, v, emails)
		if err != nil {
			prof()
			return err
		}
		res := rb.res
		if res.Skipped == "" && res.Error == "" {
			r.logf("batch %s: %d addresses uploaded in %.2f s (job %s)", v.Label, n, res.UploadSeconds, res.JobID)
			rb.wait(ctx, r.o.BatchTimeout)
			if res.Error == "" {
				rb.download(ctx, r.world)
			}
		}
		r.doneLoading(v)
		uv, uw := mv.Stop(), mw.Stop()
		prof()
		res.Verifyd = procUsage(uv, res.Processed, true)
		res.World = procUsage(uw, 0, false)
		run.Scenarios.Batch = res
		switch {
		case res.Skipped != "":
			r.logf("batch %s: skipped: %s", v.Label, res.Skipped)
		case res.Error != "":
			r.logf("batch %s: %s", v.Label, res.Error)
		default:
			r.logf("batch %s: %d addresses: upload %.2f s, 99 %% processed at %.1f s, completed in %.1f s (%.0f/s), CSV %.2f s; verifyd peak RSS %.0f MB",
				v.Label, n, res.UploadSeconds, res.Seconds99, res.CompletionSeconds, res.Rate, res.DownloadSeconds, res.Verifyd.PeakRSSMB)
		}
		pause(ctx)
	}
	return nil
}

// scenarioMixed is scenario 4: a batch runs while MixedSingles single
// fresh validations are sent at MixedConcurrency, the same number on each
// side of a comparison (equal work, so the two p99s compare); their p99
// is compared with scenario 1's at the same concurrency.
func (r *runner) scenarioMixed(ctx context.Context) error {
	n := min(r.o.MixedBatchSize, len(r.pool))
	emails := make([]string, n)
	// The other end of the pool from scenario 3's batch where it can be.
	copy(emails, r.pool[len(r.pool)-n:])
	// The batch alone, to compare the batch beside the singles with: as
	// many addresses, the ones before them in the pool (so neither is
	// served by the other's cache of domain facts more than by scenario
	// 3's), when the pool has them.
	var alone []string
	if 2*n <= len(r.pool) {
		alone = r.pool[len(r.pool)-2*n : len(r.pool)-n]
	}
	// Singles of addresses the world answers promptly: their p99 is then
	// verifyd's, not a tarpit's.
	var singles []string
	for range len(r.pool) {
		if e := r.take(1)[0]; !r.world.Slow(e) {
			singles = append(singles, e)
			if len(singles) == r.o.FreshCount {
				break
			}
		}
	}
	// MixedSingles of them, asked again in turn when there are fewer
	// (each a fresh validation, with its own charge and receipt).
	var cycled []string
	for len(singles) > 0 && len(cycled) < r.o.MixedSingles {
		cycled = append(cycled, singles[:min(len(singles), r.o.MixedSingles-len(cycled))]...)
	}
	for _, i := range r.restedFirst() {
		v, run := r.vds[i], r.runs[i]
		if ctx.Err() != nil {
			return nil
		}
		mr := &MixedResult{}
		run.Scenarios.Mixed = mr
		if alone != nil {
			mr.Alone = r.batchAlone(ctx, v, alone)
			pause(ctx)
		}
		mv, mw := StartMeter(v.Proc.PID), StartMeter(r.world.Proc.PID)
		rb, err := r.uploadBatch(ctx, v, emails)
		if err != nil {
			return err
		}
		mr.Batch = rb.res
		if rb.res.Skipped != "" {
			mv.Stop()
			mw.Stop()
			mr.Skipped = rb.res.Skipped
			r.logf("mixed %s: skipped: %s", v.Label, mr.Skipped)
			continue
		}
		if rb.res.Error != "" {
			mv.Stop()
			mw.Stop()
			mr.Error = rb.res.Error
			r.logf("mixed %s: %s", v.Label, mr.Error)
			continue
		}
		// The singles, all of them (a comparison's two sides do the same
		// work), however long the batch's bulk (99 % processed: what is
		// left is the world's tarpits and greylisting) takes; then the
		// batch is waited for until it completes. The note says whether
		// the singles outlasted the bulk.
		rb.bulk = make(chan struct{})
		began := time.Now()
		var singlesEnd, bulkEnd time.Duration
		sctx, cancel := context.WithCancel(ctx)
		wctx, wcancel := context.WithCancel(ctx)
		sampled := make(chan *ShareSamples, 1)
		go func() { sampled <- sampleShare(sctx, v.Config.Metrics) }()
		singlesDone := make(chan struct{})
		var lv Level
		go func() {
			defer close(singlesDone)
			lv, _ = r.freshLoad(sctx, v, "mixed", r.o.MixedConcurrency, cycled, r.o.BatchTimeout, true)
		}()
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			rb.wait(wctx, r.o.BatchTimeout)
		}()
		select {
		case <-rb.bulk:
			bulkEnd = time.Since(began)
			<-singlesDone
			singlesEnd = time.Since(began)
		case <-singlesDone:
			singlesEnd = time.Since(began)
		}
		<-waited
		cancel()
		wcancel()
		mr.Share = <-sampled
		r.doneLoading(v)
		uv, uw := mv.Stop(), mw.Stop()
		rb.res.Verifyd = procUsage(uv, rb.res.Processed+lv.OK, true)
		rb.res.World = procUsage(uw, 0, false)
		mr.Singles = &lv
		if bulkEnd > 0 {
			mr.Note = fmt.Sprintf("the singles ended %.1f s after the upload, the batch's bulk %.1f s after it: for the last %.0f %% of the singles' time only the batch's tail ran beside them",
				singlesEnd.Seconds(), bulkEnd.Seconds(), 100*(singlesEnd-bulkEnd).Seconds()/singlesEnd.Seconds())
		}
		switch {
		case rb.res.Status == "completed":
		case ctx.Err() == nil && (rb.res.Status == "running" || rb.res.Status == "queued") && strings.HasPrefix(rb.res.Error, "interrupted"):
			// Not a failure: the singles are what this scenario measures.
			rb.res.Error = ""
			mr.Note = fmt.Sprintf("the batch was still running when the singles were done (%s of %s processed)", itoa(rb.res.Processed), itoa(rb.res.Size))
		case rb.res.Error != "":
			mr.Error = rb.res.Error
		}
		if base := baselineLevel(run, r.o.MixedConcurrency); base != nil && base.Prompt != nil && base.Prompt.P99 > 0 {
			mr.BaselineP99Ms = base.Prompt.P99
			mr.P99Ratio = round3(lv.Latency.P99 / base.Prompt.P99)
		}
		if a := mr.Alone; a != nil && a.Status == "completed" && rb.res.Status == "completed" && a.CompletionSeconds > 0 {
			mr.BatchRatio = round3(rb.res.CompletionSeconds / a.CompletionSeconds)
			if a.Seconds99 > 0 && rb.res.Seconds99 > 0 {
				mr.Bulk99Ratio = round3(rb.res.Seconds99 / a.Seconds99)
			}
		}
		state := fmt.Sprintf("completed in %.1f s", rb.res.CompletionSeconds)
		if rb.res.Status != "completed" {
			state = fmt.Sprintf("%s, %d processed", rb.res.Status, rb.res.Processed)
		}
		r.logf("mixed %s: batch of %d %s (%.2f× alone); %d singles meanwhile at c=%d: p50 %.1f ms, p99 %.1f ms (%.2f× the p99 of such addresses without a batch)%s",
			v.Label, n, state, mr.BatchRatio, lv.OK, lv.Concurrency, lv.Latency.P50, lv.Latency.P99, mr.P99Ratio, errorSuffix(mr.Error))
		pause(ctx)
	}
	return nil
}

// sampleShare samples the adaptive batch share's gauges at addr every
// 250 ms until ctx ends; nil when verifyd has none.
func sampleShare(ctx context.Context, addr string) *ShareSamples {
	first, err := scrapeMetrics(addr)
	if _, ok := first["verifyd_probe_batch_limit"]; err != nil || !ok {
		return nil
	}
	s := &ShareSamples{LimitMin: first["verifyd_probe_batch_limit"]}
	last := first
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if s.Samples > 0 {
				s.LimitMean = round3(s.LimitMean / float64(s.Samples))
				s.SessionsMean = round3(s.SessionsMean / float64(s.Samples))
			}
			s.Phases = phaseTimes(first, last, 1)
			s.Backoffs = map[string]float64{}
			for _, c := range []string{"sched", "queue"} {
				k := `verifyd_probe_batch_limit_backoffs_total{cause="` + c + `"}`
				s.Backoffs[c] = last[k] - first[k]
			}
			return s
		case <-t.C:
		}
		m, err := scrapeMetrics(addr)
		if err != nil {
			continue
		}
		last = m
		l := m["verifyd_probe_batch_limit"]
		s.Samples++
		s.LimitMean += l
		s.LimitMin = min(s.LimitMin, l)
		s.SessionsMean += m["verifyd_probe_batch_sessions"]
		s.SchedMeanMaxMs = max(s.SchedMeanMaxMs, round3(1000*m["verifyd_probe_sched_latency_seconds"]))
	}
}

// batchAlone runs a batch of emails on v with nothing beside it and
// waits for it: scenario 4's yardstick.
func (r *runner) batchAlone(ctx context.Context, v *Verifyd, emails []string) *BatchResult {
	mv, mw := StartMeter(v.Proc.PID), StartMeter(r.world.Proc.PID)
	rb, err := r.uploadBatch(ctx, v, emails)
	if err != nil {
		mv.Stop()
		mw.Stop()
		return &BatchResult{Size: len(emails), Error: err.Error()}
	}
	if rb.res.Skipped == "" && rb.res.Error == "" {
		rb.wait(ctx, r.o.BatchTimeout)
	}
	r.doneLoading(v)
	uv, uw := mv.Stop(), mw.Stop()
	rb.res.Verifyd = procUsage(uv, rb.res.Processed, true)
	rb.res.World = procUsage(uw, 0, false)
	r.logf("mixed %s: the batch of %d alone: %s in %.1f s, 99 %% processed at %.1f s%s",
		v.Label, len(emails), rb.res.Status, rb.res.CompletionSeconds, rb.res.Seconds99, errorSuffix(rb.res.Error))
	return rb.res
}

// baselineLevel is scenario 1's level at concurrency c, or nil.
func baselineLevel(run *RunResult, c int) *Level {
	if run.Scenarios.Fresh == nil {
		return nil
	}
	for i := range run.Scenarios.Fresh.Levels {
		if lv := &run.Scenarios.Fresh.Levels[i]; lv.Concurrency == c {
			return lv
		}
	}
	return nil
}

// scenarioAccuracy is scenario 5: every receipt of scenario 1, and the
// CSV of scenario 3, against the world's expected verdicts.
func (r *runner) scenarioAccuracy(context.Context) error {
	for _, run := range r.runs {
		acc := &AccuracyResult{}
		run.Scenarios.Accuracy = acc
		outs := r.outcomes[run.Label]
		if len(outs) > 0 {
			acc.Single = NewConfusion()
			for _, o := range outs {
				e, ok := r.world.Expect[lower(o.Email)]
				if !ok {
					continue
				}
				acc.Single.AddExpected(e, o.Status, o.Reason, true)
			}
		}
		if b := run.Scenarios.Batch; b != nil && b.confusion != nil {
			acc.Batch = b.confusion
		}
		if acc.Single == nil && acc.Batch == nil {
			acc.Skipped = "no verdicts to compare (scenarios 1 and 3 gave none)"
		}
	}
	return nil
}

func lower(s string) string { return strings.ToLower(s) }

// itoa writes n with thousands separators.
func itoa(n int) string { return groupThousands(int64(n)) }
