package probe

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/probe/address"
)

// TestPoolsBatchDoesNotStarveRealtime fills every batch worker and its
// queue with long batch work, then shows that single validations still run
// at once on their own pool.
func TestPoolsBatchDoesNotStarveRealtime(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.slow.test", IP: "127.65.0.1", Mode: world.HostTarpit},
			{Name: "mx.fast.test", IP: "127.65.0.2"},
		},
		Domains: []*world.Domain{
			{Name: "slow.test", MX: []world.MX{{Pref: 10, Host: "mx.slow.test"}}, Mailboxes: map[string]world.MailboxState{"a": world.MailboxOK}},
			{Name: "fast.test", MX: []world.MX{{Pref: 10, Host: "mx.fast.test"}}, Mailboxes: map[string]world.MailboxState{"b": world.MailboxOK}},
		},
	}
	w.Defaults()
	e := startEnv(t, w, envOptions{})
	pools, err := NewPools(e.engine, PoolOptions{Realtime: 4, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pools.Close(10 * time.Second)

	// Batch work that holds its workers until canceled: a tarpit, which
	// never greets, with the engine's 5 s reply timeout.
	batchCtx, stopBatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pools.VerifyDomain(batchCtx, []address.Input{address.NewInput("a@slow.test")}, netip.Addr{})
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Wait until the batch pool is saturated.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, b := pools.Busy(); b == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("batch pool never filled")
		}
	}
	r, err := pools.Verify(ctx, address.NewInput("b@fast.test"))
	if err != nil || r.Status != StatusValid {
		t.Fatalf("single validation while the batch pool is full: %v %v", r, err)
	}
	if _, b := pools.Busy(); b != 2 {
		t.Errorf("%d batch workers busy after the single validation, want both still held", b)
	}
	stopBatch()
	wg.Wait()
}

func TestPoolsContextEndsBeforeWorker(t *testing.T) {
	w := &world.World{}
	w.Defaults()
	e := startEnv(t, w, envOptions{})
	pools, err := NewPools(e.engine, PoolOptions{Realtime: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pools.Close(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pools.Verify(ctx, address.NewInput("x@y.test")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

// TestPoolsBudgetEndsOnTarpit: a probe that runs into its deadline (a
// tarpit, with replies allowed longer than the budget) is a verdict,
// unknown/timeout, not an error, however the deadline races the answer.
func TestPoolsBudgetEndsOnTarpit(t *testing.T) {
	w := &world.World{
		Hosts:   []*world.Host{{Name: "mx.pit.test", IP: "127.65.1.1", Mode: world.HostTarpit}},
		Domains: []*world.Domain{{Name: "pit.test", MX: []world.MX{{Pref: 10, Host: "mx.pit.test"}}}},
	}
	w.Defaults()
	e := startEnv(t, w, envOptions{cmdTO: 30 * time.Second})
	pools, err := NewPools(e.engine, PoolOptions{Realtime: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pools.Close(10 * time.Second)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		r, err := pools.Verify(ctx, address.NewInput("a@pit.test"))
		cancel()
		if err != nil || r.Status != StatusUnknown || r.Reason != ReasonTimeout {
			t.Fatalf("tarpit at the budget's end: %+v %v", r, err)
		}
	}
}
