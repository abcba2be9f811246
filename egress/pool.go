package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// recentLen is the number of recent outcomes kept per address.
const recentLen = 32

// Pool is the set of egress addresses. Its methods are safe for concurrent
// use.
type Pool struct {
	opts  Options
	now   func() time.Time
	log   *slog.Logger
	rate  float64 // new sessions/s per destination; 0: no cap
	burst float64
	// started is the pool's start by its clock: reputation buckets count
	// from it.
	started time.Time

	// dial makes a connection for Lease.DialContext; tests replace it.
	dial func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error)

	// mu serialises changes of the address list; readers load sources.
	mu      sync.Mutex
	sources atomic.Pointer[[]*source] // in configured order, draining ones last

	shards [numShards]shard

	dirty     atomic.Bool // state changed since the last save
	saveMu    sync.Mutex
	lastCount int64 // cooling pairs last added to activeCooldowns; under saveMu

	helo heloNames // per-address HELO names (helo.go)

	// waitHooks are OnWait's functions.
	waitHooks atomic.Pointer[[]func(dest netip.Addr)]

	closed atomic.Bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// source is one egress address of the pool.
type source struct {
	addr  netip.Addr
	local *net.TCPAddr // nil for the system address
	m     *addrMetrics

	inflight atomic.Int64
	draining atomic.Bool
	disabled atomic.Bool
	sessions atomic.Uint64
	totals   [numOutcomes]atomic.Uint64
	removed  bool // gone from the pool; under Pool.mu

	mu         sync.Mutex
	reason     string    // why disabled
	findings   []string  // of the last self-check (SetFindings)
	checkedAt  time.Time // when; zero: never checked
	disabledAt time.Time // when
	recent     [recentLen]Recent
	nrecent    int        // outcomes ever pushed into recent
	rep        reputation // sessions and policy blocks within the window
}

// serves reports whether s can reach dest: same family, or the system
// address, which serves both.
func (s *source) serves(dest netip.Addr) bool {
	return !s.addr.IsValid() || s.addr.Is4() == dest.Is4()
}

func newSource(a netip.Addr) *source {
	s := &source{addr: a, m: metricsFor(a)}
	if a.IsValid() {
		s.local = &net.TCPAddr{IP: a.AsSlice()}
	}
	s.m.disabled.Set(0)
	return s
}

// New makes a pool from opts (Defaults and Validate are applied to a copy)
// and loads the state saved in opts.Store. It starts the background loop;
// Close stops it.
func New(opts Options) (*Pool, error) {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	addrs, _ := normalizeAddrs(opts.Addresses)
	opts.Addresses = addrs
	p := &Pool{
		opts: opts,
		now:  opts.Now,
		log:  opts.Logger.With("pkg", "egress"),
		done: make(chan struct{}),
		dial: func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
			return d.DialContext(ctx, network, address)
		},
	}
	p.started = p.now()
	if opts.MaxRatePerHost > 0 {
		p.rate = opts.MaxRatePerHost
		p.burst = max(1, opts.MaxRatePerHost)
	}
	for i := range p.shards {
		p.shards[i].m = make(map[netip.Addr]*destState)
	}
	srcs := make([]*source, len(addrs))
	for i, a := range addrs {
		srcs[i] = newSource(a)
	}
	p.sources.Store(&srcs)
	p.opts.HeloName = normalizeHelo(p.opts.HeloName)
	p.opts.DefaultHeloName = normalizeHelo(p.opts.DefaultHeloName)
	p.SetHeloNames(opts.HeloNames)
	if err := p.load(); err != nil {
		return nil, err
	}
	p.wg.Add(1)
	go p.loop()
	return p, nil
}

