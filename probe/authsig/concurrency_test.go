package authsig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe/authsig"
)

// TestCollectorConcurrency: with Concurrency 1, a second domain's
// collection waits until the first has ended, and one begun by
// StartUrgent goes ahead of those begun by Start before it.
func TestCollectorConcurrency(t *testing.T) {
	m := newMockDNS()
	// The first collection is held until every other one is queued, so
	// the order does not depend on how fast this goroutine runs.
	gate := make(chan struct{})
	m.gate["first.example"] = gate
	for _, d := range []string{"b.example", "c.example", "urgent.example"} {
		m.slow[d] = 50 * time.Millisecond
	}
	c := testCollector(t, m, func(o *authsig.CollectorOptions) { o.Concurrency = 1; o.Timeout = time.Minute })
	first := c.Start("first.example", []string{"mx.first.example"})
	for m.queries.Load() == 0 { // running, held at the gate
		time.Sleep(time.Millisecond)
	}
	b := c.Start("b.example", []string{"mx.b.example"})
	cc := c.Start("c.example", []string{"mx.c.example"})
	urgent := c.StartUrgent("urgent.example", []string{"mx.urgent.example"})
	close(gate)

	var order []string
	pending := map[string]*authsig.Pending{"first": first, "b": b, "c": cc, "urgent": urgent}
	deadline := time.After(20 * time.Second)
	for len(pending) > 0 {
		select {
		case <-first.Done():
		case <-b.Done():
		case <-cc.Done():
		case <-urgent.Done():
		case <-deadline:
			t.Fatalf("collections not done; ended in order %v", order)
		}
		// Note every collection found done now; with one running at a
		// time, at most one ends between two looks.
		for _, name := range []string{"first", "urgent", "b", "c"} {
			if p := pending[name]; p != nil {
				select {
				case <-p.Done():
					order = append(order, name)
					delete(pending, name)
				default:
				}
			}
		}
	}
	want := []string{"first", "urgent", "b", "c"}
	if len(order) != len(want) {
		t.Fatalf("order %v", order)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("collections ended in order %v, want %v", order, want)
		}
	}
}

// TestCollectorQueueWaitNotInTimeout: Options.Timeout counts from when a
// collection's lookups start, not from Start: a collection that waited
// for its turn longer than Timeout still gets its answers.
func TestCollectorQueueWaitNotInTimeout(t *testing.T) {
	m := newMockDNS()
	m.slow["stuck.example"] = time.Minute // cut by Timeout
	// Any delay detects a Timeout counted from Start; 2 s less this one
	// is the room left for a loaded machine.
	m.slow["next.example"] = 100 * time.Millisecond
	c := testCollector(t, m, func(o *authsig.CollectorOptions) {
		o.Concurrency = 1
		o.Timeout = 2 * time.Second
	})
	stuck := c.Start("stuck.example", nil)
	next := c.Start("next.example", nil)
	got := asJSON(t, next.Wait(ctx10s(t)))
	if got["spf"] != "none" || got["dmarc"] != "none" || got["dnssec"] != false {
		t.Errorf("the queued collection lost keys: %v", got)
	}
	if s := asJSON(t, stuck.Wait(ctx10s(t))); s["spf"] != nil {
		t.Errorf("the stuck collection has spf %v, though its lookup never answered", s["spf"])
	}
}

// TestCollectorRefreshWaitsItsTurn: a refresh (Refresh) that has to wait
// for a turn waits behind the collections callers wait for.
func TestCollectorRefreshWaitsItsTurn(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	m := newMockDNS() // every answer 300 s: the signals are cached 5 min
	gate := make(chan struct{})
	c := testCollector(t, m, func(o *authsig.CollectorOptions) {
		o.Concurrency = 1
		o.Timeout = time.Minute
		o.Now = clock.Now
		o.Refresh = true
	})
	c.Collect(ctx10s(t), "r.example", []string{"mx.r.example"})
	clock.Advance(4*time.Minute + 31*time.Second) // the last tenth
	m.mu.Lock()
	m.gate["first.example"] = gate
	mark := len(m.asked)
	m.mu.Unlock()
	c.Start("first.example", []string{"mx.first.example"})
	for authsig.InFlight(c) == 0 {
		time.Sleep(time.Millisecond)
	}
	if p := c.Start("r.example", []string{"mx.r.example"}); p == nil {
		t.Fatal("no pending")
	}
	b := c.Start("b.example", []string{"mx.b.example"})
	close(gate)
	b.Wait(ctx10s(t))
	for deadline := time.Now().Add(10 * time.Second); authsig.InFlight(c) > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("collections not done within 10s")
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lastB, firstR := -1, -1
	for i, n := range m.asked[mark:] {
		switch {
		case n == "b.example" || strings.HasSuffix(n, ".b.example"):
			lastB = i
		case (n == "r.example" || strings.HasSuffix(n, ".r.example")) && firstR < 0:
			firstR = i
		}
	}
	if firstR < 0 || lastB < 0 || firstR < lastB {
		t.Errorf("the refresh's first query at %d, the waited-for collection's last at %d: want the refresh after", firstR, lastB)
	}
}
