package probe

import (
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// catchAllCache remembers per domain whether it accepts any local part, so
// that a domain is probed with a random local part once per TTL, not once
// per address. It is bounded: when full, the oldest half is dropped.
//
// In a fleet (Options.Facts) a miss asks the fleet's store, and a finding
// is shared with it: the other boxes do not probe the domain again.
type catchAllCache struct {
	mu  sync.Mutex
	max int
	ttl time.Duration
	m   map[string]catchAllEntry
	seq uint64
	// seed makes each process's probe local parts its own.
	seed maphash.Seed

	facts  Facts // nil on one box
	writer *factWriter
	log    *slog.Logger
}

type catchAllEntry struct {
	v   CatchAll
	exp time.Time
	seq uint64
}

func newCatchAllCache(max int, ttl time.Duration, facts Facts, log *slog.Logger) *catchAllCache {
	c := &catchAllCache{max: max, ttl: ttl, m: make(map[string]catchAllEntry), seed: maphash.MakeSeed(), facts: facts, log: log}
	if facts != nil {
		c.writer = newFactWriter(facts, log)
	}
	return c
}

func (c *catchAllCache) get(domain string, now time.Time) CatchAll {
	c.mu.Lock()
	e, ok := c.m[domain]
	c.mu.Unlock()
	if ok && !now.After(e.exp) {
		return e.v
	}
	if c.facts == nil {
		return CatchAllUnknown
	}
	// Ask the fleet; remember a miss for factMissTTL (an Unknown entry).
	v, exp, found := lookupFact(c.facts, c.log, FactCatchAll, domain)
	ca := CatchAllUnknown
	switch {
	case found && v == "yes" && exp.After(now):
		ca = CatchAllYes
	case found && v == "no" && exp.After(now):
		ca = CatchAllNo
	default:
		exp = now.Add(factMissTTL)
	}
	c.store(domain, ca, exp, now)
	return ca
}

func (c *catchAllCache) put(domain string, v CatchAll, now time.Time) {
	c.store(domain, v, now.Add(c.ttl), now)
	if c.writer != nil && v != CatchAllUnknown {
		val := "no"
		if v == CatchAllYes {
			val = "yes"
		}
		c.writer.put(fact{kind: FactCatchAll, key: domain, value: val, expires: now.Add(c.ttl)})
	}
}

func (c *catchAllCache) store(domain string, v CatchAll, exp, now time.Time) {
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
	c.m[domain] = catchAllEntry{v: v, exp: exp, seq: c.seq}
}

// probeLocal is the local part of a domain's catch-all probe: random per
// process, but the same for a domain every time, so that a greylisting
// server, which greylists the probe address too, sees the same (client,
// recipient) pair on the retry and lets it through, as it does the real
// recipient.
func (c *catchAllCache) probeLocal(domain string) string {
	return "verifyd-" + strconv.FormatUint(maphash.String(c.seed, domain), 36)
}
