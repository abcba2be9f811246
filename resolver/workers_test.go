package resolver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestMaxInFlight: more lookups than MaxInFlight at once all get their
// answer, and the upstream never has more than MaxInFlight of them at
// once; the others waited in the queue.
func TestMaxInFlight(t *testing.T) {
	checkLeaks(t)
	var now, peak atomic.Int64
	s := startServer(t, func(s *testServer, w dns.ResponseWriter, req *dns.Msg) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		s.sleep(30 * time.Millisecond)
		now.Add(-1)
		answerA(t)(s, w, req)
	})
	const limit, n = 4, 40
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, MaxInFlight: limit})
	queued := queueWaits.Get()

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.LookupIP(context.Background(), "ip4", fmt.Sprintf("h%d.bound.test", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("lookup %d: %v", i, err)
		}
	}
	if p := peak.Load(); p > limit {
		t.Errorf("the upstream had %d queries at once, want at most MaxInFlight %d", p, limit)
	}
	if s.total() != n {
		t.Errorf("%d upstream queries, want %d", s.total(), n)
	}
	if queueWaits.Get() == queued {
		t.Error("no query waited for a worker")
	}
	if q := queriesQueued.Load(); q != 0 {
		t.Errorf("%d queries still counted as queued", q)
	}
}

// TestCloseWithQueuedQueries: Close ends the query in flight and those
// waiting for a worker; their callers get a temporary failure at once and
// no goroutine is left.
func TestCloseWithQueuedQueries(t *testing.T) {
	checkLeaks(t)
	hole := startBlackHole(t)
	r, err := New(Options{Upstreams: []string{hole.addr}, Timeout: 2 * time.Minute, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := r.LookupMX(context.Background(), fmt.Sprintf("q%d.pending.test", i))
			done <- err
		}()
	}
	for hole.n.Load() == 0 || queriesQueued.Load() < n-1 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	r.Close()
	for range n {
		if err := <-done; !errors.Is(err, ErrTemporary) {
			t.Errorf("lookup at Close: %v, want a temporary failure", err)
		}
	}
	if d := time.Since(start); d > 30*time.Second { // against the 2 min timeout
		t.Errorf("Close and the failures took %v", d)
	}
	if got := hole.n.Load(); got != 1 {
		t.Errorf("the upstream got %d queries, want only the one in flight", got)
	}
}

