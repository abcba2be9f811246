package egress

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const mx = "127.0.0.10"

func TestRotationSpreads(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, nil)

	// Sessions held at once go to the least-loaded address.
	var held []*Lease
	count := map[netip.Addr]int{}
	for range 6 {
		l := e.acquire(t, mx, "")
		count[l.Addr()]++
		held = append(held, l)
		for a, n := range count {
			if n > (len(held)+2)/3 {
				t.Fatalf("after %d leases, %s has %d: %v", len(held), a, n, count)
			}
		}
	}
	for _, l := range held {
		l.Release(OutcomeOK)
	}

	// One at a time, ties are broken round-robin.
	count = map[netip.Addr]int{}
	for range 30 {
		l := e.acquire(t, mx, "")
		count[l.Addr()]++
		l.Release(OutcomeOK)
	}
	for _, a := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		if count[ip(a)] != 10 {
			t.Errorf("sequential leases: %v, want 10 each", count)
		}
	}
	st, _ := e.status("127.0.0.2")
	if st.Sessions != 12 || st.Outcomes[OutcomeOK] != 12 || st.InFlight != 0 {
		t.Errorf("snapshot of 127.0.0.2: %+v", st)
	}
	if len(st.Recent) != 12 || st.Recent[11].Dest != ip(mx) || st.Recent[11].Outcome != OutcomeOK {
		t.Errorf("recent of 127.0.0.2: %+v", st.Recent)
	}
}

func TestRecentKeepsTheLast32(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, nil)
	for i := range 40 {
		l := e.acquire(t, mx, "")
		o := OutcomeOK
		if i == 39 {
			o = OutcomeTimeout
		}
		l.Release(o)
	}
	st, _ := e.status("127.0.0.1")
	if len(st.Recent) != recentLen || st.Recent[recentLen-1].Outcome != OutcomeTimeout || st.Recent[0].Outcome != OutcomeOK {
		t.Errorf("recent: %d entries, last %v", len(st.Recent), st.Recent[len(st.Recent)-1])
	}
	if st.Outcomes[OutcomeOK] != 39 || st.Outcomes[OutcomeTimeout] != 1 {
		t.Errorf("outcomes: %v", st.Outcomes)
	}
}

func TestConnCapUnderConcurrency(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, func(o *Options) { o.MaxConnsPerHost = 2 })
	var total atomic.Int64
	var per sync.Map // netip.Addr → *atomic.Int64
	var maxTotal, violations atomic.Int64
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			for range 25 {
				l, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{})
				if err != nil {
					t.Error(err)
					return
				}
				c, _ := per.LoadOrStore(l.Addr(), new(atomic.Int64))
				n := total.Add(1)
				if c.(*atomic.Int64).Add(1) > 2 || n > 6 {
					violations.Add(1)
				}
				for m := maxTotal.Load(); n > m && !maxTotal.CompareAndSwap(m, n); m = maxTotal.Load() {
				}
				time.Sleep(10 * time.Microsecond) // hold the slot a little
				c.(*atomic.Int64).Add(-1)
				total.Add(-1)
				l.Release(OutcomeOK)
			}
		})
	}
	wg.Wait()
	if violations.Load() > 0 {
		t.Errorf("%d times over the cap", violations.Load())
	}
	t.Logf("at most %d concurrent leases (cap 3×2 = 6)", maxTotal.Load())
	if w := e.waiters(mx); w != 0 {
		t.Errorf("%d waiters left", w)
	}
}

func TestSeventhLeaseWaitsForARelease(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, func(o *Options) { o.MaxConnsPerHost = 2 })
	var held []*Lease
	for range 6 {
		held = append(held, e.acquire(t, mx, ""))
	}
	// Another destination is not held up.
	e.acquire(t, "127.0.0.11", "").Release(OutcomeOK)

	ch := e.acquireAsync(context.Background(), mx)
	e.waitForWaiters(t, mx, 1)
	select {
	case r := <-ch:
		t.Fatalf("7th Acquire returned before a Release: %v", r)
	default:
	}
	held[4].Release(OutcomeOK)
	r := mustReceive(t, ch)
	if r.err != nil || r.l.Addr() != held[4].Addr() {
		t.Fatalf("7th Acquire: %v, %v; want the freed %s", r.l, r.err, held[4].Addr())
	}
	r.l.Release(OutcomeOK)
	for _, l := range held {
		l.Release(OutcomeOK) // held[4] again: a no-op
	}
	for _, s := range e.p.Snapshot() {
		if s.InFlight != 0 {
			t.Errorf("%s: %d in flight", s.Addr, s.InFlight)
		}
	}
}

