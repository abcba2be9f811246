package httpapi

import (
	"hash/maphash"
	"sync"
	"time"
)

// Class is a route class of the rate limits (spec §8): each class has
// its own window per client and per key.
type Class uint8

// The route classes of spec §8.
const (
	ClassValidate Class = iota // POST /v1/validate
	ClassBatch                 // POST /v1/batch
	ClassResults               // GET /v1/results
	ClassOther                 // every other /v1 route
	NumClasses
)

// Limits are one Limit per route class.
type Limits [NumClasses]Limit

// DefaultIPLimits are spec §8's per-endpoint limits, per source IP.
func DefaultIPLimits(window time.Duration, validate, batch, results, other int) Limits {
	return Limits{
		ClassValidate: {validate, window},
		ClassBatch:    {batch, window},
		ClassResults:  {results, window},
		ClassOther:    {other, window},
	}
}

// Limit is a number of requests per window.
type Limit struct {
	N      int
	Window time.Duration
}

// Plans are the per-API-key rates of spec §8's plan table, per route. A
// zero Limit is uncapped.
var Plans = map[string]Limits{
	"free":       {{10, time.Minute}, {3, time.Minute}, {60, time.Minute}, {60, time.Minute}},
	"starter":    {{50, time.Second}, {30, time.Minute}, {300, time.Minute}, {300, time.Minute}},
	"growth":     {{200, time.Second}, {60, time.Minute}, {600, time.Minute}, {600, time.Minute}},
	"scale":      {{500, time.Second}, {120, time.Minute}, {1200, time.Minute}, {1200, time.Minute}},
	"enterprise": {},
}

// limiter counts requests in fixed windows (spec §8: "fixed windows of one
// minute"), keyed by a string (a client address or an API key prefix) and
// a route class. Both of spec §8's tables are enforced with one limiter each; a
// request passes only when both allow it (DESIGN.md).
//
// A window's count lives until the window ends; a sweep drops ended
// windows, so memory is bounded by the keys active in one window.
type limiter struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [64]limShard
}

type limShard struct {
	mu sync.Mutex
	m  map[limKey]*window
	n  int // Allow calls since the last sweep
}

type limKey struct {
	key   string
	class Class
}

type window struct {
	start  time.Time
	length time.Duration
	count  int
}

// Limiter counts requests per key in fixed windows of any length, for
// limits outside the route classes (the /auth/* endpoints).
type Limiter struct{ l *limiter }

// NewLimiter returns a Limiter on the clock now.
func NewLimiter(now func() time.Time) *Limiter { return &Limiter{newLimiter(now)} }

// Allow counts one request of key against lim and reports whether it is
// within the limit; when not, after how long the window ends. A zero
// Limit allows everything.
func (l *Limiter) Allow(key string, lim Limit) (bool, time.Duration) {
	return l.l.allow(key, ClassOther, lim)
}

func newLimiter(now func() time.Time) *limiter {
	l := &limiter{now: now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[limKey]*window)
	}
	return l
}

// allow counts one request of key on class c against lim, and reports whether it
// is within the limit; when not, after how long the window ends.
func (l *limiter) allow(key string, c Class, lim Limit) (bool, time.Duration) {
	if lim.N <= 0 || lim.Window <= 0 {
		return true, 0
	}
	now := l.now()
	start := now.Truncate(lim.Window)
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.n++; sh.n >= 4096 {
		sh.n = 0
		for k, w := range sh.m {
			if now.Sub(w.start) >= w.length {
				delete(sh.m, k)
			}
		}
	}
	k := limKey{key, c}
	w := sh.m[k]
	if w == nil {
		w = &window{start: start, length: lim.Window}
		sh.m[k] = w
	}
	if !w.start.Equal(start) || w.length != lim.Window {
		w.start, w.length, w.count = start, lim.Window, 0
	}
	if w.count >= lim.N {
		return false, start.Add(lim.Window).Sub(now)
	}
	w.count++
	return true, 0
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, for the
// Retry-After header and details.retryAfter.
func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