// Acquire returns a lease on a pool address for one SMTP session to the MX
// address dest. Concurrency and rate are capped per MX IP address (the dial
// target), not per host name: the caller resolves the name and acquires for
// the address it dials.
//
// Eligible are the addresses of dest's family (the system address serves
// both) that are neither disabled nor draining; none → ErrNoAddress. Those
// cooling for dest are skipped; when all are cooling, Acquire returns a
// *CoolingError (errors.Is ErrAllCooling) with the earliest RetryAt at once:
// it never waits out a cooldown, the caller decides against its budget. Of
// the others, prefer is taken when it has a free slot (greylist triplet
// affinity; the zero prefer means none), else the one with the fewest
// sessions in flight to dest, ties broken round-robin. When every one is at
// MaxConnsPerHost, Acquire waits for a Release (or for the first cooldown
// of an eligible address to end); then it takes a rate token of dest and
// sleeps until the token is due. Both waits end with ctx (its error is
// returned) or Close (ErrClosed).
func (p *Pool) Acquire(ctx context.Context, dest, prefer netip.Addr) (*Lease, error) {
	return p.acquire(ctx, dest, prefer, pickPrefer)
}

// AcquireFrom is Acquire restricted to the pool address from: it waits for
// one of from's slots, returns a *CoolingError while from is cooling for
// dest, and ErrNoAddress when from is not usable (not in the pool, disabled,
// draining, or of the wrong family). A greylisted recipient is retried with
// it: greylisters key on the client address, so a retry from another
// address would be greylisted anew.
func (p *Pool) AcquireFrom(ctx context.Context, dest, from netip.Addr) (*Lease, error) {
	return p.acquire(ctx, dest, from.Unmap(), pickOnly)
}

// AcquireExcept is Acquire from any pool address but not: ErrNoAddress when
// no other address can serve dest, a *CoolingError while every other one
// cools for it. A refusal that may be about the address that met it is
// asked again from another one with it.
func (p *Pool) AcquireExcept(ctx context.Context, dest, not netip.Addr) (*Lease, error) {
	return p.acquire(ctx, dest, not.Unmap(), pickExcept)
}

// pickMode is what pick does with its prefer address.
type pickMode uint8

const (
	pickPrefer pickMode = iota // prefer it when it has a free slot
	pickOnly                   // it is the sole candidate
	pickExcept                 // any address but it
)

