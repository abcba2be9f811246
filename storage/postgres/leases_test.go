package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// openLeasing opens a box with credit leases on the fleet's database.
func openLeasing(t *testing.T, srv *pgtest.Server, box string, lease time.Duration) *DB {
	t.Helper()
	db, err := Open(context.Background(), srv.DSN("fleet"), Options{Box: box, Lease: lease, CreditLeases: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func leaseAccount(t *testing.T, db *DB, credits int64) string {
	t.Helper()
	a, err := db.CreateAccount(t.Context(), "leases", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(t.Context(), a.ID, credits, ""); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func leaseCharge(t *testing.T, db *DB, h storage.Hold, email string) (storage.Charged, error) {
	t.Helper()
	return db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: email, Status: "valid"}})
}

// TestCreditLeases: a lone validation holds its credit as before; the next
// within a second takes a block of 1 % of the available credits, and every
// validation after it gets its credit from the block: one ledger entry a
// validation (its charge, naming the block), no holds row of its own. A
// released part goes back to the block; a part ends once. The block goes
// back after its idle time with one release of its rest, and the ledger
// adds up.
func TestCreditLeases(t *testing.T) {
	srv, _, _ := fleetOf(t, time.Minute)
	db := openLeasing(t, srv, "a", time.Minute)
	ctx := t.Context()
	acct := leaseAccount(t, db, 1_000_000)

	h0, err := db.Hold(ctx, acct, 1, "r0")
	if err != nil || h0.Part != 0 {
		t.Fatalf("a lone validation's hold: %+v, %v; want a hold of its own", h0, err)
	}
	h1, err := db.Hold(ctx, acct, 1, "r1")
	if err != nil || h1.Part == 0 {
		t.Fatalf("the second validation within a second: %+v, %v; want a part of a block", h1, err)
	}
	hs, err := db.Holds(ctx, acct)
	// 999,999 available when the block was taken: 1 % of it.
	if err != nil || len(hs) != 2 || hs[1].Ref != leaseRef || hs[1].N != 9_999 || hs[1].Seq != h1.Seq {
		t.Fatalf("holds %+v, %v; want r0's and a block of 9,999", hs, err)
	}
	if _, err := leaseCharge(t, db, h0, "h0@x.test"); err != nil {
		t.Fatal(err)
	}

	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	charged, released := 1, 0 // h1 is charged below
	for i := range n {
		wg.Go(func() {
			h, err := db.Hold(ctx, acct, 1, fmt.Sprintf("req-%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			if h.Part == 0 || h.Seq != h1.Seq {
				t.Errorf("hold %+v: not a part of the block %d", h, h1.Seq)
			}
			if i%10 == 0 {
				if _, err := db.Release(ctx, h, "engine error"); err != nil {
					t.Error(err)
				}
				if _, err := db.Release(ctx, h, "again"); !errors.Is(err, storage.ErrHoldNotActive) {
					t.Errorf("a part released twice: %v", err)
				}
				if _, err := leaseCharge(t, db, h, "late@x.test"); !errors.Is(err, storage.ErrHoldNotActive) {
					t.Errorf("a released part charged: %v", err)
				}
				mu.Lock()
				released++
				mu.Unlock()
				return
			}
			c, err := leaseCharge(t, db, h, fmt.Sprintf("p%d@x.test", i))
			if err != nil {
				t.Error(err)
				return
			}
			if c.Entry.HoldSeq != h1.Seq || c.Entry.Amount != 1 || c.Entry.Kind != storage.EntryCharge {
				t.Errorf("a part's charge entry %+v: want a charge of 1 naming the block", c.Entry)
			}
			mu.Lock()
			charged++
			mu.Unlock()
		})
	}
	wg.Wait()
	if _, err := leaseCharge(t, db, h1, "h1@x.test"); err != nil {
		t.Fatal(err)
	}
	if _, err := leaseCharge(t, db, h1, "h1b@x.test"); !errors.Is(err, storage.ErrHoldNotActive) {
		t.Fatalf("a part charged twice: %v", err)
	}
	hs, err = db.Holds(ctx, acct)
	if err != nil || len(hs) != 1 || hs[0].N != int64(9_999-charged) {
		t.Fatalf("holds %+v, %v; want the block with %d left", hs, err, 9_999-charged)
	}
	if c, err := db.Credits(ctx, acct); err != nil || c.Balance != int64(1_000_000-1-charged) || c.Held != hs[0].N {
		t.Fatalf("credits %+v, %v", c, err)
	}

	db.returnLeases(time.Now().Add(leaseIdle))
	if hs, err := db.Holds(ctx, acct); err != nil || len(hs) != 0 || db.leases.out() != 0 {
		t.Fatalf("holds after the block's return %+v, %v; %d blocks out", hs, err, db.leases.out())
	}
	es := storagetest.CheckLedger(t, db, acct)
	// add, r0's hold and charge, the block's hold, a charge a part, the
	// block's release.
	if want := 1 + 2 + 1 + charged + 1; len(es) != want {
		t.Fatalf("%d ledger entries, want %d (%d parts charged, %d released)", len(es), want, charged, released)
	}
	if last := es[len(es)-1]; last.Kind != storage.EntryRelease || last.HoldSeq != h1.Seq || last.Amount != int64(9_999-charged) || last.Held != 0 {
		t.Fatalf("the block's return %+v", last)
	}
}

// TestCreditLeaseThresholds: no block while fewer than leaseMin credits
// are available, and none for a hold more than leaseRecent after the
// account's last hold on the box; the hold right after it takes one.
func TestCreditLeaseThresholds(t *testing.T) {
	srv, _, _ := fleetOf(t, time.Minute)
	db := openLeasing(t, srv, "a", time.Minute)
	ctx := t.Context()
	acct := leaseAccount(t, db, leaseMin-1)
	for i := range 5 {
		h, err := db.Hold(ctx, acct, 1, fmt.Sprint(i))
		if err != nil || h.Part != 0 || h.N != 1 {
			t.Fatalf("hold %d with %d credits: %+v, %v; want a hold of 1", i, leaseMin-1, h, err)
		}
	}
	if db.leases.out() != 0 {
		t.Fatal("a block taken under leaseMin")
	}

	rich := leaseAccount(t, db, 100_000)
	if h, err := db.Hold(ctx, rich, 1, "first"); err != nil || h.Part != 0 {
		t.Fatalf("the first hold: %+v, %v; want a hold of its own", h, err)
	}
	time.Sleep(leaseRecent + 100*time.Millisecond)
	if h, err := db.Hold(ctx, rich, 1, "later"); err != nil || h.Part != 0 {
		t.Fatalf("a hold %v after the last: %+v, %v; want a hold of its own", leaseRecent+100*time.Millisecond, h, err)
	}
	h, err := db.Hold(ctx, rich, 1, "next")
	if err != nil || h.Part == 0 {
		t.Fatalf("the hold right after: %+v, %v; want a part of a block", h, err)
	}
	if at := db.now().Truncate(time.Millisecond); h.At.IsZero() || h.At.After(at) {
		t.Fatalf("the part's time %v, now %v", h.At, at)
	}
}

// TestCreditLeasesNoOverdraft: two boxes with small blocks (at most half
// the credits available, from 10) validate 300 times at once for an
// account of 100 credits. Nothing beyond the balance is charged (the
// table's CHECK would refuse it; each charge takes from its block only
// what the block still has); once the blocks are back every credit is
// there to charge: exactly 100 charges in all, none held, the ledger adds
// up.
func TestCreditLeasesNoOverdraft(t *testing.T) {
	srv, _, _ := fleetOf(t, time.Minute)
	a, b := openLeasing(t, srv, "a", time.Minute), openLeasing(t, srv, "b", time.Minute)
	for _, db := range []*DB{a, b} {
		db.leases.min, db.leases.share, db.leases.max = 10, 4, 50
	}
	ctx := t.Context()
	acct := leaseAccount(t, a, 100)
	var mu sync.Mutex
	charged, refused, parts := 0, 0, 0
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			db := []*DB{a, b}[i%2]
			h, err := db.Hold(ctx, acct, 1, fmt.Sprint(i))
			if err == nil {
				_, err = leaseCharge(t, db, h, fmt.Sprintf("n%d@x.test", i))
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				charged++
				if h.Part != 0 {
					parts++
				}
			case errors.Is(err, storage.ErrInsufficientCredits):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if parts == 0 {
		t.Fatal("no validation got its credit from a block")
	}
	for _, db := range []*DB{a, b} {
		db.returnLeases(time.Now().Add(leaseIdle))
	}
	for i := 0; ; i++ {
		h, err := a.Hold(ctx, acct, 1, "after")
		if errors.Is(err, storage.ErrInsufficientCredits) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaseCharge(t, a, h, fmt.Sprintf("after%d@x.test", i)); err != nil {
			t.Fatal(err)
		}
		charged++
	}
	a.returnLeases(time.Now().Add(leaseIdle))
	if c, err := a.Credits(ctx, acct); err != nil || charged != 100 || c.Balance != 0 || c.Held != 0 {
		t.Fatalf("%d charged (%d from blocks, %d refused while blocks were out); credits %+v, %v: want 100 charged, none left or held",
			charged, parts, refused, c, err)
	}
	storagetest.CheckLedger(t, a, acct)
}

// TestCreditLeaseBlockGone: an operator sets the balance below the credits
// a box's block holds: the block ends (released in the set's
// transaction), and the box's parts in flight are charged from the
// available credits, or refused when there are none, never beyond the
// balance; the box takes no more parts from the block, and its return
// finds it released.
func TestCreditLeaseBlockGone(t *testing.T) {
	srv, _, _ := fleetOf(t, time.Minute)
	a, b := openLeasing(t, srv, "a", time.Minute), openLeasing(t, srv, "b", time.Minute)
	ctx := t.Context()
	acct := leaseAccount(t, a, 100_000)
	var parts []storage.Hold
	for i := range 4 {
		h, err := a.Hold(ctx, acct, 1, fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := leaseCharge(t, a, h, "first@x.test"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		parts = append(parts, h)
	}
	if parts[0].Part == 0 {
		t.Fatal("no block taken")
	}
	e, err := b.SetCredits(ctx, acct, 1, "set low")
	if err != nil || e.Balance != 1 || e.Held != 0 {
		t.Fatalf("SetCredits below the block: %+v, %v", e, err)
	}
	c, err := leaseCharge(t, a, parts[0], "p0@x.test")
	if err != nil || c.Entry.HoldSeq != 0 || c.Balance != 0 {
		t.Fatalf("a part whose block is gone: %+v, %v; want charged from the available credit", c.Entry, err)
	}
	if _, err := leaseCharge(t, a, parts[1], "p1@x.test"); !errors.Is(err, storage.ErrInsufficientCredits) {
		t.Fatalf("a part whose block is gone, with no credit left: %v", err)
	}
	if _, err := a.AddCredits(ctx, acct, 50_000, ""); err != nil {
		t.Fatal(err)
	}
	h, err := a.Hold(ctx, acct, 1, "after")
	if err != nil || h.Seq == parts[0].Seq {
		t.Fatalf("a hold after the block ended: %+v, %v; want none from it", h, err)
	}
	if _, err := a.Release(ctx, parts[2], "engine error"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, h, "engine error"); err != nil {
		t.Fatal(err)
	}
	a.returnLeases(time.Now().Add(leaseIdle))
	if hs, err := a.Holds(ctx, acct); err != nil || len(hs) != 0 || a.leases.out() != 0 {
		t.Fatalf("holds %+v, %v, %d blocks out", hs, err, a.leases.out())
	}
	if c, err := a.Credits(ctx, acct); err != nil || c.Balance != 50_000 || c.Held != 0 {
		t.Fatalf("credits %+v, %v", c, err)
	}
	storagetest.CheckLedger(t, a, acct)
}

// TestCreditLeaseKilledBox: a box killed (no Close) with a block and a
// part out: the block stays held until the box's lease runs out, then
// another box releases it with its other holds.
func TestCreditLeaseKilledBox(t *testing.T) {
	const lease = 2 * time.Second
	srv, _, _ := fleetOf(t, lease)
	a, b := openLeasing(t, srv, "a", lease), openLeasing(t, srv, "b", lease)
	ctx := t.Context()
	acct := leaseAccount(t, b, 100_000)
	for i := range 2 {
		if _, err := a.Hold(ctx, acct, 1, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if a.leases.out() != 1 {
		t.Fatal("no block taken")
	}
	a.Abandon()
	c, err := b.Credits(ctx, acct)
	if err != nil || c.Held != 1+999 { // the lone hold, and 1 % of 99,999
		t.Fatalf("held while the killed box is within its lease: %+v, %v", c, err)
	}
	deadline := time.Now().Add(20 * lease)
	for {
		if _, err := b.Reap(); err != nil {
			t.Fatal(err)
		}
		if c, err = b.Credits(ctx, acct); err == nil && c.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("credits %+v, %v: the killed box's block is still held", c, err)
		}
		time.Sleep(lease / 4)
	}
	if c.Balance != 100_000 {
		t.Fatalf("balance %d after the release", c.Balance)
	}
	storagetest.CheckLedger(t, b, acct)
}