func TestWaitEndsWhenACooldownEnds(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, func(o *Options) {
		o.MaxConnsPerHost = 1
		o.GreylistCooldown = time.Millisecond // a real timer: keep it tiny
	})
	e.acquire(t, mx, "127.0.0.1").Release(OutcomeGreylisted)
	busy := e.acquire(t, mx, "") // 127.0.0.2, the only one not cooling
	ch := e.acquireAsync(context.Background(), mx)
	e.waitForWaiters(t, mx, 1)
	e.clk.Advance(time.Millisecond) // 127.0.0.1 cools no more
	r := mustReceive(t, ch)         // without a Release
	if r.err != nil || r.l.Addr() != ip("127.0.0.1") {
		t.Fatalf("waiter after the cooldown: %v %v", r.l, r.err)
	}
	r.l.Release(OutcomeOK)
	busy.Release(OutcomeOK)
}

func TestCloseDuringRateWait(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.MaxRatePerHost = 1 })
	e.acquire(t, mx, "").Release(OutcomeOK)
	e.p.opts.Sleep = func(context.Context, time.Duration) error {
		e.p.Close() // the pool closes while Acquire sleeps for its token
		return nil
	}
	if l, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire across Close: %v, %v", l, err)
	}
	if st, _ := e.status("127.0.0.1"); st.InFlight != 0 {
		t.Fatalf("slot kept: %+v", st)
	}
}

func TestWaitEndsWithContextAndClose(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.MaxConnsPerHost = 1 })
	l := e.acquire(t, mx, "")

	ctx, cancel := context.WithCancel(context.Background())
	ch := e.acquireAsync(ctx, mx)
	e.waitForWaiters(t, mx, 1)
	cancel()
	if r := mustReceive(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, %v", r.l, r.err)
	}
	if w := e.waiters(mx); w != 0 {
		t.Fatalf("%d waiters after cancel", w)
	}

	ch = e.acquireAsync(context.Background(), mx)
	e.waitForWaiters(t, mx, 1)
	if err := e.p.Close(); err != nil {
		t.Fatal(err)
	}
	if r := mustReceive(t, ch); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("wait across Close: %v, %v", r.l, r.err)
	}
	if _, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	l.Release(OutcomeOK) // after Close: allowed
}

func TestAbandonPassesTheWakeupOn(t *testing.T) {
	var ds destState
	w1, w2, w3 := ds.enqueue(false), ds.enqueue(false), ds.enqueue(false)
	ds.abandon(w2) // not signalled: just leaves
	ds.wakeOne()   // a Release signals w1 ...
	ds.abandon(w1) // ... which gives up at that moment
	select {
	case <-w3.ch:
	default:
		t.Fatal("the wake-up was lost")
	}
	if len(ds.waiters) != 0 || len(w2.ch) != 0 {
		t.Fatalf("%d waiters left, w2 signalled %d", len(ds.waiters), len(w2.ch))
	}
}

// TestNoLostWakeups churns waiters that give up at random moments, some
// just as a Release signals them: the signal must pass on, or the waiters
// left behind would wait for a Release that never comes.
func TestNoLostWakeups(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.MaxConnsPerHost = 1 })
	var wg sync.WaitGroup
	var got atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%3 == 0 {
					go cancel() // gives up at some moment of the wait
				}
				l, err := e.p.Acquire(ctx, ip(mx), netip.Addr{})
				cancel()
				if err == nil {
					got.Add(1)
					l.Release(OutcomeOK)
				} else if !errors.Is(err, context.Canceled) {
					t.Error(err)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("waiters stuck with the slot free: %d waiting, %d leases granted", e.waiters(mx), got.Load())
	}
	if st, _ := e.status("127.0.0.1"); st.InFlight != 0 || st.Sessions != uint64(got.Load()) {
		t.Fatalf("snapshot %+v, %d leases granted", st, got.Load())
	}
}

func TestRateCap(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, func(o *Options) { o.MaxRatePerHost = 2 })

	// Burst 2, then one token per 0.5 s; the fake Sleep moves the clock.
	for range 4 {
		e.acquire(t, mx, "").Release(OutcomeOK)
	}
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}
	if got := e.clk.Slept(); !slices.Equal(got, want) {
		t.Fatalf("rate waits %v, want %v", got, want)
	}
	// Another MX has its own bucket.
	e.acquire(t, "127.0.0.11", "").Release(OutcomeOK)
	e.acquire(t, "127.0.0.11", "").Release(OutcomeOK)
	if got := e.clk.Slept(); len(got) != 2 {
		t.Fatalf("another MX waited: %v", got)
	}
}

