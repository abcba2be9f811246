package pebble

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

func TestCreditsArithmetic(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)

	_, err := db.Hold(t.Context(), acct, 1, "r0")
	var ice *storage.InsufficientCreditsError
	if !errors.As(err, &ice) || !errors.Is(err, storage.ErrInsufficientCredits) || ice.Current != 0 || ice.Needed != 1 || ice.Shortfall() != 1 {
		t.Fatalf("hold on an empty account: %v", err)
	}
	if _, err := db.AddCredits(t.Context(), acct, 3, "top-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(t.Context(), acct, 0, ""); err == nil {
		t.Error("AddCredits(0)")
	}
	h1, err := db.Hold(t.Context(), acct, 1, "r1")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := db.Hold(t.Context(), acct, 1, "r2")
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Credits(t.Context(), acct)
	if err != nil || c.Balance != 3 || c.Held != 2 || c.Available() != 1 {
		t.Fatalf("two holds: %+v, %v", c, err)
	}
	_, err = db.Hold(t.Context(), acct, 2, "r3")
	if !errors.As(err, &ice) || ice.Current != 3 || ice.Held != 2 || ice.Available() != 1 || ice.Needed != 2 {
		t.Fatalf("hold of 2 with 1 available: %v", err)
	}
	// The balance cannot go below what is held.
	if _, err := db.SetCredits(t.Context(), acct, 1, ""); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("SetCredits below held: %v", err)
	}

	ch, err := db.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Balance != 2 || ch.Entry.Kind != storage.EntryCharge || ch.Entry.HoldSeq != h1.Seq || ch.Entry.Ref != ch.Result.ID {
		t.Errorf("charge: %+v", ch)
	}
	_, err = db.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")})
	wantErr(t, err, storage.ErrHoldNotActive)
	_, err = db.Release(t.Context(), h1, "")
	wantErr(t, err, storage.ErrHoldNotActive)

	rel, err := db.Release(t.Context(), h2, "engine error")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Balance != 2 || rel.Held != 0 || rel.Note != "engine error" {
		t.Errorf("release: %+v", rel)
	}
	_, err = db.Charge(t.Context(), h2, storage.ChargeRequest{Result: result("b@example.com", "valid")})
	wantErr(t, err, storage.ErrHoldNotActive)

	if e, err := db.SetCredits(t.Context(), acct, 10, "plan change"); err != nil || e.Delta != 8 || e.Balance != 10 {
		t.Fatalf("SetCredits: %+v, %v", e, err)
	}
	if cr, err := db.Credits(t.Context(), acct); err != nil || cr.Balance != 10 {
		t.Errorf("balance %d, %v", cr.Balance, err)
	}
	es := checkLedger(t, db.DB, acct)
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind.String())
	}
	if got := fmt.Sprint(kinds); got != "[add hold hold charge release set]" {
		t.Errorf("ledger kinds %s", got)
	}
	if page, err := db.Ledger(t.Context(), acct, 2, 2); err != nil || len(page) != 2 || page[0].Seq != 3 {
		t.Errorf("Ledger page: %+v, %v", page, err)
	}

	// Arguments.
	if _, err := db.Hold(t.Context(), acct, 0, ""); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("Hold(0): %v", err)
	}
	_, err = db.Hold(t.Context(), "acct_nope", 1, "")
	wantErr(t, err, storage.ErrNotFound)
	h := db.hold(t, acct, 1, "")
	if _, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "x@y"}}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("charge with a result without status: %v", err)
	}
	if _, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "x@y", Status: "valid", Kind: storage.KindBatch}}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("charge with a batch result: %v", err)
	}
	// A refused charge leaves the hold active.
	if _, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: result("x@y", "valid")}); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, db.DB, acct)
}

// 200 concurrent holds on 100 credits: exactly 100 succeed, the balance
// never goes negative, and the ledger adds up.
func TestHoldConcurrency(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 100)
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	holds := make(chan storage.Hold, 200)
	start := make(chan struct{})
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h, err := db.Hold(t.Context(), acct, 1, fmt.Sprint("req-", i))
			var ice *storage.InsufficientCreditsError
			switch {
			case err == nil:
				ok.Add(1)
				holds <- h
			case errors.As(err, &ice):
				if ice.Available() < 0 {
					t.Errorf("available %d", ice.Available())
				}
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(holds)
	if ok.Load() != 100 || refused.Load() != 100 {
		t.Fatalf("%d holds, %d refused", ok.Load(), refused.Load())
	}
	// Charge half, release the other half, concurrently.
	i := 0
	for h := range holds {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				_, err = db.Charge(t.Context(), h, storage.ChargeRequest{Result: result(fmt.Sprintf("u%d@example.com", i), "valid")})
			} else {
				_, err = db.Release(t.Context(), h, "")
			}
			if err != nil {
				t.Error(err)
			}
		}(i)
		i++
	}
	wg.Wait()
	es := checkLedger(t, db.DB, acct)
	if cr, err := db.Credits(t.Context(), acct); err != nil || cr.Balance != 50 {
		t.Errorf("balance %d (%v), want 50", cr.Balance, err)
	}
	if len(es) != 1+100+100 {
		t.Errorf("%d ledger entries", len(es))
	}
	db.reopen(t)
	checkLedger(t, db.DB, acct)
	if cr, err := db.Credits(t.Context(), acct); err != nil || cr.Balance != 50 {
		t.Errorf("after reopen: balance %d, %v", cr.Balance, err)
	}
}

