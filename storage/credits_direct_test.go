package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestChargeDirect: a charge without a hold checks the available balance
// (held credits excluded), never overdraws under concurrency, and writes
// the result and history like Charge.
func TestChargeDirect(t *testing.T) {
	db := openTest(t)
	acct, err := db.CreateAccount("a", PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(acct.ID, 60, "t"); err != nil {
		t.Fatal(err)
	}
	h, err := db.Hold(acct.ID, 10, "held")
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.ChargeDirect(acct.ID, 1, ChargeRequest{Result: Result{Email: "x@y.test", Status: "valid", Score: 90}})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrInsufficientCredits):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 50 || refused.Load() != 50 {
		t.Fatalf("%d charged, %d refused; want 50 and 50 (60 credits, 10 held)", ok.Load(), refused.Load())
	}
	c, _ := db.Credits(acct.ID)
	if c.Balance != 10 || c.Held != 10 {
		t.Fatalf("credits %+v, want balance 10 with 10 held", c)
	}
	if _, err := db.Charge(h, ChargeRequest{Result: Result{Email: "x@y.test", Status: "valid"}}); err != nil {
		t.Fatal(err)
	}
	page, err := db.ListHistory(acct.ID, HistoryAll, "", 200)
	if err != nil || len(page.Rows) != 51 {
		t.Fatalf("history rows %d (%v), want 51", len(page.Rows), err)
	}
}