func (p *Pool) acquire(ctx context.Context, dest, prefer netip.Addr, mode pickMode) (*Lease, error) {
	dest = dest.WithZone("").Unmap()
	if !dest.IsValid() || dest.IsUnspecified() {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDest, dest)
	}
	prefer = prefer.Unmap()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var waitStart time.Time // set on the first wait
	front := false
	for {
		if p.closed.Load() {
			return nil, ErrClosed
		}
		now := p.now()
		ds := p.lockDest(dest, now)
		c := p.pick(ds, dest, prefer, mode, now)
		if c.src == nil {
			switch {
			case c.eligible == 0:
				ds.mu.Unlock()
				noAddress.Inc()
				return nil, fmt.Errorf("%w %s", ErrNoAddress, dest)
			case c.cooling == c.eligible:
				ds.mu.Unlock()
				allCooling.Inc()
				return nil, &CoolingError{Dest: dest, RetryAt: c.earliest, Cause: c.cause}
			}
			// Wait for a Release, or for the first cooldown of an
			// eligible address to end, whichever comes first.
			var cooled time.Duration
			if c.cooling > 0 {
				cooled = c.earliest.Sub(now)
			}
			w := ds.enqueue(front)
			ds.mu.Unlock()
			// Every time it queues, a wake-up's included: a session
			// kept while it was between two waits holds a slot too.
			if hooks := p.waitHooks.Load(); hooks != nil {
				for _, f := range *hooks {
					f(dest)
				}
			}
			if waitStart.IsZero() {
				waitStart = time.Now()
			}
			if err := p.waitSlot(ctx, ds, w, cooled); err != nil {
				return nil, err
			}
			front = true
			continue
		}
		src := c.src
		ds.get(src.addr).inflight++
		src.inflight.Add(1)
		if src.draining.Load() {
			// SetAddresses removed src after pick: give the slot back. The
			// order (count, then check; SetAddresses: flag, then count)
			// makes sure one of the two sees the other.
			p.undo(ds, src, false)
			continue
		}
		wait := ds.take(now, p.rate, p.burst)
		ds.rr++
		ds.mu.Unlock()
		if wait > 0 {
			if waitStart.IsZero() {
				waitStart = time.Now()
			}
			err := p.opts.Sleep(ctx, wait)
			if err == nil && p.closed.Load() {
				err = ErrClosed
			}
			ds.mu.Lock()
			if err == nil && p.usable(ds, src, p.now()) {
				ds.mu.Unlock()
			} else {
				// Given up, or src went cooling, disabled or draining during
				// the wait: return the slot and the token.
				p.undo(ds, src, true)
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		src.sessions.Add(1)
		src.m.sessions.Inc()
		src.m.inflight.Inc()
		if !waitStart.IsZero() {
			acquireWait.UpdateDuration(waitStart)
		}
		return &Lease{p: p, ds: ds, src: src, dest: dest}, nil
	}
}

// choice is the result of pick.
type choice struct {
	src      *source // nil: none has a free slot
	eligible int     // of dest's family, not disabled or draining
	cooling  int     // of the eligible, those cooling for dest
	earliest time.Time
	cause    Outcome // of the cooldown that ends at earliest
}

// pick chooses the address for a session to dest; ds is locked. mode says
// what prefer is: preferred, the sole candidate, or excluded.
func (p *Pool) pick(ds *destState, dest, prefer netip.Addr, mode pickMode, now time.Time) choice {
	srcs := *p.sources.Load()
	n := len(srcs)
	var c choice
	preferBusy := false
	best := p.opts.MaxConnsPerHost // loads must be below it
	start := int(ds.rr % uint32(n))
	for i := range n {
		s := srcs[(start+i)%n]
		if mode == pickOnly && s.addr != prefer || mode == pickExcept && s.addr == prefer {
			continue
		}
		if !s.serves(dest) || s.draining.Load() || s.disabled.Load() {
			continue
		}
		c.eligible++
		load := 0
		if pr := ds.find(s.addr); pr != nil {
			if pr.until.After(now) {
				c.cooling++
				if c.earliest.IsZero() || pr.until.Before(c.earliest) {
					c.earliest, c.cause = pr.until, pr.cause
				}
				continue
			}
			load = pr.inflight
		}
		if load >= p.opts.MaxConnsPerHost {
			if s.addr == prefer {
				preferBusy = true
			}
			continue
		}
		if s.addr == prefer {
			c.src = s
			return c
		}
		if load < best {
			c.src, best = s, load
		}
	}
	if preferBusy {
		// The preferred address is usable but full: wait for one of its
		// slots rather than take another address. A greylisted recipient
		// retried from a new address is greylisted anew (greylisters key
		// on the client address), so switching would waste the wait.
		c.src = nil
	}
	return c
}

// usable reports whether a lease on src for ds's destination may still go
// ahead at now; ds is locked.
func (p *Pool) usable(ds *destState, src *source, now time.Time) bool {
	if src.draining.Load() || src.disabled.Load() {
		return false
	}
	pr := ds.find(src.addr)
	return pr == nil || !pr.until.After(now)
}

// undo gives back a slot taken by an Acquire that does not return it (and
// its rate token if taken). ds is locked; undo unlocks it.
func (p *Pool) undo(ds *destState, src *source, token bool) {
	ds.get(src.addr).inflight--
	if token {
		ds.giveBack(p.rate, p.burst)
	}
	ds.wakeOne()
	ds.mu.Unlock()
	p.sourceDone(src)
}

// waitSlot waits for w to be signalled, for cooled (when positive: a
// cooldown ends, look again), for ctx to end or for the pool to close.
func (p *Pool) waitSlot(ctx context.Context, ds *destState, w *waiter, cooled time.Duration) error {
	var expired <-chan time.Time
	if cooled > 0 {
		t := time.NewTimer(cooled)
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-w.ch:
		return nil
	case <-expired:
		ds.abandon(w)
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.done:
		err = ErrClosed
	}
	ds.abandon(w)
	return err
}

// sourceDone counts one session of src less, and removes src from the pool
// when it was its last and src is draining.
func (p *Pool) sourceDone(src *source) {
	if src.inflight.Add(-1) == 0 && src.draining.Load() {
		p.finishDrain(src)
	}
}

// Lease is the right to run one SMTP session from one pool address to one
// destination. Release it exactly once.
type Lease struct {
	p        *Pool
	ds       *destState // stays in its shard while the lease holds a slot
	src      *source
	dest     netip.Addr
	released atomic.Bool
}

// Addr is the leased source address; the zero Addr is the system address.
func (l *Lease) Addr() netip.Addr { return l.src.addr }

// Dest is the destination the lease is for.
func (l *Lease) Dest() netip.Addr { return l.dest }

// Contended reports whether Acquires wait for a slot to the lease's
// destination: a session kept open for more work would keep its slot
// from them, so it should end and release the lease instead. One that
// starts to wait later calls the pool's OnWait functions.
func (l *Lease) Contended() bool {
	l.ds.mu.Lock()
	defer l.ds.mu.Unlock()
	return len(l.ds.waiters) > 0
}

// OnWait adds f to the functions called when an Acquire for dest starts
// to wait for a slot (every usable address at Options.MaxConnsPerHost),
// outside the pool's locks: whoever holds leases to dest idle (sessions
// kept open for more work) ends them, so that the Acquire need not wait
// for them to expire.
func (p *Pool) OnWait(f func(dest netip.Addr)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hooks []func(netip.Addr)
	if old := p.waitHooks.Load(); old != nil {
		hooks = append(hooks, *old...)
	}
	hooks = append(hooks, f)
	p.waitHooks.Store(&hooks)
}

// Succeeded records a transaction that went well on a session that stays
// open for more work (a kept session, whose Release comes later): the
// pair's backoff starts over now, as Release(OutcomeOK) does. Without it
// a recipient greylisted after a success on the same pair, before the
// kept session's Release, cooled the pair twice as long (the backoff of
// the greylisting before the success).
func (l *Lease) Succeeded() {
	if l.released.Load() {
		return
	}
	l.ds.mu.Lock()
	defer l.ds.mu.Unlock()
	l.ds.get(l.src.addr).repeats = 0
}

// Usable reports whether a new session could go ahead on the lease's
// address and destination now: the lease is not released, the address is
// neither draining nor disabled, and the pair is not cooling. A session
// kept open for more work asks it before each use: what an Acquire would
// refuse, it does not do either.
func (l *Lease) Usable() bool {
	if l.released.Load() {
		return false
	}
	l.ds.mu.Lock()
	defer l.ds.mu.Unlock()
	return l.p.usable(l.ds, l.src, l.p.now())
}

// DialContext connects to address ("ip:port", the lease's destination) from
// the leased source address, within Options.ConnectTimeout. It refuses
// another host (ErrWrongDestination), a non-TCP network and a released
// lease. When the source address cannot be bound (EADDRNOTAVAIL: it is not
// configured on this host) the pool disables it, with an EventDisabled.
// It satisfies smtpclient.Dialer.
func (l *Lease) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if l.released.Load() {
		return nil, ErrReleased
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("egress: dial %s %s: network not supported", network, address)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %q: %w", address, err)
	}
	if ap.Addr().WithZone("").Unmap() != l.dest {
		return nil, fmt.Errorf("%w: %s, leased for %s", ErrWrongDestination, address, l.dest)
	}
	// No TCP keepalive: a probe's session lasts seconds, far below any
	// keepalive's idle time, and turning it on costs four setsockopt
	// calls per connection (Go's default sets SO_KEEPALIVE and its three
	// timers).
	d := net.Dialer{Timeout: l.p.opts.ConnectTimeout, KeepAlive: -1}
	if l.src.local != nil {
		d.LocalAddr = l.src.local
		d.Control = bindNoPort
	}
	conn, err := l.p.dial(ctx, &d, network, address)
	if err != nil && l.src.addr.IsValid() && errors.Is(err, syscall.EADDRNOTAVAIL) {
		l.p.disable(l.src, "cannot bind: "+err.Error())
	}
	return conn, err
}

