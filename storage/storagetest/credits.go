package storagetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/verifyd/verifyd/storage"
)

// CheckLedger checks that the account's entries are numbered 1, 2, 3…,
// that every entry's balance and held follow from the one before and
// never overdraw, and that the last agrees with Credits; it returns the
// entries.
func CheckLedger(t testing.TB, s storage.Balances, account string) []storage.Entry {
	t.Helper()
	es, err := s.Ledger(t.Context(), account, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bal, held int64
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		if e.Kind != storage.EntrySet {
			bal += e.Delta
		} else {
			bal = e.Amount
		}
		switch e.Kind {
		case storage.EntryHold:
			held += e.Amount
		case storage.EntryRelease, storage.EntryCharge:
			if e.HoldSeq != 0 { // a charge without a hold: ChargeDirect
				held -= e.Amount
			}
		}
		if e.Balance != bal || e.Held != held || held < 0 || bal-held < 0 {
			t.Fatalf("entry %+v: want balance %d, held %d", e, bal, held)
		}
	}
	c, err := s.Credits(t.Context(), account)
	if err != nil || c.Balance != bal || c.Held != held {
		t.Fatalf("Credits %+v, %v; the ledger says %d held %d", c, err, bal, held)
	}
	return es
}

func testLedger(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	a, err := s.CreateAccount(t.Context(), "Ledger", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Credits(t.Context(), a.ID); err != nil || c != (storage.Credits{}) {
		t.Fatalf("new account: %+v, %v", c, err)
	}
	for _, n := range []int64{0, -5} {
		if _, err := s.AddCredits(t.Context(), a.ID, n, ""); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("AddCredits(%d): %v", n, err)
		}
	}
	e, err := s.AddCredits(t.Context(), a.ID, 100, "first")
	if err != nil || e.Seq != 1 || e.Kind != storage.EntryAdd || e.Balance != 100 || e.Note != "first" {
		t.Fatalf("AddCredits: %+v, %v", e, err)
	}
	h, err := s.Hold(t.Context(), a.ID, 30, "req-1")
	if err != nil || h.N != 30 || h.Ref != "req-1" || h.Seq != 2 {
		t.Fatalf("Hold: %+v, %v", h, err)
	}
	var ice *storage.InsufficientCreditsError
	_, err = s.Hold(t.Context(), a.ID, 80, "req-2")
	if !errors.As(err, &ice) || !errors.Is(err, storage.ErrInsufficientCredits) || ice.Current != 100 || ice.Held != 30 || ice.Needed != 80 || ice.Available() != 70 {
		t.Fatalf("Hold beyond the available credits: %v", err)
	}
	if _, err := s.SetCredits(t.Context(), a.ID, 20, ""); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("SetCredits below the held credits: %v", err)
	}
	if e, err := s.SetCredits(t.Context(), a.ID, 50, "set"); err != nil || e.Kind != storage.EntrySet || e.Delta != -50 || e.Balance != 50 || e.Held != 30 {
		t.Fatalf("SetCredits: %+v, %v", e, err)
	}
	hs, err := s.Holds(t.Context(), a.ID)
	if err != nil || len(hs) != 1 || hs[0].Seq != h.Seq || hs[0].N != 30 {
		t.Fatalf("Holds: %+v, %v", hs, err)
	}
	r, err := s.Release(t.Context(), h, "engine failed")
	if err != nil || r.Kind != storage.EntryRelease || r.HoldSeq != h.Seq || r.Held != 0 || r.Balance != 50 || r.Amount != 30 {
		t.Fatalf("Release: %+v, %v", r, err)
	}
	if _, err := s.Release(t.Context(), h, "again"); !errors.Is(err, storage.ErrHoldNotActive) {
		t.Fatalf("second Release: %v", err)
	}
	if hs, err := s.Holds(t.Context(), a.ID); err != nil || len(hs) != 0 {
		t.Fatalf("Holds after the release: %+v, %v", hs, err)
	}
	es := CheckLedger(t, s, a.ID)
	if len(es) != 4 {
		t.Fatalf("%d entries, want 4", len(es))
	}
	page, err := s.Ledger(t.Context(), a.ID, 2, 1)
	if err != nil || len(page) != 1 || page[0].Seq != 3 {
		t.Fatalf("Ledger(after 2, 1): %+v, %v", page, err)
	}
	for name, f := range map[string]func() error{
		"Credits":    func() error { _, err := s.Credits(t.Context(), "acct_nosuchaccountxxxxxx"); return err },
		"AddCredits": func() error { _, err := s.AddCredits(t.Context(), "acct_nosuchaccountxxxxxx", 1, ""); return err },
		"Hold":       func() error { _, err := s.Hold(t.Context(), "acct_nosuchaccountxxxxxx", 1, ""); return err },
		"Ledger":     func() error { _, err := s.Ledger(t.Context(), "acct_nosuchaccountxxxxxx", 0, 0); return err },
	} {
		if err := f(); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%s of an unknown account: %v", name, err)
		}
	}
}

// testNoOverdraft: fifty holds of one credit at once on a balance of
// twenty: exactly twenty succeed, the others are refused for want of
// credits, and the ledger adds up.
func testNoOverdraft(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	a, err := s.CreateAccount(t.Context(), "Race", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddCredits(t.Context(), a.ID, 20, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []storage.Hold
	refused := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := s.Hold(t.Context(), a.ID, 1, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				held = append(held, h)
			case errors.Is(err, storage.ErrInsufficientCredits):
				refused++
			default:
				t.Errorf("Hold: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(held) != 20 || refused != 30 {
		t.Fatalf("%d holds taken, %d refused: want 20 and 30", len(held), refused)
	}
	for _, h := range held {
		if _, err := s.Release(t.Context(), h, ""); err != nil {
			t.Fatal(err)
		}
	}
	CheckLedger(t, s, a.ID)
	if c, err := s.Credits(t.Context(), a.ID); err != nil || c.Balance != 20 || c.Held != 0 {
		t.Fatalf("after releasing every hold: %+v, %v", c, err)
	}
}
