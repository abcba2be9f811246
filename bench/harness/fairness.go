package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// FairnessResult is scenario 7: two accounts' batches at once. Account A
// uploads a large batch FairSamples times; each time, when A's progress
// reads fairMark, account B uploads a small one. B's completions are
// compared with the same batch's on an idle verifyd, and A's with the
// same large batch without B.
type FairnessResult struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// BAlone are B's batches on an idle verifyd (after one unmeasured run,
	// for warm caches). AAlone are A's batch without B, just before AWith
	// and BWith, which run together (the kth B uploaded when the kth A's
	// progress read StartedAt[k], fairMark), and just after. A is AWith's
	// first.
	BAlone    []*BatchResult `json:"b_alone,omitempty"`
	AAlone    []*BatchResult `json:"a_alone,omitempty"`
	A         *BatchResult   `json:"a,omitempty"`
	AWith     []*BatchResult `json:"a_with_b,omitempty"`
	BWith     []*BatchResult `json:"b_with_a,omitempty"`
	StartedAt []int          `json:"b_started_at_processed,omitempty"`
	// BAloneSeconds and BWithSeconds are the medians of B's completions;
	// BRatio is BWithSeconds over BAloneSeconds, BWorstRatio the slowest
	// beside A over the same median alone. AAloneSeconds is A's run alone
	// after the ones with B, AWithSeconds the median of AWith, and
	// ASlowdown AWithSeconds over AAloneSeconds: the run before warms the caches (the auth signals' DNS answers make
	// a cold 100,000-address batch 20 % slower), and the world's
	// greylisting lets more of A's addresses through each time, which
	// favours the run after, not the one with B.
	BAloneSeconds float64 `json:"b_alone_s,omitempty"`
	AAloneSeconds float64 `json:"a_alone_s,omitempty"`
	AWithSeconds  float64 `json:"a_with_b_s,omitempty"`
	BWithSeconds  float64 `json:"b_with_a_s,omitempty"`
	BRatio        float64 `json:"b_ratio,omitempty"`
	BWorstRatio   float64 `json:"b_worst_ratio,omitempty"`
	ASlowdown     float64 `json:"a_slowdown,omitempty"`
	// BCores and WorldCores are what verifyd and the world used while B's
	// batches ran beside A (the machine's load B met).
	BCores     float64 `json:"verifyd_cores_beside_a,omitempty"`
	WorldCores float64 `json:"world_cores_beside_a,omitempty"`
}

// FairRepeats is how many times B's batch runs alone (after one
// unmeasured run).
const FairRepeats = 5

// FairSamples is how many times A's batch runs with B's beside it, B's
// uploaded once each time when A's progress reads fairMark: the same
// number of samples at the same point of A's bulk on every side. (Until
// 2026-11-30 B uploaded up to five times one after the other during one
// run of A, at 10, 25, 40, 55 and 70 %; a bulk of 20,000 addresses that
// a warm verifyd ends in about a second then gave one sample on the
// faster side, in the thick of A's bulk, and two on the slower, the
// second at the bulk's light end: medians of unequal samples.)
const FairSamples = 3

// fairMark is how far A's batch is (addresses processed) when B uploads:
// 10 % of A's addresses, in its bulk on any side.
func fairMark(n int) int { return 10 * n / 100 }

// fairnessAddresses are A's batch (the first FairBatchSize addresses of
// the shuffled pool, as scenario 3's) and B's: FairSmallSize addresses
// the world answers at its plain pace (World.Plain), from the other end
// of the pool, so that B's time is verifyd's scheduling, not a tarpit's
// timeout.
func (r *runner) fairnessAddresses() (a, b []string) {
	n := min(r.o.FairBatchSize, len(r.pool))
	a = make([]string, n)
	copy(a, r.pool)
	for i := len(r.pool) - 1; i >= 0 && len(b) < r.o.FairSmallSize; i-- {
		if e := r.pool[i]; r.world.Plain(e) {
			b = append(b, e)
		}
	}
	return a, b
}