// Release ends the lease with the session's outcome. It frees the slot,
// updates the address's health counters and, for OutcomeGreylisted,
// OutcomeRateLimited and OutcomePolicy, cools the pair (address, dest) for
// GreylistCooldown × 2^repeats, at most MaxCooldown; OutcomeOK resets the
// backoff. A cooling reply on a pair that is already cooling (a session
// that began before the cooldown) changes nothing. Calls after the first
// do nothing.
func (l *Lease) Release(o Outcome) {
	if l.released.Swap(true) {
		return
	}
	if int(o) >= numOutcomes {
		o = OutcomeCanceled
	}
	p, src, ds := l.p, l.src, l.ds
	now := p.now()
	var evs []Event

	ds.mu.Lock()
	pr := ds.get(src.addr)
	pr.inflight--
	cooled := false
	switch {
	case o == OutcomeOK:
		pr.repeats = 0
	case o.cools() && !pr.until.After(now):
		if pr.repeats > 0 && now.Sub(pr.until) > p.opts.MaxCooldown {
			pr.repeats = 0 // long enough ago: start over
		}
		pr.until = now.Add(p.backoff(pr.repeats))
		pr.repeats++
		pr.cause = o
		cooled = true
		src.m.cooldowns[o].Inc()
		kind := EventCooldown
		if o == OutcomePolicy {
			kind = EventPolicyBlock
		}
		evs = append(evs, Event{Kind: kind, Addr: src.addr, Dest: l.dest, Until: pr.until, Reason: o.String(), At: now})
	case o == OutcomePolicy:
		pr.cause = o // the pair was cooling already: a block says more
		evs = append(evs, Event{Kind: EventPolicyBlock, Addr: src.addr, Dest: l.dest, Until: pr.until, Reason: o.String(), At: now})
	}
	if cooled {
		ds.wakeAll()
	} else {
		ds.wakeOne()
	}
	ds.mu.Unlock()

	src.totals[o].Add(1)
	src.m.outcomes[o].Inc()
	src.m.inflight.Dec()
	src.mu.Lock()
	src.recent[src.nrecent%recentLen] = Recent{At: now, Dest: l.dest, Outcome: o}
	src.nrecent++
	src.rep.note(now, p.started, p.opts.PolicyBlockWindow, l.dest, o == OutcomePolicy)
	src.mu.Unlock()
	if o == OutcomePolicy {
		if ev, ok := p.checkReputation(src, now); ok {
			evs = append(evs, ev)
		}
	}

	p.markDirty()
	p.sourceDone(src)
	p.emit(evs...)
}