// Holds a process leaves behind are released at the next Open.
func TestStaleHoldsReleasedAtOpen(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 5)
	other := db.account(t, 5)
	h1 := db.hold(t, acct, 1, "a")
	db.hold(t, acct, 2, "b")
	db.hold(t, other, 1, "c")
	if _, err := db.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")}); err != nil {
		t.Fatal(err)
	}
	db.reopen(t)

	for _, a := range []string{acct, other} {
		es := checkLedger(t, db.DB, a)
		last := es[len(es)-1]
		if last.Kind != storage.EntryRelease || last.Note != "released at open" || last.Held != 0 {
			t.Errorf("%s: last entry %+v", a, last)
		}
		if hs, err := db.Holds(t.Context(), a); err != nil || len(hs) != 0 {
			t.Errorf("%s: holds %v, %v", a, hs, err)
		}
	}
	if cr, err := db.Credits(t.Context(), acct); err != nil || cr.Balance != 4 {
		t.Errorf("balance %d (%v), want 4 (one charge)", cr.Balance, err)
	}
	// The released hold cannot be charged any more.
	_, err := db.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")})
	wantErr(t, err, storage.ErrHoldNotActive)
	// Seqs go on after a restart.
	h, err := db.Hold(t.Context(), acct, 1, "d")
	if err != nil || h.Seq != uint64(len(checkLedger(t, db.DB, acct))) {
		t.Errorf("hold after reopen: %+v, %v", h, err)
	}
}

