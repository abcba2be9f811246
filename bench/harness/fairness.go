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
// uploads a large batch; while it runs, account B uploads a small one
// FairRepeats times, at marks spread over A's progress. B's completions are
// compared with the same batch's on an idle verifyd, and A's with the
// same large batch without B.
type FairnessResult struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// BAlone are B's batches on an idle verifyd, AAlone A's batch without
	// B (after one unmeasured run of B's, for warm caches); A and BWith
	// are the ones run together, B's kth uploaded at fairMark(k) of A's
	// time to 99 % alone, when A's progress read StartedAt[k] (fewer
	// than FairRepeats when A ended sooner).
	BAlone    []*BatchResult `json:"b_alone,omitempty"`
	AAlone    *BatchResult   `json:"a_alone,omitempty"`
	A         *BatchResult   `json:"a,omitempty"`
	BWith     []*BatchResult `json:"b_with_a,omitempty"`
	StartedAt []int          `json:"b_started_at_processed,omitempty"`
	// BAloneSeconds and BWithSeconds are the medians of B's completions;
	// BRatio is BWithSeconds over BAloneSeconds, BWorstRatio the slowest
	// beside A over the same median alone. ASlowdown is A's completion
	// with B over its completion alone.
	BAloneSeconds float64 `json:"b_alone_s,omitempty"`
	BWithSeconds  float64 `json:"b_with_a_s,omitempty"`
	BRatio        float64 `json:"b_ratio,omitempty"`
	BWorstRatio   float64 `json:"b_worst_ratio,omitempty"`
	ASlowdown     float64 `json:"a_slowdown,omitempty"`
	// BCores and WorldCores are what verifyd and the world used while B's
	// batches ran beside A (the machine's load B met).
	BCores     float64 `json:"verifyd_cores_beside_a,omitempty"`
	WorldCores float64 `json:"world_cores_beside_a,omitempty"`
}

// FairRepeats is how many times B's batch runs alone and beside A: one
// small job's time depends on what A is doing at that moment.
const FairRepeats = 5

// fairMark is when B uploads its kth batch, as a share of the time A's
// batch alone took to reach 99 % processed (its bulk, before the tail of
// tarpits and greylisting): 10 %, 30 %, … 90 %, as customers arrive at
// any moment of it.
func fairMark(k int) float64 { return (0.1 + 0.8*float64(k)/float64(max(FairRepeats-1, 1))) }

// fairnessAddresses are A's batch (the first FairBatchSize addresses of
// the shuffled pool, as scenario 3's) and B's: FairSmallSize addresses
// the world answers promptly, from the other end of the pool, so that
// B's time is verifyd's scheduling, not a tarpit's timeout.
func (r *runner) fairnessAddresses() (a, b []string) {
	n := min(r.o.FairBatchSize, len(r.pool))
	a = make([]string, n)
	copy(a, r.pool)
	for i := len(r.pool) - 1; i >= 0 && len(b) < r.o.FairSmallSize; i-- {
		if e := r.pool[i]; !r.world.Slow(e) {
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
		bKey, err := v.NewAccount(ctx, "verifybench B", int64(10*len(bEmails)+1000))
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
			r.logf("fairness %s: B's %d addresses %.2f s alone, %.2f s beside A's batch (median of %d; %.2f×, slowest %.2f×; verifyd %.2f cores, world %.2f meanwhile); A's %d addresses %.1f s alone, %.1f s with B (%.3f×)",
				v.Label, len(bEmails), fr.BAloneSeconds, fr.BWithSeconds, FairRepeats, fr.BRatio, fr.BWorstRatio, fr.BCores, fr.WorldCores,
				len(aEmails), fr.AAlone.CompletionSeconds, fr.A.CompletionSeconds, fr.ASlowdown)
		}
		pause(ctx)
	}
	return nil
}

// fairness runs scenario 7 on one verifyd: B alone, A alone, then A with
// B, each batch waited for to its end.
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

	m := StartMeter(v.Proc.PID)
	rb := run(aKey, aEmails)
	if rb == nil || !finish(rb, "A alone", false) {
		m.Stop()
		return
	}
	fr.AAlone = rb.res
	fr.AAlone.Verifyd = procUsage(m.Stop(), rb.res.Processed, true)
	pause(ctx)

	m = StartMeter(v.Proc.PID)
	ra := run(aKey, aEmails)
	if ra == nil {
		m.Stop()
		return
	}
	fr.A = ra.res
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		ra.wait(ctx, r.o.BatchTimeout)
	}()
	for k := range FairRepeats {
		at := time.Duration(fairMark(k) * fr.AAlone.Seconds99 * float64(time.Second))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(ra.start.Add(at))):
		}
		processed, running, err := jobProgress(ctx, ra)
		if err != nil {
			fr.Error = "A with B: " + err.Error()
			break
		}
		if !running {
			break // A ended sooner than alone: fewer samples
		}
		fr.StartedAt = append(fr.StartedAt, processed)
		rb := run(bKey, bEmails)
		if rb == nil || !finish(rb, "B beside A", true) {
			break
		}
		fr.BWith = append(fr.BWith, rb.res)
	}
	<-aDone
	fr.A.Verifyd = procUsage(m.Stop(), ra.res.Processed, true)
	switch {
	case fr.Error != "":
		return
	case ra.res.Error != "":
		fr.Error = "A with B: " + ra.res.Error
		return
	case len(fr.BWith) == 0:
		fr.Error = "A's batch ended before B's first upload"
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
	if fr.AAlone.CompletionSeconds > 0 {
		fr.ASlowdown = round3(fr.A.CompletionSeconds / fr.AAlone.CompletionSeconds)
	}
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

// jobProgress reads a job's progress (on its own connection, beside
// rb.wait), and whether it is still running.
func jobProgress(ctx context.Context, rb *runningBatch) (processed int, running bool, err error) {
	api := newBatchAPI(rb.api.v, rb.api.key)
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
	return j.Progress.Processed, j.Status == "running" || j.Status == "queued", nil
}