// backoff is the cooldown after repeats earlier ones in a row.
func (p *Pool) backoff(repeats int) time.Duration {
	d := p.opts.GreylistCooldown
	for i := 0; i < repeats && d < p.opts.MaxCooldown; i++ {
		d *= 2
	}
	return min(d, p.opts.MaxCooldown)
}

// RetryAt is the earliest moment some eligible address may open a session
// to dest: zero when one may now (or when none serves dest at all: Acquire
// says why), else the earliest end of their cooldowns. Batch jobs store it
// to come back later.
func (p *Pool) RetryAt(dest netip.Addr) time.Time {
	dest = dest.WithZone("").Unmap()
	ds := p.lockDestIfAny(dest)
	if ds == nil {
		return time.Time{}
	}
	defer ds.mu.Unlock()
	now := p.now()
	var earliest time.Time
	for _, s := range *p.sources.Load() {
		if !s.serves(dest) || s.draining.Load() || s.disabled.Load() {
			continue
		}
		pr := ds.find(s.addr)
		if pr == nil || !pr.until.After(now) {
			return time.Time{}
		}
		if earliest.IsZero() || pr.until.Before(earliest) {
			earliest = pr.until
		}
	}
	return earliest
}

// CooldownUntil is the end of the cooldown of the pair (addr, dest), or
// zero when it is not cooling. A realtime caller whose session from addr
// was greylisted can wait until then, if its budget allows, and Acquire
// with prefer = addr to retry the same greylisting triplet.
func (p *Pool) CooldownUntil(addr, dest netip.Addr) time.Time {
	addr, dest = addr.Unmap(), dest.WithZone("").Unmap()
	ds := p.lockDestIfAny(dest)
	if ds == nil {
		return time.Time{}
	}
	defer ds.mu.Unlock()
	if pr := ds.find(addr); pr != nil && pr.until.After(p.now()) {
		return pr.until
	}
	return time.Time{}
}

