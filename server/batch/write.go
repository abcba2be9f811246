package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
)

// The write-behind: a job's results wait in its buffer (jobRun.buf) and
// are written in one synced batch of up to FlushSize, or after
// FlushInterval (storage.PutJobResults: the results, their history rows
// and cache entries, the job's progress); a job whose every address has a
// stored result is ended (storage.FinishJob: the settlement and the
// webhook event, in one write). A store that refuses writes (a full disk,
// a database away) pauses the job instead of failing it (storeAway).

// startWrite writes the job's buffered results; the caller holds mu.
func (sc *scheduler) startWrite(r *jobRun) {
	batch := r.buf
	r.buf, r.bufSince = nil, time.Time{}
	r.writing = true
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		j, err := sc.db.PutJobResults(context.Background(), r.id, batch)
		sc.mu.Lock()
		defer sc.wake()
		defer sc.mu.Unlock()
		sc.wrote(r, batch, j, err)
	}()
}

// wrote takes a write's outcome in; the caller holds mu.
func (sc *scheduler) wrote(r *jobRun, batch []storage.JobResult, j storage.Job, err error) {
	r.writing = false
	now := sc.s.now()
	switch {
	case err == nil:
		resultWrites.Inc()
		addrsProcessed.Add(len(batch))
		r.unwritten = j.Total - j.Processed
		r.failures = 0
		r.retryAt = time.Time{}
		if r.stalled {
			r.stalled = false
			sc.s.log.Info("the store takes writes again; the job goes on", "job", r.id)
		}
	case errors.Is(err, storage.ErrJobState), errors.Is(err, storage.ErrNotFound):
		sc.s.log.Warn("job ended elsewhere; its results are dropped", "job", r.id, "err", err)
		sc.remove(r)
	case storage.Unavailable(err):
		r.buf = append(batch, r.buf...)
		if r.bufSince.IsZero() {
			r.bufSince = now
		}
		sc.storeAway(r, err)
	default:
		resultWriteErr.Inc()
		r.buf = append(batch, r.buf...)
		if r.bufSince.IsZero() {
			r.bufSince = now
		}
		r.failures++
		r.retryAt = now.Add(backoff(r.failures))
		sc.s.log.Error("cannot store job results; will retry", "job", r.id, "results", len(batch),
			"failures", r.failures, "err", err)
		if r.failures >= sc.opts.MaxFailures {
			r.failErr = fmt.Sprintf("results could not be stored %d times in a row: %v", r.failures, err)
			r.dropBuf = true
		}
	}
}

// storeAway pauses a job whose write the store refused for a state that
// passes by itself (storage.Unavailable: its disk is full, the fleet's
// database is unreachable or restarting): no new groups (what would be
// probed could not be stored), and its write or start is tried again
// every storeAwayRetry, without counting as a failure: the job goes on by
// itself once the store takes writes, however long that takes, and
// nothing is half-written meanwhile (a refused write wrote nothing). The
// caller holds mu.
func (sc *scheduler) storeAway(r *jobRun, err error) {
	if !r.stalled {
		sc.s.log.Warn("the store does not take writes: the job pauses until it does", "job", r.id, "err", err)
		if storage.NoSpace(err) {
			jobsPausedDiskFull.Inc()
		} else {
			jobsPausedStoreAway.Inc()
		}
	}
	if !r.stalled {
		r.stalledSince = time.Now()
	}
	r.stalled = true
	r.retryAt = sc.s.now().Add(storeAwayRetry)
}

// storeAwayRetry is how often a job paused by storeAway tries again.
const storeAwayRetry = 2 * time.Second

// startFinish ends the job; the caller holds mu.
func (sc *scheduler) startFinish(r *jobRun, status storage.JobStatus) {
	r.finishing = true
	errText := r.failErr
	sc.wg.Add(1)
	go func() {
		defer sc.wg.Done()
		j, err := sc.db.FinishJob(context.Background(), r.id, storage.JobFinish{Status: status, Error: errText, Event: webhook.JobEvent})
		sc.mu.Lock()
		defer sc.wake()
		defer sc.mu.Unlock()
		r.finishing = false
		log := sc.s.log.With("job", r.id, "account", r.account)
		switch {
		case err == nil:
			if status == storage.JobCompleted {
				jobsCompleted.Inc()
				log.Info("job completed", "processed", j.Processed, "used", j.Used, "refunded", j.Refunded)
			} else {
				jobsFailed.Inc()
				log.Warn("job failed", "err", errText, "processed", j.Processed, "total", j.Total,
					"used", j.Used, "refunded", j.Refunded)
			}
			if j.WebhookURL != "" {
				typ := webhook.EventBatchCompleted
				if status == storage.JobFailed {
					typ = webhook.EventBatchFailed
				}
				webhook.Enqueued(typ)
				sc.s.opts.Hooks.Wake()
			}
			sc.remove(r)
		case errors.Is(err, storage.ErrJobState), errors.Is(err, storage.ErrNotFound):
			log.Warn("job ended elsewhere", "err", err)
			sc.remove(r)
		default:
			r.failures++
			r.retryAt = sc.s.now().Add(backoff(r.failures))
			log.Error("cannot end the job; will retry", "status", status, "err", err)
		}
	}()
}
