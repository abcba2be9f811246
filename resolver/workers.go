package resolver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/verifyd/verifyd/internal/fifo"
)

// The worker pool. Every upstream query runs on a worker goroutine, at
// most Options.MaxInFlight at once:
//
//  1. dispatch hands a new query to the idle worker that went idle last,
//     or starts a worker while fewer than MaxInFlight run, or else appends
//     the query to a FIFO queue.
//  2. A worker that finishes a query takes the queue's head; when the
//     queue is empty it goes idle (on top of the idle stack) and exits
//     after workerIdle without work, or when the resolver closes.
//
// Workers are reused because a fresh goroutine's stack grows while it
// unpacks a reply, which was several percent of the CPU per query. The
// idle stack is LIFO so that the workers a burst started beyond the steady
// need stay idle and exit: a FIFO hand-out would keep every one of them
// alive with a query now and then (thousands of parked goroutines with
// grown stacks during a big batch). The bound keeps the sockets, read
// buffers and stacks of queries in flight to MaxInFlight's worth.

// workerIdle is how long a worker waits for its next query before it
// exits; New copies it into workers.idleFor (a variable for tests).
var workerIdle = 10 * time.Second

// workers is the pool's state; its lock is taken under a flight shard's
// lock (dispatch), never the other way round.
type workers struct {
	idleFor time.Duration // workerIdle when the resolver was made

	mu      sync.Mutex
	running int               // workers started and not exited
	idle    []chan *call      // idle workers' hand-off channels, last idle on top
	waiting fifo.Lanes[*call] // queries waiting for a worker: urgent ones (Urgent), batch ones, refreshes
}

// urgentKey marks a context whose lookups go ahead of queued ones.
type urgentKey struct{}

// Urgent returns ctx marked so that the lookups made with it, when they
// must wait for a worker, go ahead of the lookups of unmarked contexts: a
// real-time validation, with a budget of seconds, ahead of a batch job's
// thousands of lookups. A lookup that joins one already queued moves it
// ahead.
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func isUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// laneOf is the lane of the lookups made with ctx.
func laneOf(ctx context.Context) fifo.Lane {
	if isUrgent(ctx) {
		return fifo.Urgent
	}
	return fifo.Normal
}

// dispatch runs c on a worker, or queues it in lane (urgent lookups, then
// batch lookups, then refreshes); the caller holds c's flight shard lock
// (Close's barrier relies on it).
func (r *Resolver) dispatch(c *call, lane fifo.Lane) {
	w := &r.work
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- c // buffered, and only this sender: never blocks
		return
	}
	if w.running < r.opts.MaxInFlight {
		w.running++
		r.wg.Add(1)
		w.mu.Unlock()
		workersRunning.Add(1)
		go r.worker(c)
		return
	}
	w.waiting.Push(c, lane)
	w.mu.Unlock()
	queriesQueued.Add(1)
	queueWaits.Inc()
}

// promote moves c to lane when it still waits in a later one (an urgent
// caller joined it, or a caller joined a refresh).
func (r *Resolver) promote(c *call, lane fifo.Lane) {
	w := &r.work
	w.mu.Lock()
	w.waiting.Promote(c, lane)
	w.mu.Unlock()
}

// next pops the next waiting query; nil when none waits. The caller holds
// w.mu.
func (w *workers) next() *call {
	c, ok := w.waiting.Pop()
	if ok {
		queriesQueued.Add(-1)
	}
	return c
}

// worker runs c, then queued queries and those handed to it, until it has
// been idle for workerIdle or the resolver closes.
func (r *Resolver) worker(c *call) {
	defer r.wg.Done()
	defer workersRunning.Add(-1)
	w := &r.work
	ch := make(chan *call, 1)
	idle := time.NewTimer(w.idleFor)
	defer idle.Stop()
	for {
		r.fly(c)
		w.mu.Lock()
		if c = w.next(); c != nil {
			w.mu.Unlock()
			continue
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		idle.Reset(w.idleFor)
		select {
		case c = <-ch:
			continue
		case <-idle.C:
		case <-r.ctx.Done():
		}
		w.mu.Lock()
		if i := slices.Index(w.idle, ch); i >= 0 {
			w.idle = slices.Delete(w.idle, i, i+1)
			w.running--
			w.mu.Unlock()
			return
		}
		// dispatch took this worker off the stack: its query is on the
		// way.
		w.mu.Unlock()
		c = <-ch
	}
}
