package probe

import (
	"hash/maphash"
	"strconv"
	"sync"
	"time"
)

// catchAllCache remembers per domain whether it accepts any local part, so
// that a domain is probed with a random local part once per TTL, not once
// per address. It is bounded: when full, the oldest half is dropped.
type catchAllCache struct {
	mu  sync.Mutex
	max int
	ttl time.Duration
	m   map[string]catchAllEntry
	seq uint64
	// seed makes each process's probe local parts its own.
	seed maphash.Seed
}

type catchAllEntry struct {
	v   CatchAll
	exp time.Time
	seq uint64
}

func newCatchAllCache(max int, ttl time.Duration) *catchAllCache {
	return &catchAllCache{max: max, ttl: ttl, m: make(map[string]catchAllEntry), seed: maphash.MakeSeed()}
}

func (c *catchAllCache) get(domain string, now time.Time) CatchAll {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[domain]
	if !ok || now.After(e.exp) {
		return CatchAllUnknown
	}
	return e.v
}

func (c *catchAllCache) put(domain string, v CatchAll, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[domain]; !ok && len(c.m) >= c.max {
		// Drop the older half: cheap, rare, and keeps hot domains.
		cut := c.seq - uint64(len(c.m)/2)
		for k, e := range c.m {
			if e.seq <= cut || now.After(e.exp) {
				delete(c.m, k)
			}
		}
	}
	c.seq++
	c.m[domain] = catchAllEntry{v: v, exp: now.Add(c.ttl), seq: c.seq}
}

// probeLocal is the local part of a domain's catch-all probe: random per
// process, but the same for a domain every time, so that a greylisting
// server, which greylists the probe address too, sees the same (client,
// recipient) pair on the retry and lets it through, as it does the real
// recipient.
func (c *catchAllCache) probeLocal(domain string) string {
	return "verifyd-" + strconv.FormatUint(maphash.String(c.seed, domain), 36)
}