// CooldownCause is the outcome that started the cooldown of the pair
// (addr, dest), and whether it is cooling.
func (p *Pool) CooldownCause(addr, dest netip.Addr) (Outcome, bool) {
	addr, dest = addr.Unmap(), dest.WithZone("").Unmap()
	ds := p.lockDestIfAny(dest)
	if ds == nil {
		return 0, false
	}
	defer ds.mu.Unlock()
	if pr := ds.find(addr); pr != nil && pr.until.After(p.now()) {
		return pr.cause, true
	}
	return 0, false
}

// SetAddresses replaces the pool's addresses (live reload; the empty list
// is the system address). New addresses join the rotation at once. Removed
// ones drain: no new lease, the sessions in flight finish, then they leave
// the pool with an EventDrained (at once when none is in flight). An
// address put back while draining rejoins with its state. Cooldowns of a
// pair outlive its address's removal, so an address removed and re-added
// within them does not lose them. It returns the addresses added and those
// that began draining; on an invalid list it changes nothing.
func (p *Pool) SetAddresses(addrs []netip.Addr) (added, drained []netip.Addr, err error) {
	norm, err := normalizeAddrs(addrs)
	if err != nil {
		return nil, nil, err
	}
	now := p.now()
	var evs []Event
	p.mu.Lock()
	old := *p.sources.Load()
	want := make(map[netip.Addr]bool, len(norm))
	next := make([]*source, 0, len(norm)+len(old))
	for _, a := range norm {
		want[a] = true
		i := slices.IndexFunc(old, func(s *source) bool { return s.addr == a })
		if i < 0 {
			next = append(next, newSource(a))
			added = append(added, a)
			continue
		}
		if old[i].draining.Load() {
			old[i].draining.Store(false)
			added = append(added, a)
		}
		next = append(next, old[i])
	}
	for _, s := range old {
		if want[s.addr] {
			continue
		}
		if !s.draining.Load() {
			s.draining.Store(true)
			drained = append(drained, s.addr)
		}
		if s.inflight.Load() == 0 {
			s.removed = true
			s.m.disabled.Set(0)
			evs = append(evs, Event{Kind: EventDrained, Addr: s.addr, At: now})
			continue
		}
		next = append(next, s)
	}
	p.sources.Store(&next)
	p.mu.Unlock()

	if len(added) > 0 || len(drained) > 0 {
		p.log.Info("egress addresses changed", "added", added, "draining", drained)
		p.markDirty()
		p.wakeAllDests()
	}
	p.emit(evs...)
	return added, drained, nil
}

// finishDrain removes draining src from the pool once its last session has
// ended.
func (p *Pool) finishDrain(src *source) {
	p.mu.Lock()
	if src.removed || !src.draining.Load() || src.inflight.Load() != 0 {
		p.mu.Unlock()
		return
	}
	src.removed = true
	src.m.disabled.Set(0)
	old := *p.sources.Load()
	next := slices.DeleteFunc(slices.Clone(old), func(s *source) bool { return s == src })
	p.sources.Store(&next)
	p.mu.Unlock()
	p.emit(Event{Kind: EventDrained, Addr: src.addr, At: p.now()})
}