// Charges seal their receipts outside the account's lock and so finish in
// any order; their writes must still reach Pebble in the order of the
// lock. Seals here sleep for random times (every 10th fails), beside holds,
// releases and credits added, and most charges complete an idempotency
// record (whose lock stripes they share: a charge waiting for the one
// ahead must hold none); a reader checks all along that the stored ledger
// has no gap and each entry follows from the one before, and at the end
// every receipt carries the balance of its own ledger entry, every result
// is in the history once and every idempotency key replays.
func TestChargesSealOutOfOrder(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 1_000)
	const n = 300
	type charged struct {
		sealed int64
		c      storage.Charged
		idem   *storage.IdemRef
	}
	out := make(chan charged, n)
	stop := make(chan struct{})
	var readerWG, wg sync.WaitGroup
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			es, err := db.Ledger(t.Context(), acct, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			var bal int64
			for i, e := range es {
				bal += e.Delta
				if e.Seq != uint64(i+1) || e.Balance != bal {
					t.Errorf("stored ledger: entry %d has seq %d, balance %d; chain says %d", i+1, e.Seq, e.Balance, bal)
					return
				}
			}
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 15 {
			case 7:
				h, err := db.Hold(t.Context(), acct, 1, "r")
				if err == nil {
					_, err = db.Release(t.Context(), h, "")
				}
				if err != nil {
					t.Error(err)
				}
				return
			case 11:
				if _, err := db.AddCredits(t.Context(), acct, 2, ""); err != nil {
					t.Error(err)
				}
				return
			}
			var sealed int64
			req := storage.ChargeRequest{
				Result: result(fmt.Sprintf("u%d@example.com", i), "valid"),
				Seal: func(_ storage.Result, balance int64) (storage.Sealed, error) {
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					if i%10 == 3 {
						return storage.Sealed{}, errors.New("signer down")
					}
					sealed = balance
					return storage.Sealed{Receipt: fmt.Appendf(nil, "%d", balance), Response: storage.IdemResponse{Status: 200}}, nil
				},
			}
			// Most charges complete an idempotency record: 300 keys
			// share 64 lock stripes, so charges waiting for each other
			// meet on them.
			if i%3 != 0 {
				ref := storage.IdemRef{Account: acct, Endpoint: "POST /v1/validate", Key: fmt.Sprintf("key-%04d", i)}
				if out, _, err := db.BeginIdem(t.Context(), ref, []byte("hash")); err != nil || out != storage.IdemNew {
					t.Errorf("BeginIdem %d: %v %v", i, out, err)
					return
				}
				req.Idem = &ref
			}
			var c storage.Charged
			var err error
			if i%2 == 0 {
				c, err = db.ChargeDirect(t.Context(), acct, 1, req)
			} else {
				var h storage.Hold
				if h, err = db.Hold(t.Context(), acct, 1, "r"); err == nil {
					c, err = db.Charge(t.Context(), h, req)
				}
			}
			switch {
			case i%10 == 3:
				if err == nil {
					t.Errorf("charge %d: the seal failed, the charge did not", i)
				}
			case err != nil:
				t.Error(err)
			default:
				out <- charged{sealed, c, req.Idem}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	close(out)

	es := checkLedger(t, db.DB, acct)
	got := 0
	for c := range out {
		got++
		e := es[c.c.Entry.Seq-1]
		if e.Kind != storage.EntryCharge || e.Ref != c.c.Result.ID || e.Balance != c.sealed || c.c.Balance != c.sealed {
			t.Errorf("receipt sealed with balance %d, charge %+v, entry %+v", c.sealed, c.c, e)
		}
		r, err := db.GetResult(t.Context(), c.c.Result.ID)
		if err != nil || string(r.Receipt) != fmt.Sprint(c.sealed) {
			t.Errorf("result %s: %q, %v", c.c.Result.ID, r.Receipt, err)
		}
		if c.idem != nil {
			if o, _, err := db.BeginIdem(t.Context(), *c.idem, []byte("hash")); err != nil || o != storage.IdemReplay {
				t.Errorf("idempotency key %s after its charge: %v %v", c.idem.Key, o, err)
			}
		}
	}
	var voided int
	for _, e := range es {
		if e.Kind == storage.EntryAdd && strings.HasPrefix(e.Note, "void charge") {
			voided++
		}
	}
	if want := n / 10; voided != want {
		t.Errorf("%d charges voided, want %d", voided, want)
	}
	seen := map[string]bool{}
	for cursor := ""; ; {
		page, err := db.ListHistory(t.Context(), acct, storage.HistoryAll, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range page.Rows {
			if seen[row.ResultID] {
				t.Errorf("history row %s twice", row.ResultID)
			}
			seen[row.ResultID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != got {
		t.Errorf("%d history rows, %d charges answered", len(seen), got)
	}
	db.reopen(t)
	checkLedger(t, db.DB, acct)
}

// TestLateProbesHistory: probes end out of the order they started in, as
// concurrent real-time validations do; each row goes to its probed_at's
// place, from memory within the recent span, from Pebble before it (rows
// older than what this process wrote, and after a reopen). Every row is in
// the history exactly once, newest probed_at first, however it is paged.
func TestLateProbesHistory(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 100000)
	rng := rand.New(rand.NewPCG(7, 7))
	base := db.clock.Now()
	want := map[uint64]time.Time{}
	add := func(n int, maxLate time.Duration) {
		for range n {
			db.clock.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
			r := result(fmt.Sprintf("a%d@example.com", len(want)), "valid")
			// Started up to maxLate ago, several per millisecond.
			r.ProbedAt = db.clock.Now().Add(-time.Duration(rng.Int64N(int64(maxLate) + 1)).Truncate(time.Millisecond))
			if r.ProbedAt.Before(base) {
				r.ProbedAt = base
			}
			c := db.validate(t, acct, r)
			want[c.Result.HistoryID] = c.Result.ProbedAt
		}
	}
	add(2000, 40*time.Millisecond)
	db.reopen(t)
	add(500, 20*time.Millisecond) // late rows older than the reopened process's first
	// Long after: rows older than the recent span come from Pebble.
	db.clock.Advance(3 * time.Minute)
	add(300, 2*time.Minute)

	for _, limit := range []int{1, 7, 200} {
		seen := map[uint64]bool{}
		var prev time.Time
		cursor := ""
		for {
			p, err := db.ListHistory(t.Context(), acct, storage.HistoryAll, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Rows {
				if seen[r.ID] {
					t.Fatalf("limit %d: row %d twice", limit, r.ID)
				}
				seen[r.ID] = true
				if !prev.IsZero() && r.ProbedAt.After(prev) {
					t.Fatalf("limit %d: row %d probed %v after the row before it (%v)", limit, r.ID, r.ProbedAt, prev)
				}
				prev = r.ProbedAt
			}
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		if len(seen) != len(want) {
			t.Fatalf("limit %d: %d rows paged, %d written", limit, len(seen), len(want))
		}
	}
}
