package probe

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// share gives real-time validations the first claim on the machine: while
// real-time traffic is active (a validation in flight, or one ended less
// than realtimeIdle ago), batch work may have at most limit SMTP sessions
// open (more wait for one to end, or for the real-time traffic to stop);
// otherwise batch sessions are bounded only by the batch pool. A
// batch burst (a thousand domains' sessions at once) otherwise takes the
// CPU and the network that single validations, each waited for by a
// person, need: their p99 tripled during a batch (bench/RESULTS.md,
// scenario 4).
//
// The limit adapts (limiter): it falls while real-time work shows
// pressure and climbs back to the full share when it shows none.
type share struct {
	lim *limiter // nil: no limit

	mu       sync.Mutex
	realtime int           // real-time validations in flight
	lastRT   time.Time     // when the last one ended
	batch    int           // batch sessions open
	waiting  int           // batch sessions waiting for room
	changed  chan struct{} // closed when a count drops or the limit grows
	maxBatch int           // most batch sessions open while real-time was active (tests)

	// queued is the longest wait, in nanoseconds, of a real-time
	// validation for a worker since the limiter's last look.
	queued atomic.Int64
}

var batchSessions = vm.NewGauge(`verifyd_probe_batch_sessions`, nil)

func newShare(full int, o limiterOptions) *share {
	s := &share{changed: make(chan struct{})}
	if full > 0 {
		s.lim = newLimiter(full, o)
	}
	return s
}

// realtimeStart and realtimeEnd bracket a real-time validation.
func (s *share) realtimeStart() {
	s.mu.Lock()
	s.realtime++
	s.adjust()
	s.mu.Unlock()
}

func (s *share) realtimeEnd() {
	s.mu.Lock()
	s.realtime--
	s.lastRT = time.Now()
	s.adjust()
	s.mu.Unlock()
}

// realtimeIdle is how long real-time traffic stays active after its last
// validation ends. A client's requests have gaps between the validations
// (the API's credit hold and charge, the round trip, the client's own
// work); a batch that took each gap as idleness would open sessions
// without bound between two of them.
const realtimeIdle = time.Second

// active reports whether real-time traffic is active at now; s.mu is
// held.
func (s *share) active(now time.Time) bool {
	return s.realtime > 0 || now.Sub(s.lastRT) < realtimeIdle
}