func TestRateCapReservesInOrder(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, func(o *Options) { o.MaxRatePerHost = 2 })
	e.clk.advance = false // the clock stands still: the tokens queue up
	var held []*Lease
	for range 5 {
		held = append(held, e.acquire(t, mx, ""))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond}
	if got := e.clk.Slept(); !slices.Equal(got, want) {
		t.Fatalf("rate waits %v, want %v", got, want)
	}

	// A wait cut short gives its token and its slot back: the next
	// reservation is due when the abandoned one would have been.
	held[0].Release(OutcomeOK)
	e.clk.mu.Lock()
	e.clk.slept, e.clk.fail = nil, context.Canceled
	e.clk.mu.Unlock()
	if _, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire whose wait was cut short: %v", err)
	}
	l, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.clk.Slept(); !slices.Equal(got, []time.Duration{2 * time.Second, 2 * time.Second}) {
		t.Fatalf("waits %v, want [2s 2s]", got)
	}
	l.Release(OutcomeOK)
	in := 0
	for _, s := range e.p.Snapshot() {
		in += s.InFlight
	}
	if in != 4 {
		t.Fatalf("%d in flight, want the 4 held", in)
	}
	for _, l := range held[1:] {
		l.Release(OutcomeOK)
	}
}

func TestGreylistBackoff(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, nil) // 1 min, at most 5 min
	dest := ip(mx)
	t0 := e.clk.Now()
	if !e.p.RetryAt(dest).IsZero() {
		t.Fatal("RetryAt before any cooldown is not zero")
	}
	elapsed := time.Duration(0)
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
		l := e.acquire(t, mx, "")
		l.Release(OutcomeGreylisted)
		until := t0.Add(elapsed + want)
		if got := e.p.CooldownUntil(ip("127.0.0.1"), dest); !got.Equal(until) {
			t.Fatalf("greylisting %d: cooling until %v, want %v", i+1, got, until)
		}
		_, err := e.p.Acquire(context.Background(), dest, netip.Addr{})
		ce, ok := isCooling(err)
		if !ok || !ce.RetryAt.Equal(until) || ce.Dest != dest {
			t.Fatalf("greylisting %d: Acquire while cooling: %v", i+1, err)
		}
		if got := e.p.RetryAt(dest); !got.Equal(until) {
			t.Fatalf("greylisting %d: RetryAt %v, want %v", i+1, got, until)
		}
		evs := e.rec.take()
		if len(evs) != 1 || evs[0].Kind != EventCooldown || evs[0].Addr != ip("127.0.0.1") || evs[0].Dest != dest ||
			!evs[0].Until.Equal(until) || evs[0].Reason != "greylisted" {
			t.Fatalf("greylisting %d: events %+v", i+1, evs)
		}
		e.clk.Advance(want)
		elapsed += want
	}
	st, _ := e.status("127.0.0.1")
	if len(st.Cooldowns) != 0 {
		t.Fatalf("cooldowns after expiry: %+v", st.Cooldowns)
	}

	// A completed session resets the backoff; a rate limit cools like a greylisting.
	e.acquire(t, mx, "").Release(OutcomeOK)
	e.acquire(t, mx, "").Release(OutcomeRateLimited)
	if got := e.p.CooldownUntil(ip("127.0.0.1"), dest); !got.Equal(e.clk.Now().Add(time.Minute)) {
		t.Fatalf("after a success the cooldown is %v, want 1m", got.Sub(e.clk.Now()))
	}
	st, _ = e.status("127.0.0.1")
	if len(st.Cooldowns) != 1 || st.Cooldowns[0].Dest != dest || st.Cooldowns[0].Repeats != 1 {
		t.Fatalf("snapshot cooldowns: %+v", st.Cooldowns)
	}
	if evs := e.rec.take(); len(evs) != 1 || evs[0].Reason != "rate_limited" {
		t.Fatalf("events: %+v", evs)
	}

	// Long enough after the cooldown ended, the backoff starts over too.
	e.clk.Advance(time.Minute)
	e.acquire(t, mx, "").Release(OutcomeGreylisted) // repeat: 2 min
	e.clk.Advance(2*time.Minute + 5*time.Minute + time.Second)
	e.acquire(t, mx, "").Release(OutcomeGreylisted)
	if got := e.p.CooldownUntil(ip("127.0.0.1"), dest).Sub(e.clk.Now()); got != time.Minute {
		t.Fatalf("cooldown after a long calm: %v, want 1m", got)
	}
}

func TestConcurrentGreylistingsAreOneEpisode(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, nil)
	a, b := e.acquire(t, mx, ""), e.acquire(t, mx, "")
	a.Release(OutcomeGreylisted)
	e.clk.Advance(10 * time.Second)
	b.Release(OutcomeGreylisted) // began before the cooldown: no escalation
	if got := e.p.CooldownUntil(ip("127.0.0.1"), ip(mx)).Sub(e.clk.Now()); got != 50*time.Second {
		t.Fatalf("cooldown left %v, want 50s", got)
	}
	if evs := e.rec.take(); len(evs) != 1 {
		t.Fatalf("events %+v, want one cooldown", evs)
	}
}