// Disable takes addr out of rotation, for reason (say, the self-check found
// it on a DNS blocklist): no new lease; sessions in flight finish. It emits
// an EventDisabled, and again when the reason changes. The flag is saved
// with the state and survives a restart.
func (p *Pool) Disable(addr netip.Addr, reason string) error {
	src := p.find(addr)
	if src == nil {
		return fmt.Errorf("%w: %s", ErrUnknownAddress, addrLabel(addr))
	}
	p.disable(src, reason)
	return nil
}

func (p *Pool) disable(src *source, reason string) {
	now := p.now()
	src.mu.Lock()
	changed := !src.disabled.Load() || src.reason != reason
	if changed {
		src.reason, src.disabledAt = reason, now
		src.disabled.Store(true)
	}
	src.mu.Unlock()
	if !changed {
		return
	}
	src.m.disabled.Set(1)
	p.markDirty()
	p.wakeAllDests()
	p.emit(Event{Kind: EventDisabled, Addr: src.addr, Reason: reason, At: now})
}

// SetFindings records what the last self-check found wrong with addr
// (nothing: it passed), for Snapshot.
func (p *Pool) SetFindings(addr netip.Addr, findings []string) {
	src := p.find(addr)
	if src == nil {
		return
	}
	now := p.now()
	src.mu.Lock()
	src.findings, src.checkedAt = slices.Clone(findings), now
	src.mu.Unlock()
}

// Enable puts addr back in rotation, with an EventEnabled if it was
// disabled.
func (p *Pool) Enable(addr netip.Addr) error {
	src := p.find(addr)
	if src == nil {
		return fmt.Errorf("%w: %s", ErrUnknownAddress, addrLabel(addr))
	}
	src.mu.Lock()
	was := src.disabled.Swap(false)
	src.reason, src.disabledAt = "", time.Time{}
	src.mu.Unlock()
	if !was {
		return nil
	}
	src.m.disabled.Set(0)
	p.markDirty()
	p.wakeAllDests()
	p.emit(Event{Kind: EventEnabled, Addr: src.addr, At: p.now()})
	return nil
}

// find returns the source of addr still in the pool (draining or not).
func (p *Pool) find(addr netip.Addr) *source {
	addr = addr.Unmap()
	for _, s := range *p.sources.Load() {
		if s.addr == addr {
			return s
		}
	}
	return nil
}

// markDirty notes that the state changed since the last save.
func (p *Pool) markDirty() {
	if !p.dirty.Load() {
		p.dirty.Store(true)
	}
}

// emit logs evs and hands them to Options.OnEvent; no lock is held.
func (p *Pool) emit(evs ...Event) {
	for _, e := range evs {
		level := slog.LevelInfo
		switch e.Kind {
		case EventCooldown:
			level = slog.LevelDebug
		case EventReputation, EventDisabled:
			level = slog.LevelWarn
		}
		if p.log.Enabled(context.Background(), level) {
			attrs := []any{"event", e.Kind, "addr", addrLabel(e.Addr)}
			if e.Dest.IsValid() {
				attrs = append(attrs, "dest", e.Dest.String())
			}
			if !e.Until.IsZero() {
				attrs = append(attrs, "until", e.Until)
			}
			if e.Reason != "" {
				attrs = append(attrs, "reason", e.Reason)
			}
			p.log.Log(context.Background(), level, "egress "+e.Kind, attrs...)
		}
		if p.opts.OnEvent != nil {
			p.opts.OnEvent(e)
		}
	}
}

// Close stops the background loop, wakes every waiting Acquire (they return
// ErrClosed), refuses new ones and saves the state. Leases still out may be
// released afterwards; that state is not saved. Calls after the first
// return nil.
func (p *Pool) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(p.done)
	p.wg.Wait()
	p.saveMu.Lock()
	activeCooldowns.Add(-p.lastCount)
	p.lastCount = 0
	p.saveMu.Unlock()
	return p.save()
}