// realtimeQueued reports that a real-time validation waited d for a
// worker: a pressure signal.
func (s *share) realtimeQueued(d time.Duration) {
	for {
		old := s.queued.Load()
		if int64(d) <= old || s.queued.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// batchStart waits until a batch session may open, or ctx ends (false).
func (s *share) batchStart(ctx context.Context) bool {
	s.mu.Lock()
	s.adjust()
	for s.lim != nil && s.batch >= s.lim.limit() && s.active(time.Now()) {
		ch := s.changed
		// With none in flight, real-time traffic ends by itself.
		var idle <-chan time.Time
		var t *time.Timer
		if s.realtime == 0 {
			t = time.NewTimer(time.Until(s.lastRT.Add(realtimeIdle)))
			idle = t.C
		}
		s.waiting++
		s.mu.Unlock()
		var ok bool
		select {
		case <-ch:
			ok = true
		case <-idle:
			ok = true
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		s.mu.Lock()
		s.waiting--
		if !ok {
			s.mu.Unlock()
			return false
		}
	}
	s.batch++
	if s.active(time.Now()) {
		s.maxBatch = max(s.maxBatch, s.batch)
	}
	batchSessions.Inc()
	s.mu.Unlock()
	return true
}

func (s *share) batchEnd() {
	s.mu.Lock()
	s.batch--
	batchSessions.Dec()
	s.wake()
	s.adjust()
	s.mu.Unlock()
}

// wake lets the waiters look again; s.mu is held.
func (s *share) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// adjust lets the limiter look at the signals when its interval has
// passed, and wakes the waiters when the limit grew; s.mu is held.
func (s *share) adjust() {
	if s.lim == nil {
		return
	}
	now := time.Now()
	if now.Before(s.lim.next) {
		return
	}
	q := time.Duration(s.queued.Swap(0))
	// Demand: batch sessions wait, or the open ones use most of the limit.
	demand := s.waiting > 0 || 2*s.batch >= s.lim.limit()
	if s.lim.update(now, s.active(now), demand, q) {
		s.wake()
	}
}

// Defaults of the limiter (limiterOptions): see probe/README.md, "The
// adaptive batch share".
const (
	DefaultBatchInterval    = 100 * time.Millisecond
	DefaultBatchSchedTarget = 100 * time.Microsecond
	DefaultBatchQueueTarget = 10 * time.Millisecond
)

// limiterOptions tune the limiter; zero fields take the defaults.
type limiterOptions struct {
	// Interval is how often the limit moves.
	Interval time.Duration
	// SchedTarget: the Go scheduler's mean latency (how long runnable
	// goroutines waited for a CPU) over an interval above it is pressure.
	// Negative: not a signal.
	SchedTarget time.Duration
	// QueueTarget: a real-time validation that waited longer for a worker
	// is pressure. Negative: not a signal.
	QueueTarget time.Duration
	// sched, when set, replaces the scheduler's reading (tests).
	sched func() time.Duration
}

// limiter is an AIMD concurrency limit (additive increase, multiplicative
// decrease), as in TCP's congestion avoidance (RFC 5681 §3.1) and the
// AIMDLimit of Netflix's concurrency-limits library: every interval in
// which real-time traffic was active, pressure (the CPU's run queue or the
// real-time worker queue above its target) multiplies the limit by
// backoff; no pressure, with batch work asking for more room, adds one
// step. An interval with no real-time traffic at all also adds a step:
// idle real-time traffic lets the limit climb back to the full share.
type limiter struct {
	full, min int
	cur       float64
	o         limiterOptions
	next      time.Time
	sched     schedReader
}

// The backoff per interval of pressure, and the floor: from the full
// share of 64, pressure halves the limit in 0.7 s, its floor (16) in
// 1.4 s; steps (step) take it back up in 2 s. The floor keeps a batch
// moving: a quarter of its share still finishes a 10,000-address batch's
// bulk before the world's slow hosts do (bench/RESULTS.md, scenario 4).
const (
	limitBackoff = 0.9
	limitFloorOf = 4 // the floor is the full share / limitFloorOf, at least 1
)

var (
	batchLimit     = vm.NewGauge(`verifyd_probe_batch_limit`, nil)
	limitBackoffs  = map[string]*vm.Counter{"sched": vm.NewCounter(`verifyd_probe_batch_limit_backoffs_total{cause="sched"}`), "queue": vm.NewCounter(`verifyd_probe_batch_limit_backoffs_total{cause="queue"}`)}
	schedLatencyNS atomic.Int64
	_              = vm.NewGauge(`verifyd_probe_sched_latency_seconds`, func() float64 { return float64(schedLatencyNS.Load()) / 1e9 })
)

func newLimiter(full int, o limiterOptions) *limiter {
	if o.Interval <= 0 {
		o.Interval = DefaultBatchInterval
	}
	if o.SchedTarget == 0 {
		o.SchedTarget = DefaultBatchSchedTarget
	}
	if o.QueueTarget == 0 {
		o.QueueTarget = DefaultBatchQueueTarget
	}
	l := &limiter{full: full, min: max(1, full/limitFloorOf), cur: float64(full), o: o}
	batchLimit.Set(float64(full))
	return l
}

// limit is the number of batch sessions allowed beside real-time work.
func (l *limiter) limit() int { return int(l.cur) }

// update moves the limit once an interval has passed (now at l.next or
// later): rt says whether real-time traffic is active (share.active), demand
// whether batch work wants more room, queued the longest real-time queue
// wait of the interval. It says whether the limit grew.
func (l *limiter) update(now time.Time, rt, demand bool, queued time.Duration) bool {
	l.next = now.Add(l.o.Interval)
	var sched time.Duration
	if l.o.sched != nil {
		sched = l.o.sched()
	} else {
		sched = l.sched.mean()
	}
	schedLatencyNS.Store(int64(sched))
	old := l.limit()
	switch {
	case rt && l.o.SchedTarget > 0 && sched > l.o.SchedTarget:
		l.cur = math.Max(float64(l.min), l.cur*limitBackoff)
		limitBackoffs["sched"].Inc()
	case rt && l.o.QueueTarget > 0 && queued > l.o.QueueTarget:
		l.cur = math.Max(float64(l.min), l.cur*limitBackoff)
		limitBackoffs["queue"].Inc()
	case demand || !rt:
		l.cur = math.Min(float64(l.full), l.cur+float64(l.step()))
	}
	batchLimit.Set(float64(l.limit()))
	return l.limit() > old
}

// step is the additive increase per interval: the full share in 20
// intervals (2 s at the default interval), at least 1.
func (l *limiter) step() int { return max(1, l.full/20) }

// schedReader reads the Go scheduler's latency histogram
// (/sched/latencies:seconds: how long goroutines waited, runnable, for a
// CPU) and gives the mean of what it recorded since the last read. The
// mean, not a high percentile: a lone wait of milliseconds (a GC cycle's
// start) says little, a mean that climbs says work queues for the CPU.
// On the benchmark's 2 vCPUs it was 30-70 µs with single validations
// alone at 64 at once, 200-300 µs with a batch's 64 sessions beside them.
type schedReader struct {
	sample []metrics.Sample
	prev   []uint64
}

func (r *schedReader) mean() time.Duration {
	if r.sample == nil {
		r.sample = []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	}
	metrics.Read(r.sample)
	if r.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := r.sample[0].Value.Float64Histogram()
	if len(r.prev) != len(h.Counts) {
		r.prev = make([]uint64, len(h.Counts))
		copy(r.prev, h.Counts)
		return 0
	}
	var n uint64
	var sum float64
	for i, c := range h.Counts {
		d := c - r.prev[i]
		n += d
		// Each wait at its bucket's lower bound: the mean is at least
		// this (the buckets are a few per cent wide).
		if b := h.Buckets[i]; d > 0 && b > 0 && !math.IsInf(b, 0) {
			sum += float64(d) * b
		}
	}
	copy(r.prev, h.Counts)
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}