// TestSucceededResetsBackoff: a transaction that went well on a session
// kept open (its Release later) starts the pair's backoff over, as a
// Release(OutcomeOK) does: the next greylisting cools the pair for the
// first step again, not the doubled one.
func TestSucceededResetsBackoff(t *testing.T) {
	for _, succeeded := range []bool{false, true} {
		e := newEnv(t, []string{"127.0.0.1"}, nil)
		e.acquire(t, mx, "").Release(OutcomeGreylisted) // 1 min
		e.clk.Advance(time.Minute + time.Second)
		kept := e.acquire(t, mx, "")
		if succeeded {
			kept.Succeeded()
		}
		e.acquire(t, mx, "").Release(OutcomeGreylisted)
		want := 2 * time.Minute
		if succeeded {
			want = time.Minute
		}
		if got := e.p.CooldownUntil(ip("127.0.0.1"), ip(mx)).Sub(e.clk.Now()); got != want {
			t.Errorf("succeeded %v: cooldown %v, want %v", succeeded, got, want)
		}
		kept.Release(OutcomeOK)
	}
}

func TestPreferAffinityAndAllCooling(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, nil)
	dest := ip(mx)

	// prefer wins over rotation, every time.
	for range 3 {
		l := e.acquire(t, mx, "127.0.0.2")
		if l.Addr() != ip("127.0.0.2") {
			t.Fatalf("prefer 127.0.0.2: got %s", l.Addr())
		}
		l.Release(OutcomeOK)
	}
	// A cooling prefer is skipped.
	e.acquire(t, mx, "127.0.0.2").Release(OutcomeGreylisted)
	l := e.acquire(t, mx, "127.0.0.2")
	if l.Addr() == ip("127.0.0.2") {
		t.Fatal("got the cooling preferred address")
	}
	l.Release(OutcomeOK)
	// After the cooldown, the retry goes out from the same address.
	e.clk.Advance(time.Minute)
	if l := e.acquire(t, mx, "127.0.0.2"); l.Addr() != ip("127.0.0.2") {
		t.Fatalf("retry after the cooldown from %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}
	// A prefer at its cap is waited for, not passed over: another address
	// would be greylisted anew.
	e2 := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, func(o *Options) { o.MaxConnsPerHost = 1 })
	h := e2.acquire(t, mx, "127.0.0.1")
	got := make(chan *Lease, 1)
	go func() {
		l, err := e2.p.Acquire(context.Background(), dest, ip("127.0.0.1"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		t.Fatalf("prefer at cap: got %s at once, want a wait for its slot", l.Addr())
	case <-time.After(100 * time.Millisecond):
	}
	h.Release(OutcomeOK)
	if l := <-got; l == nil || l.Addr() != ip("127.0.0.1") {
		t.Fatalf("prefer at cap: got %v after the release", l)
	} else {
		l.Release(OutcomeOK)
	}
	// Without a prefer, a full address gives way to a free one.
	h = e2.acquire(t, mx, "127.0.0.1")
	if l := e2.acquire(t, mx, ""); l.Addr() != ip("127.0.0.2") {
		t.Fatalf("no prefer: got %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}
	h.Release(OutcomeOK)

	// Every address cooling: ErrAllCooling with the earliest end.
	t0 := e.clk.Now()
	for i, a := range []string{"127.0.0.3", "127.0.0.1", "127.0.0.2"} {
		l := e.acquire(t, mx, a)
		if l.Addr() != ip(a) {
			t.Fatalf("prefer %s: got %s", a, l.Addr())
		}
		l.Release(OutcomeGreylisted)
		if i < 2 {
			e.clk.Advance(10 * time.Second)
		}
	}
	_, err := e.p.Acquire(context.Background(), dest, netip.Addr{})
	ce, ok := isCooling(err)
	if !ok || !ce.RetryAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("all cooling: %v", err)
	}
	if !strings.Contains(err.Error(), "cooling for 127.0.0.10 until") {
		t.Errorf("error text: %v", err)
	}
	if got := e.p.RetryAt(dest); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("RetryAt %v, want %v", got, t0.Add(time.Minute))
	}
	// Other destinations are not affected.
	e.acquire(t, "127.0.0.11", "").Release(OutcomeOK)
	// The first to cool is the first back.
	e.clk.Advance(time.Minute - 20*time.Second)
	if l := e.acquire(t, mx, ""); l.Addr() != ip("127.0.0.3") {
		t.Fatalf("first back: %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}
	if !e.p.RetryAt(dest).IsZero() {
		t.Fatal("RetryAt not zero with an address free")
	}
}

func TestFamilies(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "::1"}, nil)
	for _, c := range []struct{ dest, want string }{
		{"::1", "::1"},
		{"127.0.0.5", "127.0.0.1"},
		{"::ffff:127.0.0.5", "127.0.0.1"},
	} {
		for range 3 {
			l := e.acquire(t, c.dest, "")
			if l.Addr() != ip(c.want) {
				t.Fatalf("dest %s from %s, want %s", c.dest, l.Addr(), c.want)
			}
			l.Release(OutcomeOK)
		}
	}
	// prefer of the wrong family is ignored.
	if l := e.acquire(t, "::1", "127.0.0.1"); l.Addr() != ip("::1") {
		t.Fatalf("wrong-family prefer used: %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}

	v4 := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, nil)
	if _, err := v4.p.Acquire(context.Background(), ip("::1"), netip.Addr{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("IPv6 dest from an IPv4 pool: %v", err)
	}
	if _, err := v4.p.Acquire(context.Background(), netip.Addr{}, netip.Addr{}); !errors.Is(err, ErrInvalidDest) {
		t.Fatalf("zero dest: %v", err)
	}
	if _, err := v4.p.Acquire(context.Background(), ip("0.0.0.0"), netip.Addr{}); !errors.Is(err, ErrInvalidDest) {
		t.Fatalf("unspecified dest: %v", err)
	}

	// The system address serves both families.
	sys := newEnv(t, nil, nil)
	for _, d := range []string{"127.0.0.5", "::1"} {
		l := sys.acquire(t, d, "")
		if l.Addr().IsValid() {
			t.Fatalf("system pool leased %s", l.Addr())
		}
		l.Release(OutcomeOK)
	}
	if st := sys.p.Snapshot(); len(st) != 1 || st[0].Addr.IsValid() || st[0].Sessions != 2 {
		t.Fatalf("system snapshot: %+v", st)
	}
}

func TestDrainOnSetAddresses(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, nil)
	inflight := e.acquire(t, mx, "127.0.0.1")

	added, drained, err := e.p.SetAddresses(ips("127.0.0.2", "127.0.0.3"))
	if err != nil || !slices.Equal(added, ips("127.0.0.3")) || !slices.Equal(drained, ips("127.0.0.1")) {
		t.Fatalf("SetAddresses: added %v drained %v err %v", added, drained, err)
	}
	if evs := e.rec.take(); len(evs) != 0 {
		t.Fatalf("events while a session is in flight: %+v", evs)
	}
	st, ok := e.status("127.0.0.1")
	if !ok || !st.Draining || st.InFlight != 1 {
		t.Fatalf("draining address: %+v (in pool %v)", st, ok)
	}
	for range 10 {
		l := e.acquire(t, mx, "127.0.0.1")
		if l.Addr() == ip("127.0.0.1") {
			t.Fatal("new lease on a draining address")
		}
		l.Release(OutcomeOK)
	}
	inflight.Release(OutcomeOK)
	if evs := e.rec.take(); len(evs) != 1 || evs[0].Kind != EventDrained || evs[0].Addr != ip("127.0.0.1") {
		t.Fatalf("events after the last session: %+v", evs)
	}
	var got []string
	for _, s := range e.p.Snapshot() {
		got = append(got, s.Addr.String())
	}
	if !slices.Equal(got, []string{"127.0.0.2", "127.0.0.3"}) {
		t.Fatalf("pool after drain: %v", got)
	}

	// Removed with nothing in flight: drained at once.
	added, drained, err = e.p.SetAddresses(ips("127.0.0.3"))
	if err != nil || len(added) != 0 || !slices.Equal(drained, ips("127.0.0.2")) {
		t.Fatalf("SetAddresses: added %v drained %v err %v", added, drained, err)
	}
	if evs := e.rec.take(); len(evs) != 1 || evs[0].Kind != EventDrained || evs[0].Addr != ip("127.0.0.2") {
		t.Fatalf("events: %+v", evs)
	}

	// Put back while draining: it stays, and never reports drained.
	l := e.acquire(t, mx, "")
	e.p.SetAddresses(ips("127.0.0.4"))
	added, _, _ = e.p.SetAddresses(ips("127.0.0.3", "127.0.0.4"))
	if !slices.Equal(added, ips("127.0.0.3")) {
		t.Fatalf("re-added: %v", added)
	}
	l.Release(OutcomeOK)
	if evs := e.rec.take(); len(evs) != 0 {
		t.Fatalf("events: %+v", evs)
	}
	if st, ok := e.status("127.0.0.3"); !ok || st.Draining || st.InFlight != 0 {
		t.Fatalf("re-added address: %+v", st)
	}

	// An invalid list changes nothing.
	if _, _, err := e.p.SetAddresses(ips("127.0.0.5", "127.0.0.5")); err == nil {
		t.Fatal("duplicate addresses accepted")
	}
	if len(e.p.Snapshot()) != 2 {
		t.Fatal("invalid SetAddresses changed the pool")
	}
}

func TestSetAddressesWakesWaiters(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.MaxConnsPerHost = 1 })
	h := e.acquire(t, mx, "")
	ch := e.acquireAsync(context.Background(), mx)
	e.waitForWaiters(t, mx, 1)
	e.p.SetAddresses(ips("127.0.0.1", "127.0.0.2"))
	r := mustReceive(t, ch)
	if r.err != nil || r.l.Addr() != ip("127.0.0.2") {
		t.Fatalf("waiter after a new address: %v %v", r.l, r.err)
	}
	r.l.Release(OutcomeOK)
	h.Release(OutcomeOK)
}

func TestDisableEnable(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, nil)
	if err := e.p.Disable(ip("127.0.0.1"), "listed on zen.example"); err != nil {
		t.Fatal(err)
	}
	e.p.Disable(ip("127.0.0.1"), "listed on zen.example") // same reason: no new event
	evs := e.rec.take()
	if len(evs) != 1 || evs[0].Kind != EventDisabled || evs[0].Reason != "listed on zen.example" {
		t.Fatalf("events: %+v", evs)
	}
	for range 5 {
		l := e.acquire(t, mx, "127.0.0.1")
		if l.Addr() != ip("127.0.0.2") {
			t.Fatalf("leased disabled %s", l.Addr())
		}
		l.Release(OutcomeOK)
	}
	st, _ := e.status("127.0.0.1")
	if !st.Disabled || st.DisabledReason != "listed on zen.example" || !st.DisabledAt.Equal(e.clk.Now()) {
		t.Fatalf("snapshot: %+v", st)
	}
	e.p.Disable(ip("127.0.0.2"), "misconfigured")
	if _, err := e.p.Acquire(context.Background(), ip(mx), netip.Addr{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("all disabled: %v", err)
	}
	if err := e.p.Enable(ip("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if l := e.acquire(t, mx, ""); l.Addr() != ip("127.0.0.1") {
		t.Fatalf("after Enable: %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}
	if got := kinds(e.rec.take()); !slices.Equal(got, []string{EventDisabled, EventEnabled}) {
		t.Fatalf("events: %v", got)
	}
	if st, _ := e.status("127.0.0.1"); st.Disabled || st.DisabledReason != "" {
		t.Fatalf("after Enable: %+v", st)
	}
	if err := e.p.Disable(ip("127.0.0.9"), "x"); !errors.Is(err, ErrUnknownAddress) {
		t.Fatalf("unknown address: %v", err)
	}
	if err := e.p.Enable(ip("127.0.0.9")); !errors.Is(err, ErrUnknownAddress) {
		t.Fatalf("unknown address: %v", err)
	}
}

func TestPolicyBlocksAndReputation(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, nil) // 3 within 10 min
	for i, d := range []string{"127.0.0.10", "127.0.0.11", "127.0.0.12"} {
		e.acquire(t, d, "127.0.0.1").Release(OutcomePolicy)
		if i < 2 {
			e.clk.Advance(4 * time.Minute)
		}
	}
	evs := e.rec.take()
	if got := kinds(evs); !slices.Equal(got, []string{EventPolicyBlock, EventPolicyBlock, EventPolicyBlock, EventReputation}) {
		t.Fatalf("events: %v", got)
	}
	if evs[0].Dest != ip("127.0.0.10") || !evs[0].Until.Equal(e.clk.Now().Add(-8*time.Minute+time.Minute)) {
		t.Errorf("policy_block event: %+v", evs[0])
	}
	if r := evs[3]; r.Addr != ip("127.0.0.1") || r.Reason != "3 of 3 sessions refused by policy (100%) by 3 destinations within 10m0s" {
		t.Errorf("reputation event: %+v", r)
	}
	// The pair cools: the next session to that MX leaves from the other address.
	if l := e.acquire(t, "127.0.0.12", "127.0.0.1"); l.Addr() != ip("127.0.0.2") {
		t.Fatalf("after a policy block: %s", l.Addr())
	} else {
		l.Release(OutcomeOK)
	}
	// One warning a window; blocks spread wider than the window never
	// add up.
	for range 4 {
		e.clk.Advance(6 * time.Minute)
		e.acquire(t, "127.0.0.13", "127.0.0.1").Release(OutcomePolicy)
		e.clk.Advance(6 * time.Minute) // past the cooldown
	}
	if got := kinds(e.rec.take()); slices.Contains(got, EventReputation) {
		t.Fatalf("reputation event from spread-out blocks: %v", got)
	}
	if st, _ := e.status("127.0.0.1"); st.PolicyBlocks != 1 || st.Outcomes[OutcomePolicy] != 7 {
		t.Fatalf("snapshot: %+v", st)
	}
}

func TestSweepForgetsIdleDestinations(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, func(o *Options) { o.MaxRatePerHost = 10 })
	for i := range 20 {
		d := netip.AddrFrom4([4]byte{127, 1, 0, byte(i)})
		l, err := e.p.Acquire(context.Background(), d, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		o := OutcomeOK
		if i < 2 {
			o = OutcomeGreylisted
		}
		l.Release(o)
	}
	held := e.acquire(t, mx, "")
	count := func() int {
		n := 0
		e.p.eachDest(func(netip.Addr, *destState) bool { n++; return false })
		return n
	}
	if n := e.p.sweep(e.clk.Now()); n != 2 || count() != 21 {
		t.Fatalf("sweep at once: %d cooling, %d dests; want 2, 21", n, count())
	}
	e.clk.Advance(time.Second) // buckets full again
	if n := e.p.sweep(e.clk.Now()); n != 2 || count() != 3 {
		t.Fatalf("sweep: %d cooling, %d dests; want 2, 3 (2 cooling, 1 in flight)", n, count())
	}
	// Backoff is remembered MaxCooldown past the cooldown, then forgotten.
	e.clk.Advance(time.Minute + 5*time.Minute + time.Second)
	held.Release(OutcomeOK)
	if n := e.p.sweep(e.clk.Now()); n != 0 || count() != 0 {
		t.Fatalf("final sweep: %d cooling, %d dests", n, count())
	}
	// A forgotten destination works as before.
	e.acquire(t, mx, "").Release(OutcomeOK)
}

func TestReleaseEdgeCases(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1"}, nil)
	l := e.acquire(t, mx, "")
	l.Release(Outcome(200)) // unknown: canceled
	l.Release(OutcomeGreylisted)
	st, _ := e.status("127.0.0.1")
	if st.Outcomes[OutcomeCanceled] != 1 || len(st.Outcomes) != 1 || len(st.Cooldowns) != 0 || st.InFlight != 0 {
		t.Fatalf("snapshot: %+v", st)
	}
	if s := Outcome(200).String(); s != "outcome(200)" {
		t.Errorf("String: %q", s)
	}
	for o := range Outcome(numOutcomes) {
		b, err := o.MarshalText()
		var back Outcome
		if err != nil || back.UnmarshalText(b) != nil || back != o {
			t.Errorf("outcome %d round trip: %q %v %v", o, b, err, back)
		}
	}
	if err := new(Outcome).UnmarshalText([]byte("nope")); err == nil {
		t.Error("unknown outcome name accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{
		Addresses:        []netip.Addr{ip("127.0.0.1"), ip("::ffff:127.0.0.1"), ip("0.0.0.0"), {}, ip("fe80::1%eth0")},
		MaxConnsPerHost:  -1,
		GreylistCooldown: time.Hour,
		MaxCooldown:      time.Minute,
	}
	o.Defaults()
	err := o.Validate()
	for _, want := range []string{
		"addresses[1] ::ffff:127.0.0.1: listed twice",
		"addresses[2] 0.0.0.0: not a unicast address",
		"addresses[3] invalid IP: not an IP address",
		"addresses[4] fe80::1%eth0: has a zone",
		"max_conns_per_host must be at least 1",
		"max_cooldown must be at least greylist_cooldown",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant %q", err, want)
		}
	}
	if _, err := New(Options{MaxRatePerHost: 0, ConnectTimeout: -1}); err == nil {
		t.Error("New with a negative connect timeout succeeded")
	}
	var d Options
	d.Defaults()
	if d.MaxConnsPerHost != 4 || d.MaxRatePerHost != 20 || d.GreylistCooldown != time.Minute || d.MaxCooldown != 30*time.Minute {
		t.Errorf("defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestAcquireFrom(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, func(o *Options) { o.MaxConnsPerHost = 1 })
	dest := ip(mx)
	from := ip("127.0.0.2")
	// Only from is used, even while the other address is free.
	for range 3 {
		l, err := e.p.AcquireFrom(context.Background(), dest, from)
		if err != nil || l.Addr() != from {
			t.Fatalf("AcquireFrom: %v %v", l, err)
		}
		l.Release(OutcomeOK)
	}
	// Cooling: a CoolingError for from, though another address is free.
	l, _ := e.p.AcquireFrom(context.Background(), dest, from)
	l.Release(OutcomeGreylisted)
	_, err := e.p.AcquireFrom(context.Background(), dest, from)
	if ce, ok := isCooling(err); !ok || ce.RetryAt.IsZero() {
		t.Fatalf("cooling from: %v", err)
	}
	e.clk.Advance(time.Minute)
	// At its cap: waits for its own slot.
	h, err := e.p.AcquireFrom(context.Background(), dest, from)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.p.AcquireFrom(ctx, dest, from); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("at cap: %v, want a wait that ends with the context", err)
	}
	h.Release(OutcomeOK)
	// Not in the pool: ErrNoAddress.
	if _, err := e.p.AcquireFrom(context.Background(), dest, ip("127.0.0.9")); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("unknown from: %v", err)
	}
}

// TestReputationAgainstThePool: a reputation warning compares an address
// with the rest of the pool, over distinct destinations. One odd server
// refusing a busy address again and again, a few refusals among many
// sessions, or refusals the whole pool meets alike raise none; an address
// refused by many destinations that take the others raises one.
func TestReputationAgainstThePool(t *testing.T) {
	addrs := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	dest := func(i int) string { return netip.AddrFrom4([4]byte{127, 2, byte(i / 250), byte(i%250 + 1)}).String() }
	// session runs one session from "from" to d with outcome o.
	session := func(e *env, d, from string, o Outcome) {
		e.acquire(t, d, from).Release(o)
	}
	t.Run("one odd server", func(t *testing.T) {
		e := newEnv(t, addrs, func(o *Options) { o.GreylistCooldown, o.MaxCooldown = time.Second, time.Second })
		for range 10 {
			session(e, "127.0.0.10", "127.0.0.1", OutcomePolicy)
			e.clk.Advance(2 * time.Second)
		}
		if got := kinds(e.rec.take()); slices.Contains(got, EventReputation) {
			t.Fatalf("a warning from one server's refusals: %v", got)
		}
	})
	t.Run("a few among many", func(t *testing.T) {
		e := newEnv(t, addrs, nil)
		for i := range 200 {
			for _, a := range addrs {
				o := OutcomeOK
				if a == "127.0.0.1" && i%50 == 0 {
					o = OutcomePolicy // 4 destinations of 200: 2 %
				}
				session(e, dest(i), a, o)
			}
		}
		if got := kinds(e.rec.take()); slices.Contains(got, EventReputation) {
			t.Fatalf("a warning from 2 %% of sessions: %v", got)
		}
	})
	t.Run("the whole pool alike", func(t *testing.T) {
		e := newEnv(t, addrs, nil)
		for i := range 30 {
			o := OutcomeOK
			if i%3 == 0 {
				o = OutcomePolicy // these servers refuse every prober
			}
			for _, a := range addrs {
				session(e, dest(i), a, o)
			}
		}
		if got := kinds(e.rec.take()); slices.Contains(got, EventReputation) {
			t.Fatalf("a warning when every address is refused alike: %v", got)
		}
	})
	t.Run("one address listed", func(t *testing.T) {
		e := newEnv(t, addrs, nil)
		for i := range 30 {
			for _, a := range addrs {
				o := OutcomeOK
				if a == "127.0.0.2" && i%3 == 0 {
					o = OutcomePolicy
				}
				session(e, dest(i), a, o)
			}
		}
		evs := e.rec.take()
		var rep []Event
		for _, ev := range evs {
			if ev.Kind == EventReputation {
				rep = append(rep, ev)
			}
		}
		if len(rep) != 1 || rep[0].Addr != ip("127.0.0.2") {
			t.Fatalf("reputation events %+v, want one for 127.0.0.2", rep)
		}
		// The third block, at its 7th session: 3 of 7, against none of
		// the 7 + 6 the others had by then.
		if want := "3 of 7 sessions refused by policy (43%) by 3 destinations within 10m0s; the rest of the pool 0 of 13 (0%)"; rep[0].Reason != want {
			t.Errorf("reason %q, want %q", rep[0].Reason, want)
		}
	})
}

// TestAcquireExcept: any address but the one named; ErrNoAddress when it
// is the only one, a *CoolingError when every other one cools.
func TestAcquireExcept(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.1", "127.0.0.2"}, nil)
	for range 4 {
		l, err := e.p.AcquireExcept(context.Background(), ip(mx), ip("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		if l.Addr() != ip("127.0.0.2") {
			t.Fatalf("AcquireExcept(127.0.0.1) leased %s", l.Addr())
		}
		l.Release(OutcomeOK)
	}
	e.acquire(t, mx, "127.0.0.2").Release(OutcomeGreylisted)
	var ce *CoolingError
	if _, err := e.p.AcquireExcept(context.Background(), ip(mx), ip("127.0.0.1")); !errors.As(err, &ce) {
		t.Fatalf("the other address cooling: %v, want a *CoolingError", err)
	}
	one := newEnv(t, []string{"127.0.0.1"}, nil)
	if _, err := one.p.AcquireExcept(context.Background(), ip(mx), ip("127.0.0.1")); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("no other address: %v, want ErrNoAddress", err)
	}
}
