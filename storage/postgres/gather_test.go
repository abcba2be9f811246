package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
)

// TestArrivalPace: an account is busy once its charges come more often
// than once per gather, by the moving average of their gaps; a lone
// charge, a pause, or gather 0 makes no one wait; an account idle for
// ratesIdle is forgotten.
func TestArrivalPace(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &combiner{gather: 2 * time.Millisecond}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if c.arrived("a", at(0)) {
		t.Fatal("the first charge gathers")
	}
	if !c.arrived("a", at(time.Millisecond)) || !c.busy("a") {
		t.Fatal("a charge 1 ms after the last, gather 2 ms: not busy")
	}
	if c.busy("b") {
		t.Fatal("an account never seen is busy")
	}
	// A pause of 100 ms: the average moves by an eighth of it, past 2 ms.
	if c.arrived("a", at(101*time.Millisecond)) {
		t.Fatal("busy after a pause of 100 ms")
	}
	for i := range 40 { // back to a charge every 500 µs
		c.arrived("a", at(101*time.Millisecond+time.Duration(i+1)*500*time.Microsecond))
	}
	if !c.busy("a") {
		t.Fatalf("a charge every 500 µs: not busy (gap %s)", c.rates["a"].gap)
	}
	// Another account first seen two minutes later sweeps a's pace away.
	c.arrived("b", at(2*time.Minute))
	if _, ok := c.rates["a"]; ok {
		t.Fatal("an account idle for two minutes is remembered")
	}
	off := &combiner{}
	off.arrived("a", at(0))
	if off.arrived("a", at(time.Microsecond)) {
		t.Fatal("gather 0 gathers")
	}
}

// TestChargeGather: charges of one account that come every 5 ms, with
// ChargeGather 500 ms (room for a loaded machine's sleeps), go in a few
// transactions: the first alone (no pace known yet), the others in one or
// two (without the gather, each transaction takes the one or two that
// came while the one before ran). Each is charged once.
func TestChargeGather(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	pool := newPool(t, srv, "gather")
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, srv.DSN("gather"), Options{ChargeGather: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	acct := leaseAccount(t, db, 100)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.ChargeDirect(t.Context(), acct, 1, storage.ChargeRequest{Result: storage.Result{Email: fmt.Sprintf("g%d@x.test", i), Status: "valid"}})
			if err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	db.charges.mu.Lock()
	most := db.charges.most
	db.charges.mu.Unlock()
	if most < n/2 {
		t.Errorf("%d charges 5 ms apart, gather 500 ms: at most %d in one transaction", n, most)
	}
	if c, err := db.Credits(t.Context(), acct); err != nil || c.Balance != 100-n || c.Held != 0 {
		t.Fatalf("credits %+v (%v), want %d with none held", c, err, 100-n)
	}
}
