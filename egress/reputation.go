package egress

import (
	"fmt"
	"net/netip"
	"time"
)

// An address's reputation is judged against the rest of the pool: a
// destination that refuses one address by policy is as likely to be one
// odd server as a sign of a listing, and a busy box meets a few odd servers
// every minute. An address earns a reputation warning when, within the last
// PolicyBlockWindow:
//
//  1. policy blocks came from at least PolicyBlockThreshold distinct
//     destinations (MX addresses): one server refusing again and again is
//     that server's policy, not the address's name;
//  2. at least ReputationShare of its sessions ended in a policy block;
//  3. that share is at least twice the share of the rest of the pool's
//     sessions (when the rest had any): a destination that refuses every
//     prober refuses the whole pool alike, and says nothing of one address.
//
// One warning per address per window: the next comes no sooner than a
// window after it. Sessions are counted in repBuckets buckets of a tenth of
// the window each, so the window is the last one to within a tenth.

// repBuckets is the number of buckets a window is cut into.
const repBuckets = 10

// maxRepDests bounds the destinations an address remembers as having
// blocked it; beyond it the oldest is forgotten.
const maxRepDests = 64

// reputation is one address's sessions and policy blocks over the last
// window; source.mu guards it.
type reputation struct {
	epoch    int64 // the newest bucket's number: the time divided by the bucket width
	sessions [repBuckets]uint32
	blocked  [repBuckets]uint32
	dests    map[netip.Addr]time.Time // destinations that blocked it, at their last block
	warnedAt time.Time                // of the last warning
}

// roll moves the buckets to now, emptying those that fell out. Bucket
// numbers count from base, the pool's start, by the monotonic clock: a step
// of the wall clock neither freezes nor stretches the window.
func (r *reputation) roll(now, base time.Time, width time.Duration) {
	e := int64(now.Sub(base) / width)
	if e <= r.epoch {
		return
	}
	if e-r.epoch >= repBuckets {
		r.sessions, r.blocked = [repBuckets]uint32{}, [repBuckets]uint32{}
	} else {
		for i := r.epoch + 1; i <= e; i++ {
			r.sessions[i%repBuckets], r.blocked[i%repBuckets] = 0, 0
		}
	}
	r.epoch = e
}

// note counts a session that ended at now, blocked by dest's policy or not.
func (r *reputation) note(now, base time.Time, window time.Duration, dest netip.Addr, blocked bool) {
	width := bucketWidth(window)
	r.roll(now, base, width)
	i := r.epoch % repBuckets
	r.sessions[i]++
	if !blocked {
		return
	}
	r.blocked[i]++
	if r.dests == nil {
		r.dests = map[netip.Addr]time.Time{}
	}
	r.prune(now, window)
	if _, ok := r.dests[dest]; !ok && len(r.dests) >= maxRepDests {
		var oldest netip.Addr
		var at time.Time
		for d, t := range r.dests {
			if at.IsZero() || t.Before(at) {
				oldest, at = d, t
			}
		}
		delete(r.dests, oldest)
	}
	r.dests[dest] = now
}

// prune forgets the destinations whose last block is out of the window.
func (r *reputation) prune(now time.Time, window time.Duration) {
	for d, t := range r.dests {
		if now.Sub(t) >= window {
			delete(r.dests, d)
		}
	}
}

// totals are the sessions and the blocked ones within the window ending at
// now.
func (r *reputation) totals(now, base time.Time, window time.Duration) (sessions, blocked uint64) {
	r.roll(now, base, bucketWidth(window))
	for i := range repBuckets {
		sessions += uint64(r.sessions[i])
		blocked += uint64(r.blocked[i])
	}
	return sessions, blocked
}

func bucketWidth(window time.Duration) time.Duration {
	return max(window/repBuckets, time.Nanosecond)
}

// checkReputation runs after src's session ended in a policy block at now:
// it returns the reputation event when src earns one (see the rules
// above), and marks it warned. No lock may be held: it takes src.mu and
// then, one at a time, every other address's.
func (p *Pool) checkReputation(src *source, now time.Time) (Event, bool) {
	window := p.opts.PolicyBlockWindow
	src.mu.Lock()
	src.rep.prune(now, window)
	dests := len(src.rep.dests)
	s, k := src.rep.totals(now, p.started, window)
	recent := !src.rep.warnedAt.IsZero() && now.Sub(src.rep.warnedAt) < window
	src.mu.Unlock()
	if recent || dests < p.opts.PolicyBlockThreshold || s == 0 {
		return Event{}, false
	}
	share := float64(k) / float64(s)
	if share < p.opts.ReputationShare {
		return Event{}, false
	}
	var rs, rk uint64
	for _, o := range *p.sources.Load() {
		if o == src {
			continue
		}
		o.mu.Lock()
		a, b := o.rep.totals(now, p.started, window)
		o.mu.Unlock()
		rs, rk = rs+a, rk+b
	}
	rest := 0.0
	if rs > 0 {
		rest = float64(rk) / float64(rs)
		if share < 2*rest {
			return Event{}, false
		}
	}
	src.mu.Lock()
	if !src.rep.warnedAt.IsZero() && now.Sub(src.rep.warnedAt) < window {
		src.mu.Unlock()
		return Event{}, false // a concurrent block warned first
	}
	src.rep.warnedAt = now
	src.mu.Unlock()
	src.m.reputation.Inc()
	reason := fmt.Sprintf("%d of %d sessions refused by policy (%.0f%%) by %d destinations within %s", k, s, 100*share, dests, window)
	if rs > 0 {
		reason += fmt.Sprintf("; the rest of the pool %d of %d (%.0f%%)", rk, rs, 100*rest)
	}
	return Event{Kind: EventReputation, Addr: src.addr, At: now, Reason: reason}, true
}
