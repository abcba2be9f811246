package resolver

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// key identifies a cache entry and an in-flight query: the normalised name
// and the query type.
type key struct {
	name  string
	qtype uint16
}

// entry is one lookup outcome: the raw answer, its typed view, and the
// errors to return with them. An entry is immutable once built, apart from
// ref (CLOCK's reference bit), refreshing, and slot (guarded by the
// shard's lock), so a hit reads it without holding a lock.
type entry struct {
	key key
	// ans is the raw answer; its Meta.TTL is filled in on return.
	ans Answer
	// typed is *MXResult, *IPResult, ... for the types that have one.
	typed any
	// err goes with ans, typedErr with typed (they differ when the typed
	// view found no usable record in an answer); nil for StatusAnswer.
	err, typedErr error
	// expires is when the entry stops being fresh, staleUntil when it may
	// no longer be served even stale; unix nanoseconds of Options.Now.
	expires, staleUntil int64
	// refreshAt is when a hit starts a background refresh (Options.Prefetch:
	// the last tenth of the TTL); 0 for never. refreshing is set by the
	// hit that starts it, so that one hit does.
	refreshAt  int64
	refreshing atomic.Bool
	// size is the estimated memory of the entry, in bytes.
	size int64

	ref  atomic.Bool
	slot int
}

// cache is a sharded map of entries. Each shard evicts by CLOCK: a hit
// sets the entry's reference bit; the hand clears set bits and evicts the
// first entry found without one (or any entry past staleUntil).
type cache struct {
	seed   maphash.Seed
	mask   uint64
	shards []cacheShard
}

type cacheShard struct {
	mu         sync.RWMutex
	m          map[key]*entry
	ring       []*entry
	hand       int
	bytes      int64
	maxEntries int
	maxBytes   int64    // 0: no bound
	_          [64]byte // keep shards' locks on separate cache lines
}

// newCache makes a cache of at most entries entries and, if bytes > 0, at
// most bytes estimated bytes. The bounds are split among the shards, so
// they hold exactly in total; small caches get one shard, and no shard
// gets fewer than 512 entries or 64 KiB.
func newCache(entries int, bytes int64) *cache {
	n := 1
	for n < 64 && entries/(n*2) >= 512 && (bytes == 0 || bytes/int64(n*2) >= 64<<10) {
		n *= 2
	}
	c := &cache{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]cacheShard, n)}
	for i := range c.shards {
		s := &c.shards[i]
		s.maxEntries = entries / n
		if i < entries%n {
			s.maxEntries++
		}
		if bytes > 0 {
			s.maxBytes = max(bytes/int64(n), 1)
		}
		s.m = make(map[key]*entry)
	}
	return c
}

func (c *cache) hash(k key) uint64 {
	return maphash.String(c.seed, k.name) ^ uint64(k.qtype)*0x9e3779b97f4a7c15
}

// get returns the entry for k, fresh or not, or nil.
func (c *cache) get(k key, h uint64) *entry {
	s := &c.shards[h&c.mask]
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	return e
}

// put inserts e, replacing an entry of the same key, evicting as needed.
// now is used to evict dead entries first.
func (c *cache) put(e *entry, h uint64, now int64) {
	s := &c.shards[h&c.mask]
	if s.maxBytes > 0 && e.size > s.maxBytes {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[e.key]; old != nil {
		e.slot = old.slot
		s.ring[e.slot] = e
		s.m[e.key] = e
		s.bytes += e.size - old.size
		for s.maxBytes > 0 && s.bytes > s.maxBytes && s.evictOne(now, e) {
		}
		return
	}
	for len(s.ring) >= s.maxEntries || s.maxBytes > 0 && s.bytes+e.size > s.maxBytes {
		if !s.evictOne(now, nil) {
			return
		}
	}
	e.slot = len(s.ring)
	s.ring = append(s.ring, e)
	s.m[e.key] = e
	s.bytes += e.size
	cacheEntries.Add(1)
}

// evictOne removes one entry other than keep, and reports whether it did.
func (s *cacheShard) evictOne(now int64, keep *entry) bool {
	for steps := 2*len(s.ring) + 1; steps > 0; steps-- {
		if s.hand >= len(s.ring) {
			s.hand = 0
			if len(s.ring) == 0 {
				return false
			}
		}
		v := s.ring[s.hand]
		if v != keep && (now >= v.staleUntil || !v.ref.Swap(false)) {
			s.remove(s.hand)
			cacheEvictions.Inc()
			return true
		}
		s.hand++
	}
	return false
}

// remove drops ring[i], moving the last entry into its slot.
func (s *cacheShard) remove(i int) {
	v := s.ring[i]
	last := len(s.ring) - 1
	s.ring[i] = s.ring[last]
	s.ring[i].slot = i
	s.ring[last] = nil
	s.ring = s.ring[:last]
	delete(s.m, v.key)
	s.bytes -= v.size
	cacheEntries.Add(-1)
}

// len returns the number of entries.
func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.ring)
		s.mu.RUnlock()
	}
	return n
}

// bytes returns the estimated memory of the entries.
func (c *cache) bytes() int64 {
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += s.bytes
		s.mu.RUnlock()
	}
	return n
}

// purge drops every entry.
func (c *cache) purge() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		cacheEntries.Add(-int64(len(s.ring)))
		clear(s.m)
		clear(s.ring)
		s.ring = s.ring[:0]
		s.bytes = 0
		s.mu.Unlock()
	}
}
