package batch

import (
	"context"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// leaser is the lease loop of a box of a fleet (README.md, "Fleet
// mode"): it leases slices of the active jobs while the box has room,
// hands their addresses to the scheduler, and gives back the slices the
// box holds but does not work on. A box on its own store has none.
type leaser struct {
	sc     *scheduler
	db     storage.JobLeases
	wakeCh chan struct{}
}

func (l *leaser) wake() {
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// leasePoll is how often an idle box of a fleet looks for work.
const leasePoll = time.Second

// need is how many more slices this box should lease now: enough
// for its domain groups queued and in flight to fill every slot
// (Concurrency) — a slice holds dozens to hundreds of groups, so a few
// slices fill a box — and one when its queue is down to less than a
// slice's worth of addresses. The caller holds mu.
func (l *leaser) need() int {
	sc := l.sc
	queued, groups := 0, sc.inflight
	for _, r := range sc.jobs {
		queued += r.queued
		groups += len(r.retries)
		for _, q := range r.domains[r.dhead:] {
			groups += len(q.chunks)
		}
	}
	switch free := sc.opts.Concurrency - groups; {
	case free > 0:
		return min(max(free/64, 1), 8)
	case queued < storage.JobSliceSize:
		return 1
	}
	return 0
}

// leaseGuard is how often a box of a fleet gives back the slices it
// holds but does not work on (giveBack).
const leaseGuard = 10 * time.Second

// stallGiveBack is how long a job of a fleet may stall on this box (its
// writes refused or timing out) before its slices go back (giveBack).
const stallGiveBack = 30 * time.Second

// loop leases slices of the active jobs while this box has room
// (see Fleet mode above), and gives back those it holds but does not
// work on, until stop.
func (l *leaser) loop() {
	sc := l.sc
	defer sc.wg.Done()
	t := time.NewTicker(leasePoll)
	defer t.Stop()
	var guarded time.Time
	for {
		select {
		case <-sc.stopCh:
			return
		case <-l.wakeCh:
		case <-t.C:
		}
		for l.more() {
		}
		// Monotonic: a step of the wall clock neither stops the guard
		// nor makes it run at every tick.
		if time.Since(guarded) >= leaseGuard {
			l.giveBack()
			guarded = time.Now()
		}
	}
}

// giveBack returns the slices the database says this box holds but that
// no job this box schedules works on: leased by a call whose answer was
// lost (the database failed after its commit), or kept by any mistake.
// Held by a live box, they would otherwise wait for its end while their
// job stood still. It runs on the lease loop, so no lease is in flight
// meanwhile.
//
// A job of a fleet whose writes this box could not store for
// stallGiveBack (its link to the database is so slow that a write never
// fits in storage.call_timeout, or the database is away) leaves this
// box first, and its slices go back with the others: a box that cannot
// store results must not keep the work that other boxes could finish.
// What it probed and did not store is probed again where the slices go.
func (l *leaser) giveBack() {
	sc := l.sc
	sc.mu.Lock()
	for _, r := range sc.jobs {
		if r.stalled && time.Since(r.stalledSince) >= stallGiveBack {
			sc.s.log.Warn("this box could not store the job's results for a while: its slices go back to the fleet",
				"job", r.id, "stalled", time.Since(r.stalledSince).Round(time.Second), "results_dropped", len(r.buf))
			jobsGivenUp.Inc()
			sc.remove(r)
		}
	}
	sc.mu.Unlock()
	held, err := l.db.LeasedSlices(sc.ctx)
	if err != nil {
		sc.s.log.Warn("cannot list the job slices this box holds", "err", err)
		return
	}
	var stray []storage.JobSlice
	sc.mu.Lock()
	if sc.closing {
		sc.mu.Unlock()
		return
	}
	for _, js := range held {
		if r := sc.jobs[js.Job.ID]; r == nil || r.done || !r.slices[js.Slice] {
			stray = append(stray, js)
		}
	}
	sc.mu.Unlock()
	for _, js := range stray {
		if err := l.db.ReturnSlice(context.Background(), js.Job.ID, js.Slice); err != nil {
			sc.s.log.Error("cannot give back a job slice this box does not work on", "job", js.Job.ID, "slice", js.Slice, "err", err)
			continue
		}
		slicesGivenBack.Inc()
		sc.s.log.Warn("gave back a job slice this box held but did not work on", "job", js.Job.ID, "slice", js.Slice)
	}
	if len(stray) > 0 {
		l.wake()
	}
}

// more leases what the box has room for and queues it; it reports
// whether there may be more to lease now.
func (l *leaser) more() bool {
	sc := l.sc
	sc.mu.Lock()
	n := l.need()
	closing := sc.closing
	sc.mu.Unlock()
	if closing || n == 0 {
		return false
	}
	got, err := l.db.LeaseSlices(sc.ctx, n)
	if err != nil {
		// What it leased before the error is this box's now: queue it.
		sc.s.log.Error("cannot lease job slices", "err", err)
	}
	leased := 0
	for _, js := range got {
		b := newBuilder(sc.opts.GroupSize)
		if js.Slice >= 0 {
			leased++
			if err := l.db.SliceAddresses(sc.ctx, js.Job.ID, js.Slice, func(i int, addr string) error {
				b.add(i, addr)
				return nil
			}); err != nil {
				// Give it back: held by a live box, it would wait for
				// this one's end.
				sc.s.log.Error("cannot read a leased slice; giving it back", "job", js.Job.ID, "slice", js.Slice, "err", err)
				if rerr := l.db.ReturnSlice(context.Background(), js.Job.ID, js.Slice); rerr != nil {
					sc.s.log.Error("cannot give a slice back; it is free again when this box stops", "job", js.Job.ID, "slice", js.Slice, "err", rerr)
				}
				continue
			}
		} else {
			sc.s.log.Info("ending a job whose every result is written", "job", js.Job.ID)
		}
		sc.mu.Lock()
		if !sc.closing {
			sc.register(js.Job, js.Slice, b)
		}
		sc.mu.Unlock()
	}
	if len(got) > 0 {
		sc.wake()
	}
	// Only slices count: a job to end comes on top of them.
	return err == nil && leased == n
}
