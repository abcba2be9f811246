package storage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCreditsArithmetic(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)

	_, err := db.Hold(acct, 1, "r0")
	var ice *InsufficientCreditsError
	if !errors.As(err, &ice) || !errors.Is(err, ErrInsufficientCredits) || ice.Current != 0 || ice.Needed != 1 || ice.Shortfall() != 1 {
		t.Fatalf("hold on an empty account: %v", err)
	}
	if _, err := db.AddCredits(acct, 3, "top-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(acct, 0, ""); err == nil {
		t.Error("AddCredits(0)")
	}
	h1, err := db.Hold(acct, 1, "r1")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := db.Hold(acct, 1, "r2")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := db.Credits(acct)
	if c.Balance != 3 || c.Held != 2 || c.Available() != 1 {
		t.Fatalf("two holds: %+v", c)
	}
	_, err = db.Hold(acct, 2, "r3")
	if !errors.As(err, &ice) || ice.Current != 3 || ice.Held != 2 || ice.Available() != 1 || ice.Needed != 2 {
		t.Fatalf("hold of 2 with 1 available: %v", err)
	}
	// The balance cannot go below what is held.
	if _, err := db.SetCredits(acct, 1, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetCredits below held: %v", err)
	}

	ch, err := db.Charge(h1, ChargeRequest{Result: result("a@example.com", "valid")})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Balance != 2 || ch.Entry.Kind != EntryCharge || ch.Entry.HoldSeq != h1.Seq || ch.Entry.Ref != ch.Result.ID {
		t.Errorf("charge: %+v", ch)
	}
	_, err = db.Charge(h1, ChargeRequest{Result: result("a@example.com", "valid")})
	wantErr(t, err, ErrHoldNotActive)
	_, err = db.Release(h1, "")
	wantErr(t, err, ErrHoldNotActive)

	rel, err := db.Release(h2, "engine error")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Balance != 2 || rel.Held != 0 || rel.Note != "engine error" {
		t.Errorf("release: %+v", rel)
	}
	_, err = db.Charge(h2, ChargeRequest{Result: result("b@example.com", "valid")})
	wantErr(t, err, ErrHoldNotActive)

	if e, err := db.SetCredits(acct, 10, "plan change"); err != nil || e.Delta != 8 || e.Balance != 10 {
		t.Fatalf("SetCredits: %+v, %v", e, err)
	}
	if bal, _ := db.Balance(acct); bal != 10 {
		t.Errorf("balance %d", bal)
	}
	es := checkLedger(t, db.DB, acct)
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind.String())
	}
	if got := fmt.Sprint(kinds); got != "[add hold hold charge release set]" {
		t.Errorf("ledger kinds %s", got)
	}
	if page, _ := db.Ledger(acct, 2, 2); len(page) != 2 || page[0].Seq != 3 {
		t.Errorf("Ledger page: %+v", page)
	}

	// Arguments.
	if _, err := db.Hold(acct, 0, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Hold(0): %v", err)
	}
	_, err = db.Hold("acct_nope", 1, "")
	wantErr(t, err, ErrNotFound)
	h, _ := db.Hold(acct, 1, "")
	if _, err := db.Charge(h, ChargeRequest{Result: Result{Email: "x@y"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("charge with a result without status: %v", err)
	}
	if _, err := db.Charge(h, ChargeRequest{Result: Result{Email: "x@y", Status: "valid", Kind: KindBatch}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("charge with a batch result: %v", err)
	}
	// A refused charge leaves the hold active.
	if _, err := db.Charge(h, ChargeRequest{Result: result("x@y", "valid")}); err != nil {
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
	holds := make(chan Hold, 200)
	start := make(chan struct{})
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h, err := db.Hold(acct, 1, fmt.Sprint("req-", i))
			var ice *InsufficientCreditsError
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
				_, err = db.Charge(h, ChargeRequest{Result: result(fmt.Sprintf("u%d@example.com", i), "valid")})
			} else {
				_, err = db.Release(h, "")
			}
			if err != nil {
				t.Error(err)
			}
		}(i)
		i++
	}
	wg.Wait()
	es := checkLedger(t, db.DB, acct)
	if bal, _ := db.Balance(acct); bal != 50 {
		t.Errorf("balance %d, want 50", bal)
	}
	if len(es) != 1+100+100 {
		t.Errorf("%d ledger entries", len(es))
	}
	db.reopen(t)
	checkLedger(t, db.DB, acct)
	if bal, _ := db.Balance(acct); bal != 50 {
		t.Errorf("after reopen: balance %d", bal)
	}
}