// scenarioFairness is scenario 7.
func (r *runner) scenarioFairness(ctx context.Context) error {
	aEmails, bEmails := r.fairnessAddresses()
	for _, i := range r.order(0) {
		v, run := r.vds[i], r.runs[i]
		if ctx.Err() != nil {
			return nil
		}
		fr := &FairnessResult{}
		run.Scenarios.Fairness = fr
		// B runs its batch FairRepeats+1 times alone and FairSamples
		// times beside A.
		bKey, err := v.NewAccount(ctx, "verifybench B", int64((FairRepeats+FairSamples+2)*len(bEmails)))
		if err != nil {
			fr.Skipped = "no second account: " + err.Error()
			r.logf("fairness %s: skipped: %s", v.Label, fr.Skipped)
			continue
		}
		r.fairness(ctx, v, fr, v.Key, bKey, aEmails, bEmails)
		switch {
		case fr.Skipped != "":
			r.logf("fairness %s: skipped: %s", v.Label, fr.Skipped)
		case fr.Error != "":
			r.logf("fairness %s: %s", v.Label, fr.Error)
		default:
			r.logf("fairness %s: B's %d addresses %.2f s alone, %.2f s beside A's batch (median of %d, at %v processed; %.2f×, slowest %.2f×; verifyd %.2f cores, world %.2f meanwhile); A's %d addresses %.1f s alone, %.1f s with B (%.3f×)",
				v.Label, len(bEmails), fr.BAloneSeconds, fr.BWithSeconds, len(fr.BWith), fr.StartedAt, fr.BRatio, fr.BWorstRatio, fr.BCores, fr.WorldCores,
				len(aEmails), fr.AAloneSeconds, fr.AWithSeconds, fr.ASlowdown)
		}
		pause(ctx)
	}
	return nil
}

// fairness runs scenario 7 on one verifyd: B alone, A alone, A with B,
// A alone again, each batch waited for to its end.
func (r *runner) fairness(ctx context.Context, v *Verifyd, fr *FairnessResult, aKey, bKey string, aEmails, bEmails []string) {
	run := func(key string, emails []string) *runningBatch {
		rb, err := r.uploadBatchAs(ctx, v, key, emails)
		if err != nil {
			fr.Error = err.Error()
			return nil
		}
		if rb.res.Skipped != "" {
			fr.Skipped = rb.res.Skipped
			return nil
		}
		if rb.res.Error != "" {
			fr.Error = rb.res.Error
			return nil
		}
		return rb
	}
	// finish waits for a job; B's carry the CPU verifyd and the world
	// used while they ran.
	finish := func(rb *runningBatch, what string, sampled bool) bool {
		mv, mw := StartSampledMeter(v.Proc.PID), StartSampledMeter(r.world.Proc.PID)
		rb.wait(ctx, r.o.BatchTimeout)
		uv, uw := mv.Stop(), mw.Stop()
		if sampled {
			rb.res.Verifyd, rb.res.World = procUsage(uv, 0, false), procUsage(uw, 0, false)
		}
		if rb.res.Error != "" {
			fr.Error = what + ": " + rb.res.Error
			return false
		}
		return true
	}

	// One unmeasured run first: B's domains' MX answers and catch-all
	// verdicts are then as warm alone as beside A.
	for i := range FairRepeats + 1 {
		rb := run(bKey, bEmails)
		if rb == nil || !finish(rb, "B alone", true) {
			return
		}
		if i > 0 {
			fr.BAlone = append(fr.BAlone, rb.res)
		}
	}
	pause(ctx)

	aAlone := func() bool {
		rb := run(aKey, aEmails)
		if rb == nil || !finish(rb, "A alone", false) {
			return false
		}
		fr.AAlone = append(fr.AAlone, rb.res)
		pause(ctx)
		return true
	}
	if !aAlone() {
		return
	}

	// A with B, FairSamples times: B uploads when A's progress reads
	// fairMark, each time at the same point of A's bulk on every side.
	for range FairSamples {
		m := StartMeter(v.Proc.PID)
		ra := run(aKey, aEmails)
		if ra == nil {
			m.Stop()
			return
		}
		aDone := make(chan struct{})
		go func() {
			defer close(aDone)
			ra.wait(ctx, r.o.BatchTimeout)
		}()
		processed, running, err := waitProgress(ctx, ra, fairMark(len(aEmails)), r.o.BatchTimeout)
		switch {
		case err != nil:
			fr.Error = "A with B: " + err.Error()
		case running:
			// A batch too small to have a bulk (the smoke world's 100)
			// may have ended by the mark: no sample then.
			fr.StartedAt = append(fr.StartedAt, processed)
			if rb := run(bKey, bEmails); rb != nil && finish(rb, "B beside A", true) {
				fr.BWith = append(fr.BWith, rb.res)
			}
		}
		<-aDone
		ra.res.Verifyd = procUsage(m.Stop(), ra.res.Processed, true)
		if fr.A == nil {
			fr.A = ra.res
		}
		fr.AWith = append(fr.AWith, ra.res)
		switch {
		case fr.Error != "":
			return
		case ra.res.Error != "":
			fr.Error = "A with B: " + ra.res.Error
			return
		case len(fr.BWith) == 0:
			fr.Skipped = "A's batch ended before B's first upload: too small to measure B beside it"
			return
		}
		pause(ctx)
	}
	if !aAlone() {
		return
	}

	var cpu, wcpu, wall float64
	for _, b := range fr.BWith {
		cpu += b.Verifyd.CPUSeconds
		wcpu += b.World.CPUSeconds
		wall += b.CompletionSeconds
	}
	fr.BCores, fr.WorldCores = round3(cpu/wall), round3(wcpu/wall)
	fr.BAloneSeconds, fr.BWithSeconds = medianCompletion(fr.BAlone), medianCompletion(fr.BWith)
	if fr.BAloneSeconds > 0 {
		fr.BRatio = round3(fr.BWithSeconds / fr.BAloneSeconds)
		worst := 0.0
		for _, b := range fr.BWith {
			worst = max(worst, b.CompletionSeconds)
		}
		fr.BWorstRatio = round3(worst / fr.BAloneSeconds)
	}
	fr.AAloneSeconds = fr.AAlone[1].CompletionSeconds
	fr.AWithSeconds = medianCompletion(fr.AWith)
	if fr.AAloneSeconds > 0 {
		fr.ASlowdown = round3(fr.AWithSeconds / fr.AAloneSeconds)
	}
}

