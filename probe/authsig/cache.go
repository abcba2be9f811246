package authsig

import (
	"sync"
	"time"
)

// ttlCache is a bounded map of values that expire. When it is full, a put
// of a new key first drops the expired entries and the older half of the
// rest: cheap, rare, and it keeps the domains in use.
type ttlCache[V any] struct {
	mu  sync.Mutex
	max int
	m   map[string]ttlEntry[V]
	seq uint64
}

type ttlEntry[V any] struct {
	v       V
	exp     time.Time
	refresh time.Time // when a get asks for a refresh; zero: never, or asked
	seq     uint64
}

func newTTLCache[V any](max int) *ttlCache[V] {
	return &ttlCache[V]{max: max, m: make(map[string]ttlEntry[V])}
}

// get returns the value of key if it has not expired at now.
func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.exp) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// getRefresh is get that also reports, to the first caller only, that the
// entry is in the last tenth of its TTL (put with refresh): time to renew
// it while it still serves.
func (c *ttlCache[V]) getRefresh(key string, now time.Time) (v V, ok, refresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.exp) {
		return v, false, false
	}
	if !e.refresh.IsZero() && !now.Before(e.refresh) {
		e.refresh = time.Time{}
		c.m[key] = e
		refresh = true
	}
	return e.v, true, refresh
}

// put stores v under key until now+ttl; with refresh, getRefresh reports
// the last tenth of that time.
func (c *ttlCache[V]) put(key string, v V, now time.Time, ttl time.Duration, refresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, v, now, ttl)
	if refresh {
		e := c.m[key]
		e.refresh = e.exp.Add(-ttl / 10)
		c.m[key] = e
	}
}

// update changes the value of key with f, atomically: f gets the current
// value (the zero value when there is none or it expired), and its result
// is kept until now+ttl.
func (c *ttlCache[V]) update(key string, now time.Time, ttl time.Duration, f func(V) V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur V
	if e, ok := c.m[key]; ok && now.Before(e.exp) {
		cur = e.v
	}
	c.putLocked(key, f(cur), now, ttl)
}

func (c *ttlCache[V]) putLocked(key string, v V, now time.Time, ttl time.Duration) {
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		cut := c.seq - uint64(len(c.m)/2)
		for k, e := range c.m {
			if e.seq <= cut || !now.Before(e.exp) {
				delete(c.m, k)
			}
		}
	}
	c.seq++
	c.m[key] = ttlEntry[V]{v: v, exp: now.Add(ttl), seq: c.seq}
}