// Holds a process leaves behind are released at the next Open.
func TestStaleHoldsReleasedAtOpen(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 5)
	other := db.account(t, 5)
	h1, _ := db.Hold(acct, 1, "a")
	db.Hold(acct, 2, "b")
	db.Hold(other, 1, "c")
	db.Charge(h1, ChargeRequest{Result: result("a@example.com", "valid")})
	db.reopen(t)

	for _, a := range []string{acct, other} {
		es := checkLedger(t, db.DB, a)
		last := es[len(es)-1]
		if last.Kind != EntryRelease || last.Note != "released at open" || last.Held != 0 {
			t.Errorf("%s: last entry %+v", a, last)
		}
		if hs, err := db.Holds(a); err != nil || len(hs) != 0 {
			t.Errorf("%s: holds %v, %v", a, hs, err)
		}
	}
	if bal, _ := db.Balance(acct); bal != 4 {
		t.Errorf("balance %d, want 4 (one charge)", bal)
	}
	// The released hold cannot be charged any more.
	_, err := db.Charge(h1, ChargeRequest{Result: result("a@example.com", "valid")})
	wantErr(t, err, ErrHoldNotActive)
	// Seqs go on after a restart.
	h, err := db.Hold(acct, 1, "d")
	if err != nil || h.Seq != uint64(len(checkLedger(t, db.DB, acct))) {
		t.Errorf("hold after reopen: %+v, %v", h, err)
	}
}

// Seal sees the balance after the charge, and the idempotent response it
// returns is stored in the same batch: a retry after a restart replays it.
func TestChargeSealAndIdem(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 5)
	ref := IdemRef{Account: acct, Endpoint: "validate", Key: "idem-key-1"}
	out, _, err := db.BeginIdem(ref, []byte("body-hash"))
	if err != nil || out != IdemNew {
		t.Fatalf("BeginIdem: %v, %v", out, err)
	}
	h, _ := db.Hold(acct, 1, "r")
	var sawBalance int64
	var sawResult Result
	ch, err := db.Charge(h, ChargeRequest{
		Result: result("a@example.com", "valid"),
		Idem:   &ref,
		Seal: func(r Result, balance int64) (Sealed, error) {
			sawBalance, sawResult = balance, r
			receipt := fmt.Appendf(nil, `{"credits_remaining":%d}`, balance)
			return Sealed{Receipt: receipt, Response: IdemResponse{
				Status: 200,
				Header: []HeaderField{{"X-Credits-Remaining", fmt.Sprint(balance)}},
				Body:   receipt,
			}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sawBalance != 4 || ch.Balance != 4 || string(ch.Result.Receipt) != `{"credits_remaining":4}` {
		t.Errorf("seal saw %d, charged %+v", sawBalance, ch)
	}
	// Seal sees the result as stored: its id and probed_at are final.
	if sawResult.ID != ch.Result.ID || !sawResult.ProbedAt.Equal(db.clock.Now()) {
		t.Errorf("seal saw %+v", sawResult)
	}
	db.reopen(t)
	out, rec, err := db.BeginIdem(ref, []byte("body-hash"))
	if err != nil || out != IdemReplay || rec.Response.Status != 200 || string(rec.Response.Body) != `{"credits_remaining":4}` ||
		len(rec.Response.Header) != 1 || rec.Response.Header[0].Value != "4" {
		t.Fatalf("replay after reopen: %v %+v %v", out, rec, err)
	}
	r, err := db.GetResult(ch.Result.ID)
	if err != nil || string(r.Receipt) != `{"credits_remaining":4}` {
		t.Errorf("stored receipt: %q, %v", r.Receipt, err)
	}

	// A failing Seal charges nothing.
	h, _ = db.Hold(acct, 1, "r2")
	_, err = db.Charge(h, ChargeRequest{Result: result("b@example.com", "valid"),
		Seal: func(Result, int64) (Sealed, error) { return Sealed{}, errors.New("signer down") }})
	if err == nil {
		t.Fatal("Seal error ignored")
	}
	if _, err := db.Release(h, "signer down"); err != nil {
		t.Fatalf("the hold is still active: %v", err)
	}
	if bal, _ := db.Balance(acct); bal != 4 {
		t.Errorf("balance %d", bal)
	}
	checkLedger(t, db.DB, acct)
}