// peakRSSWith is verifyd's peak resident memory over A's runs with B.
func (fr *FairnessResult) peakRSSWith() float64 {
	peak := 0.0
	for _, a := range fr.AWith {
		peak = max(peak, a.Verifyd.PeakRSSMB)
	}
	return peak
}

// medianCompletion is the median of the batches' completion times.
func medianCompletion(bs []*BatchResult) float64 {
	if len(bs) == 0 {
		return 0
	}
	s := make([]float64, len(bs))
	for i, b := range bs {
		s[i] = b.CompletionSeconds
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

// waitProgress polls a job (on its own connection, beside rb.wait) until
// at least n addresses are processed or it ends; it returns the count it
// read last and whether the job was still queued or running.
func waitProgress(ctx context.Context, rb *runningBatch, n int, timeout time.Duration) (int, bool, error) {
	api := newBatchAPI(rb.api.v, rb.api.key)
	deadline := time.Now().Add(timeout)
	for {
		status, data, err := api.do(ctx, "GET", "/v1/jobs/"+rb.res.JobID, nil)
		if err != nil {
			return 0, false, err
		}
		if status != http.StatusOK {
			return 0, false, fmt.Errorf("GET /v1/jobs/{id}: %s", httpFailure(status, data))
		}
		var j jobView
		if err := json.Unmarshal(data, &j); err != nil {
			return 0, false, fmt.Errorf("GET /v1/jobs/{id}: unreadable: %.200s", data)
		}
		running := j.Status == "queued" || j.Status == "running"
		if j.Progress.Processed >= n || !running {
			return j.Progress.Processed, running, nil
		}
		if time.Now().After(deadline) {
			return 0, false, fmt.Errorf("%d addresses processed within %s", n, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
