package egress

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// numShards is the number of shards of the destination map; a power of two.
const numShards = 64

// shard is one part of the map from destination (MX address) to its state.
// Its lock is held only to find, create or delete an entry, never while
// waiting; lock order is shard, then destState.
type shard struct {
	mu sync.Mutex
	m  map[netip.Addr]*destState
}

func shardOf(a netip.Addr) int {
	b := a.As16()
	var h uint64
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211 // FNV-1a
	}
	return int(h >> 58) // top 6 bits: numShards = 64
}

// destState is everything about one destination: the pairs (egress address,
// dest) with their in-flight counts and cooldowns, the rate limiter and the
// Acquires waiting for a slot. Its mutex guards all of it.
type destState struct {
	mu      sync.Mutex
	deleted bool // swept from its shard: look it up again
	pairs   []pair
	rr      uint32 // round-robin offset for ties

	// The token bucket of the per-host rate cap. tokens may go negative:
	// each Acquire takes its token at once and sleeps until it is due.
	tokens float64
	last   time.Time

	// waiters wait for a concurrency slot, first in first out; a Release
	// signals the first (or all, when eligibility changed).
	waiters []*waiter
}

// pair is the state of one (egress address, destination) pair.
type pair struct {
	addr     netip.Addr
	inflight int
	until    time.Time // cooling while now is before until
	repeats  int       // cooldowns in a row without a success
	// cause is the outcome that started the cooldown (Greylisted,
	// RateLimited or Policy); a policy block during a cooldown makes it
	// Policy.
	cause Outcome
}

// waiter is an Acquire waiting for a slot. ch is signalled at most once per
// enqueueing, by whoever pops it from the queue.
type waiter struct {
	ch chan struct{}
}

// find returns the pair of egress address a, or nil. The pointer is valid
// until the pairs change (lock held, no append).
func (ds *destState) find(a netip.Addr) *pair {
	for i := range ds.pairs {
		if ds.pairs[i].addr == a {
			return &ds.pairs[i]
		}
	}
	return nil
}

// get returns the pair of egress address a, creating it.
func (ds *destState) get(a netip.Addr) *pair {
	if pr := ds.find(a); pr != nil {
		return pr
	}
	ds.pairs = append(ds.pairs, pair{addr: a})
	return &ds.pairs[len(ds.pairs)-1]
}

// take takes one token of the bucket at now and returns how long to wait
// until it is due (0: now). rate <= 0 is no cap.
func (ds *destState) take(now time.Time, rate, burst float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	if el := now.Sub(ds.last); el > 0 {
		ds.tokens = min(burst, ds.tokens+el.Seconds()*rate)
		ds.last = now
	}
	ds.tokens--
	if ds.tokens >= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-ds.tokens / rate * float64(time.Second)))
}

// giveBack returns a token taken by an Acquire that did not use it.
func (ds *destState) giveBack(rate, burst float64) {
	if rate > 0 {
		ds.tokens = min(burst, ds.tokens+1)
	}
}

// bucketFull reports whether the bucket holds burst tokens at now, so it
// can be forgotten and made again full.
func (ds *destState) bucketFull(now time.Time, rate, burst float64) bool {
	return rate <= 0 || ds.tokens+now.Sub(ds.last).Seconds()*rate >= burst
}

// enqueue adds a waiter, at the front for one that was woken and lost the
// slot to another Acquire, so it keeps its turn.
func (ds *destState) enqueue(front bool) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	if front {
		ds.waiters = append(ds.waiters, nil)
		copy(ds.waiters[1:], ds.waiters)
		ds.waiters[0] = w
	} else {
		ds.waiters = append(ds.waiters, w)
	}
	return w
}

// remove takes w out of the queue and reports whether it was there (false:
// it was already signalled).
func (ds *destState) remove(w *waiter) bool {
	for i, x := range ds.waiters {
		if x == w {
			ds.waiters = append(ds.waiters[:i], ds.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// abandon takes out a waiter that gives up. If it was signalled meanwhile,
// the wake-up passes to the next one: the slot it announced is still free.
func (ds *destState) abandon(w *waiter) {
	ds.mu.Lock()
	if !ds.remove(w) {
		ds.wakeOne()
	}
	ds.mu.Unlock()
}

// wakeOne signals the first waiter: a slot is free.
func (ds *destState) wakeOne() {
	if len(ds.waiters) == 0 {
		return
	}
	w := ds.waiters[0]
	ds.waiters[0] = nil
	ds.waiters = ds.waiters[1:]
	w.ch <- struct{}{}
}

// wakeAll signals every waiter: eligibility changed (a cooldown began, the
// pool changed), each must look again.
func (ds *destState) wakeAll() {
	for _, w := range ds.waiters {
		w.ch <- struct{}{}
	}
	clear(ds.waiters)
	ds.waiters = ds.waiters[:0]
}

// lockDest returns the state of dest, created if need be, locked.
func (p *Pool) lockDest(dest netip.Addr, now time.Time) *destState {
	sh := &p.shards[shardOf(dest)]
	for {
		sh.mu.Lock()
		ds := sh.m[dest]
		if ds == nil {
			ds = &destState{tokens: p.burst, last: now}
			sh.m[dest] = ds
		}
		sh.mu.Unlock()
		ds.mu.Lock()
		if !ds.deleted {
			return ds
		}
		ds.mu.Unlock()
	}
}

// lockDestIfAny returns the state of dest locked, or nil when there is none.
func (p *Pool) lockDestIfAny(dest netip.Addr) *destState {
	sh := &p.shards[shardOf(dest)]
	for {
		sh.mu.Lock()
		ds := sh.m[dest]
		sh.mu.Unlock()
		if ds == nil {
			return nil
		}
		ds.mu.Lock()
		if !ds.deleted {
			return ds
		}
		ds.mu.Unlock()
	}
}

// eachDest calls f with every destination's state locked, shard by shard.
// f returns true to delete the entry.
func (p *Pool) eachDest(f func(dest netip.Addr, ds *destState) (del bool)) {
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		for dest, ds := range sh.m {
			ds.mu.Lock()
			if f(dest, ds) {
				ds.deleted = true
				delete(sh.m, dest)
			}
			ds.mu.Unlock()
		}
		sh.mu.Unlock()
	}
}

// wakeAllDests wakes every waiter of every destination, after a change of
// the pool (addresses, disabled flags, Close).
func (p *Pool) wakeAllDests() {
	p.eachDest(func(_ netip.Addr, ds *destState) bool {
		ds.wakeAll()
		return false
	})
}

// sweep forgets what no longer matters at now: pairs with nothing in flight,
// no cooldown and no backoff to remember, and destinations with no pair,
// no waiter and a full bucket. It returns the number of cooling pairs.
func (p *Pool) sweep(now time.Time) (cooling int) {
	p.eachDest(func(_ netip.Addr, ds *destState) bool {
		keep := ds.pairs[:0]
		for _, pr := range ds.pairs {
			if pr.until.After(now) {
				cooling++
			}
			if pr.inflight > 0 || pr.until.After(now) || (pr.repeats > 0 && now.Sub(pr.until) <= p.opts.MaxCooldown) {
				keep = append(keep, pr)
			}
		}
		clear(ds.pairs[len(keep):])
		ds.pairs = keep
		return len(ds.pairs) == 0 && len(ds.waiters) == 0 && ds.bucketFull(now, p.rate, p.burst)
	})
	return cooling
}
