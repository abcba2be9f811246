package postgres

import (
	"sync"
	"time"
)

// readCache keeps records this box read (API keys, accounts' plans) for
// Options.KeyCacheTTL, so that a request does not read them again from
// the database: one changed on another box applies here within that
// bound, one changed on this box at once (forget). gen counts this box's
// changes: a record read before one is not kept, it may be the old one.
type readCache[V any] struct {
	mu  sync.Mutex
	m   map[string]cached[V]
	gen uint64
}

type cached[V any] struct {
	v  V
	at time.Time // when read, by this process's clock
}

// maxCached bounds a readCache; when full it starts again.
const maxCached = 100_000

// get returns the record kept for id when read less than ttl ago, and
// the generation to put one read now with.
func (c *readCache[V]) get(id string, ttl time.Duration) (v V, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || time.Since(e.at) >= ttl {
		return v, c.gen, false
	}
	return e.v, c.gen, true
}

// put keeps v for id, unless a record changed on this box since gen.
func (c *readCache[V]) put(id string, v V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]cached[V]{}
	}
	c.m[id] = cached[V]{v: v, at: time.Now()}
}

// forget drops the record kept for id: it changed on this box.
func (c *readCache[V]) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.gen++
	c.mu.Unlock()
}