// TestIdleWorkersExit: after a burst, a steady trickle of queries keeps
// one worker busy, and the burst's other workers exit once idle for
// workerIdle (they are not handed the trickle in turn, which would keep
// them all alive).
func TestIdleWorkersExit(t *testing.T) {
	checkLeaks(t)
	old := workerIdle
	t.Cleanup(func() { workerIdle = old })
	workerIdle = 300 * time.Millisecond // read by New
	var slow atomic.Bool
	slow.Store(true)
	s := startServer(t, func(s *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if slow.Load() {
			s.sleep(50 * time.Millisecond)
		}
		answerA(t)(s, w, req)
	})
	base := workersRunning.Load()
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, MaxInFlight: 64})

	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = r.LookupIP(context.Background(), "ip4", fmt.Sprintf("b%d.burst.test", i))
		}()
	}
	wg.Wait()
	if got := workersRunning.Load() - base; got < 32 {
		t.Fatalf("%d workers after a burst of 64 slow queries, want most of 64", got)
	}
	slow.Store(false)
	// One query at a time, every 2 ms: a worker idle for 300 ms would be
	// handed one long before it expired if queries went round the idle
	// workers.
	for i := range 400 {
		if _, err := r.LookupIP(context.Background(), "ip4", fmt.Sprintf("t%d.trickle.test", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := workersRunning.Load() - base; got > 4 {
		t.Errorf("%d workers left after a trickle of one query at a time, want the burst's idle ones gone", got)
	}
}

// orderServer starts a server that answers A (TTL 300 s) 20 ms after each
// query and records the names asked, in order.
type orderServer struct {
	*testServer
	mu    sync.Mutex
	names []string
}

func startOrderServer(t *testing.T) *orderServer {
	o := &orderServer{}
	o.testServer = startServer(t, func(s *testServer, w dns.ResponseWriter, req *dns.Msg) {
		o.mu.Lock()
		o.names = append(o.names, req.Question[0].Name)
		o.mu.Unlock()
		s.sleep(20 * time.Millisecond)
		answerA(t)(s, w, req)
	})
	return o
}

// order returns the names asked so far and forgets them.
func (o *orderServer) order() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := fmt.Sprint(o.names)
	o.names = nil
	return s
}

// lookupAsync looks name up in a goroutine counted by wg.
func lookupAsync(t *testing.T, wg *sync.WaitGroup, r *Resolver, ctx context.Context, name string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := r.LookupIP(ctx, "ip4", name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
}

// waitQueued waits until n queries wait for a worker.
func waitQueued(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queriesQueued.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d queries queued, want %d", queriesQueued.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUrgentGoFirst: lookups with an Urgent context that must wait for a
// worker go ahead of the queued ones of unmarked contexts, and an urgent
// lookup that joins a queued query moves it ahead.
func TestUrgentGoFirst(t *testing.T) {
	checkLeaks(t)
	s := startOrderServer(t)
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, MaxInFlight: 1})
	var wg sync.WaitGroup
	bg := context.Background()
	lookupAsync(t, &wg, r, bg, "first.prio.test")
	for s.total() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := range 4 {
		lookupAsync(t, &wg, r, bg, fmt.Sprintf("n%d.prio.test", i))
		waitQueued(t, int64(i+1))
	}
	lookupAsync(t, &wg, r, Urgent(bg), "u.prio.test")
	waitQueued(t, 5)
	joins := inflightJoins.Get()
	lookupAsync(t, &wg, r, Urgent(bg), "n3.prio.test") // joins n3, queued
	for inflightJoins.Get() == joins {
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	want := []string{"first.prio.test.", "u.prio.test.", "n3.prio.test.", "n0.prio.test.", "n1.prio.test.", "n2.prio.test."}
	if got := s.order(); got != fmt.Sprint(want) {
		t.Errorf("upstream saw %v, want %v", got, want)
	}
	if q := queriesQueued.Load(); q != 0 {
		t.Errorf("%d queries still counted as queued", q)
	}
}

// TestPrefetchWaitsItsTurn: a refresh (Options.Prefetch) waiting for a
// worker goes after every lookup a caller waits for, until a caller that
// missed the expired entry joins it and takes it into its own lane.
func TestPrefetchWaitsItsTurn(t *testing.T) {
	checkLeaks(t)
	s := startOrderServer(t)
	clock := newFakeClock()
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, MaxInFlight: 1, Prefetch: true, Now: clock.Now})
	ctx := context.Background()
	for _, n := range []string{"r1.prio.test", "r2.prio.test"} {
		if _, err := r.LookupIP(ctx, "ip4", n); err != nil {
			t.Fatal(err)
		}
	}
	s.order()
	var wg sync.WaitGroup
	clock.Advance(280 * time.Second) // the last tenth of 300 s
	n := s.total()
	lookupAsync(t, &wg, r, ctx, "first.prio.test") // holds the one worker
	for s.total() == n {
		time.Sleep(time.Millisecond)
	}
	for i, name := range []string{"r1.prio.test", "r2.prio.test"} {
		if res, err := r.LookupIP(ctx, "ip4", name); err != nil || res.TTL != 20*time.Second {
			t.Fatalf("%s in its last tenth: %+v %v, want the cached answer", name, res, err)
		}
		waitQueued(t, int64(i+1))
	}
	lookupAsync(t, &wg, r, ctx, "n0.prio.test")
	waitQueued(t, 3)
	clock.Advance(21 * time.Second)
	joins := inflightJoins.Get()
	lookupAsync(t, &wg, r, ctx, "r2.prio.test") // expired: joins its refresh, into the batch lane
	for inflightJoins.Get() == joins {
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for queriesQueued.Load() != 0 || s.total() < n+4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d queries still queued", queriesQueued.Load())
		}
		time.Sleep(time.Millisecond)
	}
	want := []string{"first.prio.test.", "n0.prio.test.", "r2.prio.test.", "r1.prio.test."}
	if got := s.order(); got != fmt.Sprint(want) {
		t.Errorf("upstream saw %v, want %v", got, want)
	}
}
