package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// testIdemLostKey: a charge whose key BeginIdem could not record
// (ChargeRequest.IdemHash) records it itself: a retry replays it, another
// body is a mismatch, and a live record of another request is left alone.
func testIdemLostKey(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 5)
	seal := func(_ storage.Result, balance int64) (storage.Sealed, error) {
		body := fmt.Appendf(nil, `{"credits_remaining":%d}`, balance)
		return storage.Sealed{Receipt: body, Response: storage.IdemResponse{Status: 200, Body: body}}, nil
	}
	ref := storage.IdemRef{Account: acct, Endpoint: "validate", Key: "lost-key-1"}
	h := hold(t, s, acct, 1, "r")
	if _, err := s.Charge(t.Context(), h, storage.ChargeRequest{Result: result("a@example.com", "valid"), Idem: &ref, IdemHash: []byte("hash-a"), Seal: seal}); err != nil {
		t.Fatal(err)
	}
	out, rec, err := s.BeginIdem(t.Context(), ref, []byte("hash-a"))
	if err != nil || out != storage.IdemReplay || string(rec.Response.Body) != `{"credits_remaining":4}` {
		t.Fatalf("the retry of a charge whose key was lost: %v %+v %v", out, rec, err)
	}
	if out, _, err := s.BeginIdem(t.Context(), ref, []byte("hash-b")); err != nil || out != storage.IdemMismatch {
		t.Fatalf("another body under it: %v %v", out, err)
	}
	// A key another request holds now is not overwritten.
	other := storage.IdemRef{Account: acct, Endpoint: "validate", Key: "lost-key-2"}
	if out, _, err := s.BeginIdem(t.Context(), other, []byte("hash-c")); err != nil || out != storage.IdemNew {
		t.Fatalf("BeginIdem: %v %v", out, err)
	}
	if _, err := s.ChargeDirect(t.Context(), acct, 1, storage.ChargeRequest{Result: result("b@example.com", "valid"), Idem: &other, IdemHash: []byte("hash-d"), Seal: seal}); err != nil {
		t.Fatal(err)
	}
	if out, rec, err := s.BeginIdem(t.Context(), other, []byte("hash-c")); err != nil || out == storage.IdemReplay || !bytes.Equal(rec.RequestHash, []byte("hash-c")) {
		t.Fatalf("the other request's key after a lost key's charge: %v %+v %v", out, rec, err)
	}
}

// account creates an account with n credits.
func account(t testing.TB, s interface {
	storage.Accounts
	AddCredits(context.Context, string, int64, string) (storage.Entry, error)
}, n int64) string {
	t.Helper()
	a, err := s.CreateAccount(t.Context(), "test", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if _, err := s.AddCredits(t.Context(), a.ID, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}

// hold holds n credits of the account.
func hold(t testing.TB, s storage.Balances, account string, n int64, ref string) storage.Hold {
	t.Helper()
	h, err := s.Hold(t.Context(), account, n, ref)
	noErr(t, err, "Hold(%d)", n)
	return h
}

// result is a single result for email.
func result(email, status string) storage.Result {
	return storage.Result{Email: email, Status: status, Score: 90, LatencyMs: 42}
}

// because is r with its reason.
func because(r storage.Result, reason string) storage.Result {
	r.Reason = reason
	return r
}

// validate runs the hot path of one validation: hold, then charge.
func validate(t testing.TB, s storage.Store, account string, r storage.Result) storage.Charged {
	t.Helper()
	h, err := s.Hold(t.Context(), account, 1, "req")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Charge(t.Context(), h, storage.ChargeRequest{Result: r})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

// Seal sees the balance after the charge and the final result; the
// response it returns is stored with the charge: a retry after a restart
// (on PostgreSQL: on another box) replays it. A failing Seal charges
// nothing and stores no result.
func testChargeSealAndIdem(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 5)
	ref := storage.IdemRef{Account: acct, Endpoint: "validate", Key: "idem-key-1"}
	out, _, err := s.BeginIdem(t.Context(), ref, []byte("body-hash"))
	if err != nil || out != storage.IdemNew {
		t.Fatalf("BeginIdem: %v, %v", out, err)
	}
	h := hold(t, s, acct, 1, "r")
	var sawBalance int64
	var sawResult storage.Result
	ch, err := s.Charge(t.Context(), h, storage.ChargeRequest{
		Result: result("a@example.com", "valid"),
		Idem:   &ref,
		Seal: func(r storage.Result, balance int64) (storage.Sealed, error) {
			sawBalance, sawResult = balance, r
			receipt := fmt.Appendf(nil, `{"credits_remaining":%d}`, balance)
			return storage.Sealed{Receipt: receipt, Response: storage.IdemResponse{
				Status: 200,
				Header: []storage.HeaderField{{Name: "X-Credits-Remaining", Value: fmt.Sprint(balance)}},
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
	if sawResult.ID != ch.Result.ID || sawResult.HistoryID != ch.Result.HistoryID || sawResult.HistoryID == 0 ||
		!sawResult.ProbedAt.Equal(c.Now()) {
		t.Errorf("seal saw %+v, stored %+v", sawResult, ch.Result)
	}
	s = b.Reopen(t, s)
	out, rec, err := s.BeginIdem(t.Context(), ref, []byte("body-hash"))
	if err != nil || out != storage.IdemReplay || rec.Response.Status != 200 || string(rec.Response.Body) != `{"credits_remaining":4}` ||
		len(rec.Response.Header) != 1 || rec.Response.Header[0].Value != "4" {
		t.Fatalf("replay after reopen: %v %+v %v", out, rec, err)
	}
	r, err := s.GetResult(t.Context(), ch.Result.ID)
	if err != nil || string(r.Receipt) != `{"credits_remaining":4}` {
		t.Errorf("stored receipt: %q, %v", r.Receipt, err)
	}

	h = hold(t, s, acct, 1, "r2")
	_, err = s.Charge(t.Context(), h, storage.ChargeRequest{Result: result("b@example.com", "valid"),
		Seal: func(storage.Result, int64) (storage.Sealed, error) {
			return storage.Sealed{}, errors.New("signer down")
		}})
	if err == nil {
		t.Fatal("Seal error ignored")
	}
	if _, err := s.Release(t.Context(), h, "signer down"); !errors.Is(err, storage.ErrHoldNotActive) {
		t.Fatalf("release after a failed seal: %v", err)
	}
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 4 {
		t.Errorf("balance %d, %v", cr.Balance, err)
	}
	entries := CheckLedger(t, s, acct)
	last := entries[len(entries)-2:]
	if last[0].Kind != storage.EntryCharge || last[1].Kind != storage.EntryAdd || last[1].Amount != 1 || last[1].Balance != 4 {
		t.Errorf("ledger ends with %+v", last)
	}
	if _, err := s.GetResult(t.Context(), last[0].Ref); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("result of the voided charge: %v", err)
	}
	if p, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, "", 10); err != nil || len(p.Rows) != 1 {
		t.Errorf("%d history rows (%v), want 1", len(p.Rows), err)
	}
	// What a charge refuses.
	h = hold(t, s, acct, 1, "r3")
	for name, req := range map[string]storage.ChargeRequest{
		"no status":       {Result: storage.Result{Email: "x@example.com"}},
		"score 101":       {Result: storage.Result{Email: "x@example.com", Status: "valid", Score: 101}},
		"batch":           {Result: storage.Result{Email: "x@example.com", Status: "valid", Kind: storage.KindBatch}},
		"other account":   {Result: storage.Result{Email: "x@example.com", Status: "valid", Account: "acct_other"}},
		"idem, no seal":   {Result: result("x@example.com", "valid"), Idem: &ref},
		"bad result id":   {Result: storage.Result{ID: "no spaces", Email: "x@example.com", Status: "valid"}},
		"other idem acct": {Result: result("x@example.com", "valid"), Idem: &storage.IdemRef{Account: "acct_other", Endpoint: "e", Key: "k"}, Seal: func(storage.Result, int64) (storage.Sealed, error) { return storage.Sealed{}, nil }},
	} {
		if _, err := s.Charge(t.Context(), h, req); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.ChargeDirect(t.Context(), acct, 0, storage.ChargeRequest{Result: result("x@example.com", "valid")}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("ChargeDirect of 0: %v", err)
	}
	if _, err := s.Charge(t.Context(), h, storage.ChargeRequest{Result: result("x@example.com", "valid")}); err != nil {
		t.Errorf("the hold after refused charges: %v", err)
	}
}

// A charge without a hold checks the available balance (held credits
// excluded), never overdraws under concurrency, and writes the result and
// history like Charge.
func testChargeDirect(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 60)
	h, err := s.Hold(t.Context(), acct, 10, "held")
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ChargeDirect(t.Context(), acct, 1, storage.ChargeRequest{Result: storage.Result{Email: "x@y.test", Status: "valid", Score: 90}})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, storage.ErrInsufficientCredits):
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
	c, err := s.Credits(t.Context(), acct)
	if err != nil || c.Balance != 10 || c.Held != 10 {
		t.Fatalf("credits %+v (%v), want balance 10 with 10 held", c, err)
	}
	if _, err := s.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "x@y.test", Status: "valid"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "x@y.test", Status: "valid"}}); !errors.Is(err, storage.ErrHoldNotActive) {
		t.Fatalf("second charge of a hold: %v", err)
	}
	// One hold charged by ten at once, among twenty other charges (so
	// that a backend that combines them has several in one go): once.
	_, err = s.AddCredits(t.Context(), acct, 25, "")
	noErr(t, err, "AddCredits")
	h2, err := s.Hold(t.Context(), acct, 3, "twice")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.ChargeDirect(t.Context(), acct, 1, storage.ChargeRequest{Result: storage.Result{Email: "z@y.test", Status: "valid"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	var once, gone atomic.Int64
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Charge(t.Context(), h2, storage.ChargeRequest{Result: storage.Result{Email: "y@y.test", Status: "valid"}})
			switch {
			case err == nil:
				once.Add(1)
			case errors.Is(err, storage.ErrHoldNotActive):
				gone.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if once.Load() != 1 || gone.Load() != 9 {
		t.Fatalf("one hold charged %d times (%d refused)", once.Load(), gone.Load())
	}
	if c, err := s.Credits(t.Context(), acct); err != nil || c.Balance != 2 || c.Held != 0 {
		t.Fatalf("credits %+v (%v) after 20 charges of 1 and one of 3 of 25", c, err)
	}
	page, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, "", 200)
	if err != nil || len(page.Rows) != 72 {
		t.Fatalf("history rows %d (%v), want 72", len(page.Rows), err)
	}
	CheckLedger(t, s, acct)
}

// Holds a stopped process left are released when the data is opened again
// (on PostgreSQL: by the box that finds its boot stopped), with a release
// entry each, and can no longer be charged.
func testStaleHolds(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 5)
	other := account(t, s, 5)
	h1 := hold(t, s, acct, 1, "a")
	hold(t, s, acct, 2, "b")
	hold(t, s, other, 1, "c")
	validate(t, s, acct, result("z@example.com", "valid"))
	if _, err := s.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")}); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	for _, a := range []string{acct, other} {
		es := CheckLedger(t, s, a)
		last := es[len(es)-1]
		if last.Kind != storage.EntryRelease || last.Held != 0 || last.Note == "" {
			t.Errorf("%s: last entry %+v", a, last)
		}
		if hs, err := s.Holds(t.Context(), a); err != nil || len(hs) != 0 {
			t.Errorf("%s: holds %v, %v", a, hs, err)
		}
	}
	if cr, err := s.Credits(t.Context(), acct); err != nil || cr.Balance != 3 {
		t.Errorf("balance %d (%v), want 3 (two charges)", cr.Balance, err)
	}
	_, err := s.Charge(t.Context(), h1, storage.ChargeRequest{Result: result("a@example.com", "valid")})
	wantErr(t, err, storage.ErrHoldNotActive)
	h, err := s.Hold(t.Context(), acct, 1, "d")
	if err != nil || h.Seq != uint64(len(CheckLedger(t, s, acct))) {
		t.Errorf("hold after reopen: %+v, %v", h, err)
	}
}

// WalkHistory pages through the account's history with the limit and
// returns every row, checking each page's size and cursor.
func WalkHistory(t *testing.T, s storage.Results, acct, kind string, limit int) []storage.HistoryRow {
	t.Helper()
	var all []storage.HistoryRow
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("paging does not end")
		}
		p, err := s.ListHistory(t.Context(), acct, kind, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Rows) > limit {
			t.Fatalf("page of %d rows with limit %d", len(p.Rows), limit)
		}
		all = append(all, p.Rows...)
		if p.NextCursor == "" {
			return all
		}
		if len(p.Rows) != limit {
			t.Fatalf("short page (%d of %d) with a next cursor", len(p.Rows), limit)
		}
		last := p.Rows[len(p.Rows)-1]
		ct, err := time.Parse(time.RFC3339Nano, p.NextCursor)
		if err != nil || !ct.Truncate(time.Millisecond).Equal(last.ProbedAt) {
			t.Fatalf("cursor %q for a row probed at %v", p.NextCursor, last.ProbedAt)
		}
		cursor = p.NextCursor
	}
}

// CheckNewestFirst fails unless rows are newest first: by position, and
// by probed_at.
func CheckNewestFirst(t *testing.T, rows []storage.HistoryRow) {
	t.Helper()
	seen := make(map[uint64]bool)
	for i, r := range rows {
		if seen[r.ID] {
			t.Fatalf("row %d twice", r.ID)
		}
		seen[r.ID] = true
		if i > 0 && (r.Pos >= rows[i-1].Pos || r.ProbedAt.After(rows[i-1].ProbedAt)) {
			t.Fatalf("row %d (%v, pos %d) after row %d (%v, pos %d)", i, r.ProbedAt, r.Pos, i-1, rows[i-1].ProbedAt, rows[i-1].Pos)
		}
	}
}

// Walking pages with any limit yields every row exactly once, newest
// first, though 400 rows written concurrently share one millisecond.
func testHistoryPaging(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 10_000)
	other := account(t, s, 10)
	validate(t, s, other, result("other@example.com", "valid"))

	t0 := c.Now()
	c.Set(t0.Add(-20 * time.Millisecond))
	for range 20 {
		validate(t, s, acct, result("early@example.com", "valid"))
		c.Advance(time.Millisecond)
	}
	c.Set(t0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				h, err := s.Hold(t.Context(), acct, 1, "")
				if err == nil {
					_, err = s.Charge(t.Context(), h, storage.ChargeRequest{Result: result(fmt.Sprintf("s%d-%d@example.com", g, i), "valid")})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for range 20 {
		c.Advance(time.Millisecond)
		validate(t, s, acct, result("late@example.com", "risky"))
	}
	for _, limit := range []int{1, 7, 50, 200} {
		rows := WalkHistory(t, s, acct, storage.HistoryAll, limit)
		if len(rows) != 440 {
			t.Errorf("limit %d: %d rows, want 440", limit, len(rows))
		}
		CheckNewestFirst(t, rows)
		inT0 := 0
		for _, r := range rows {
			if r.ProbedAt.Equal(t0) {
				inT0++
			}
		}
		if inT0 != 400 {
			t.Errorf("limit %d: %d rows in the shared millisecond", limit, inT0)
		}
	}
	if rows := WalkHistory(t, s, acct, storage.HistoryBatch, 10); len(rows) != 0 {
		t.Errorf("%d batch rows", len(rows))
	}
	if rows := WalkHistory(t, s, acct, storage.HistorySingle, 100); len(rows) != 440 {
		t.Errorf("%d single rows", len(rows))
	}

	// A client's own millisecond cursor keeps the spec's meaning: rows
	// probed strictly before that instant.
	p, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, t0.Format(time.RFC3339Nano), 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 20 || p.Rows[0].Email != "early@example.com" || !p.Rows[0].ProbedAt.Before(t0) {
		t.Errorf("millisecond cursor: %d rows", len(p.Rows))
	}
	if p, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, "1970-01-01T00:00:00Z", 10); err != nil || len(p.Rows) != 0 {
		t.Errorf("cursor at the epoch: %d rows, %v", len(p.Rows), err)
	}
	if _, err := s.ListHistory(t.Context(), acct, "weird", "", 10); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, "not a time", 10); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
	if p, err := s.ListHistory(t.Context(), acct, "", "", 0); err != nil || len(p.Rows) != storage.DefaultHistoryLimit {
		t.Errorf("default limit: %d rows, %v", len(p.Rows), err)
	}
	if _, err := s.ListHistory(t.Context(), "acct_nosuchaccountxxxxxx", "", "", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
	if rows := WalkHistory(t, s, other, storage.HistoryAll, 5); len(rows) != 1 {
		t.Errorf("other account: %d rows", len(rows))
	}
	// Positions survive a restart (on PostgreSQL: hold across boxes): new
	// rows in t0 go on after the others.
	s = b.Reopen(t, s)
	c.Set(t0)
	validate(t, s, acct, result("again@example.com", "valid"))
	rows := WalkHistory(t, s, acct, storage.HistoryAll, 50)
	if len(rows) != 441 {
		t.Errorf("after reopen: %d rows", len(rows))
	}
	CheckNewestFirst(t, rows)
}

// A row probed before the newest one (a clock step back, a late result)
// takes its place by probed_at, after the rows already in its
// millisecond.
func testHistoryLateRows(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 100)
	t0 := c.Now()
	at := func(d time.Duration, email string) {
		r := result(email, "valid")
		r.ProbedAt = t0.Add(d)
		validate(t, s, acct, r)
	}
	at(-10*time.Millisecond, "a")
	at(-5*time.Millisecond, "b1")
	at(0, "c")
	at(-5*time.Millisecond, "b2") // late, into a millisecond that has a row
	at(-7*time.Millisecond, "d")  // late, into an empty millisecond
	at(-5*time.Millisecond, "b3")
	at(0, "c2")
	var got []string
	for _, r := range WalkHistory(t, s, acct, storage.HistoryAll, 2) {
		got = append(got, r.Email)
	}
	if want := []string{"c2", "c", "b3", "b2", "b1", "d", "a"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// Results are read back whole; the cache serves an account's latest fresh
// result of an address, in any case, within the age asked, and a row
// served from cache neither replaces it nor is served itself.
func testResultsAndCache(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 100)
	other := account(t, s, 100)

	_, ok, err := s.LookupCache(t.Context(), acct, "Ada@Example.com", time.Hour)
	if err != nil || ok {
		t.Fatalf("empty cache: %v, %v", ok, err)
	}
	if _, _, err := s.LookupCache(t.Context(), "acct_nosuchaccountxxxxxx", "a@b.c", time.Hour); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("LookupCache of an unknown account: %v", err)
	}
	r := result("Ada@Example.com", "valid")
	r.Receipt = []byte(`{"sig":"x"}`)
	r.LatencyMs = -1
	first := validate(t, s, acct, r)
	got, err := s.GetResult(t.Context(), first.Result.ID)
	if err != nil || got.Email != "Ada@Example.com" || got.Account != acct || got.Kind != storage.KindSingle || got.LatencyMs != -1 ||
		got.Score != 90 || got.Status != "valid" || string(got.Receipt) != `{"sig":"x"}` || got.HistoryID != first.Result.HistoryID ||
		!got.ProbedAt.Equal(c.Now()) || got.JobID != "" || got.CachedFrom != "" {
		t.Fatalf("GetResult: %+v, %v", got, err)
	}
	_, err = s.GetResult(t.Context(), "0190e6b2-2f5e-7c3a-9d5b-0a1b2c3d4e5f")
	wantErr(t, err, storage.ErrNotFound)

	c.Advance(time.Minute)
	hit, ok, err := s.LookupCache(t.Context(), acct, "ada@example.COM", time.Hour)
	if err != nil || !ok || hit.ID != first.Result.ID || string(hit.Receipt) != `{"sig":"x"}` {
		t.Fatalf("LookupCache: %+v %v %v", hit, ok, err)
	}
	if _, ok, err := s.LookupCache(t.Context(), other, "ada@example.com", time.Hour); err != nil || ok {
		t.Errorf("another account's result served: %v, %v", ok, err)
	}
	cr := result("ada@example.com", "valid")
	cr.CachedFrom = hit.ID
	served := validate(t, s, acct, cr)
	if hit2, _, err := s.LookupCache(t.Context(), acct, "ada@example.com", time.Hour); err != nil || hit2.ID != first.Result.ID {
		t.Errorf("cache now points at %s, %v", hit2.ID, err)
	}
	p, err := s.ListHistory(t.Context(), acct, storage.HistoryAll, "", 10)
	if err != nil || len(p.Rows) != 2 || p.Rows[0].CachedFrom != first.Result.ID || p.Rows[0].ResultID != served.Result.ID || p.Rows[1].LatencyMs != -1 ||
		p.Rows[1].ID != first.Result.HistoryID || p.Rows[1].Kind != storage.KindSingle || p.Rows[1].JobID != "" {
		t.Errorf("history: %+v, %v", p.Rows, err)
	}
	c.Advance(time.Hour)
	if _, ok, err := s.LookupCache(t.Context(), acct, "ada@example.com", time.Hour); err != nil || ok {
		t.Errorf("an expired result served: %v, %v", ok, err)
	}
	u := result("ada@example.com", "unknown")
	u.SkipCache = true
	validate(t, s, acct, u)
	if hit3, ok, err := s.LookupCache(t.Context(), acct, "ada@example.com", 24*time.Hour); err != nil || !ok || hit3.ID != first.Result.ID {
		t.Errorf("SkipCache result replaced the entry: %+v %v %v", hit3, ok, err)
	}
	newer := validate(t, s, acct, result("ADA@example.com", "risky"))
	if hit4, ok, err := s.LookupCache(t.Context(), acct, "ada@example.com", time.Hour); err != nil || !ok || hit4.ID != newer.Result.ID {
		t.Errorf("a newer result did not replace the entry: %+v %v %v", hit4, ok, err)
	}

	c.Advance(2 * time.Hour)
	validate(t, s, acct, result("fresh@example.com", "valid"))
	n, err := s.PurgeCache(t.Context(), time.Hour)
	if err != nil || n != 1 {
		t.Errorf("PurgeCache: %d, %v; want 1", n, err)
	}
	if _, ok, err := s.LookupCache(t.Context(), acct, "fresh@example.com", time.Hour); err != nil || !ok {
		t.Errorf("fresh entry purged: %v", err)
	}
	if _, ok, err := s.LookupCache(t.Context(), acct, "ada@example.com", 24*time.Hour); err != nil || ok {
		t.Errorf("purged entry served: %v, %v", ok, err)
	}
}

// Rows per UTC day and verdict, late rows counted on their day.
func testDailyCounts(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 100)
	other := account(t, s, 100)
	day := time.Date(2031, 3, 10, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) { c.Set(day.Add(d)) }

	at(-47 * time.Hour) // two days ago, 01:00
	validate(t, s, acct, result("a@x.test", "valid"))
	validate(t, s, acct, result("b@x.test", "invalid"))
	at(-90 * time.Minute) // yesterday, 22:30
	validate(t, s, acct, result("c@x.test", "valid"))
	validate(t, s, other, result("d@x.test", "valid"))
	at(5 * time.Minute) // today, 00:05
	validate(t, s, acct, result("e@x.test", "risky"))

	check := func(what string, want []map[string]int) {
		t.Helper()
		got, err := s.DailyCounts(t.Context(), acct, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range got {
			if !d.Day.Equal(day.AddDate(0, 0, i-2)) {
				t.Errorf("%s: day %d is %v", what, i, d.Day)
			}
			if len(d.Counts) != len(want[i]) {
				t.Errorf("%s: %v: %v, want %v", what, d.Day, d.Counts, want[i])
				continue
			}
			for k, n := range want[i] {
				if d.Counts[k] != n {
					t.Errorf("%s: %v: %v, want %v", what, d.Day, d.Counts, want[i])
				}
			}
		}
	}
	check("first", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1}, {"risky": 1}})

	late := result("f@x.test", "invalid")
	late.ProbedAt = day.Add(-time.Minute)
	validate(t, s, acct, late)
	at(time.Hour)
	validate(t, s, acct, result("g@x.test", "valid"))
	check("late", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1, "invalid": 1}, {"risky": 1, "valid": 1}})
	got, err := s.DailyCounts(t.Context(), acct, 3)
	noErr(t, err, "DailyCounts")
	got[0].Counts["valid"] = 99
	check("again", []map[string]int{{"valid": 1, "invalid": 1}, {"valid": 1, "invalid": 1}, {"risky": 1, "valid": 1}})

	if _, err := s.DailyCounts(t.Context(), acct, 0); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("0 days: %v", err)
	}
	_, err = s.DailyCounts(t.Context(), "acct_nosuchaccountxxxxxx", 30)
	wantErr(t, err, storage.ErrNotFound)
	if got, err := s.DailyCounts(t.Context(), acct, 30); err != nil || len(got) != 30 || got[29].Total() != 2 {
		t.Errorf("30 days: %d, %v", len(got), err)
	}
}

func testIdempotency(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	ref := storage.IdemRef{Account: acct, Endpoint: "POST /v1/validate", Key: "key-0001"}
	beginRef := func(ref storage.IdemRef, hash string) (storage.IdemOutcome, storage.IdemRecord) {
		t.Helper()
		out, rec, err := s.BeginIdem(t.Context(), ref, []byte(hash))
		if err != nil {
			t.Fatal(err)
		}
		return out, rec
	}
	begin := func(hash string) (storage.IdemOutcome, storage.IdemRecord) {
		t.Helper()
		return beginRef(ref, hash)
	}
	if out, rec := begin("h1"); out != storage.IdemNew || rec.Done || !rec.CreatedAt.Equal(c.Now()) || !rec.ExpiresAt.Equal(c.Now().Add(24*time.Hour)) {
		t.Fatalf("first: %v %+v", out, rec)
	}
	if out, _ := begin("h1"); out != storage.IdemInFlight {
		t.Errorf("duplicate while pending: %v", out)
	}
	if out, _ := begin("h2"); out != storage.IdemMismatch {
		t.Errorf("other body while pending: %v", out)
	}
	resp := storage.IdemResponse{Status: 202, Header: []storage.HeaderField{{Name: "Content-Type", Value: "application/json"}, {Name: "Location", Value: "/v1/batch/x"}},
		Body: []byte(`{"job_id":"x"}`)}
	if err := s.CompleteIdem(t.Context(), ref, resp); err != nil {
		t.Fatal(err)
	}
	out, rec := begin("h1")
	if out != storage.IdemReplay || rec.Response.Status != 202 || string(rec.Response.Body) != `{"job_id":"x"}` ||
		!slices.Equal(rec.Response.Header, resp.Header) || !rec.Done {
		t.Fatalf("replay: %v %+v", out, rec)
	}
	if got, err := s.GetIdem(t.Context(), ref); err != nil || !got.Done || got.Response.Status != 202 {
		t.Errorf("GetIdem: %+v, %v", got, err)
	}
	if out, _ := begin("h2"); out != storage.IdemMismatch {
		t.Errorf("other body after completion: %v", out)
	}
	if out, _, err := s.BeginIdem(t.Context(), storage.IdemRef{Account: acct, Endpoint: "POST /v1/batch", Key: ref.Key}, []byte("h2")); err != nil || out != storage.IdemNew {
		t.Errorf("same key, other endpoint: %v, %v", out, err)
	}

	c.Advance(24*time.Hour - time.Millisecond)
	if out, _ := begin("h2"); out != storage.IdemMismatch {
		t.Errorf("just before expiry: %v", out)
	}
	c.Advance(time.Millisecond)
	if _, err := s.GetIdem(t.Context(), ref); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("expired record: %v", err)
	}
	if out, _ := begin("h2"); out != storage.IdemNew {
		t.Errorf("after expiry: %v", out)
	}

	if err := s.AbortIdem(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if out, _ := begin("h3"); out != storage.IdemNew {
		t.Errorf("after abort: %v", out)
	}
	noErr(t, s.CompleteIdem(t.Context(), ref, resp), "CompleteIdem")
	noErr(t, s.AbortIdem(t.Context(), ref), "AbortIdem of a completed record")
	if out, _ := begin("h3"); out != storage.IdemReplay {
		t.Errorf("abort of a completed record: %v", out)
	}

	// A record pending in a process that stopped is taken over.
	ref2 := storage.IdemRef{Account: acct, Endpoint: "POST /v1/validate", Key: "key-0002"}
	if out, _ := beginRef(ref2, "h"); out != storage.IdemNew {
		t.Fatal(out)
	}
	s = b.Reopen(t, s)
	if out, _ := beginRef(ref2, "h"); out != storage.IdemNew {
		t.Errorf("pending of a stopped process: %v", out)
	}
	if out, _ := beginRef(ref2, "h"); out != storage.IdemInFlight {
		t.Errorf("pending of this process: %v", out)
	}
	if out, _ := beginRef(ref, "h3"); out != storage.IdemReplay {
		t.Errorf("replay after a restart: %v", out)
	}
	if _, _, err := s.BeginIdem(t.Context(), storage.IdemRef{Account: "acct_nosuchaccountxxxxxx", Endpoint: "e", Key: "k"}, nil); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("unknown account: %v", err)
	}
	if _, _, err := s.BeginIdem(t.Context(), storage.IdemRef{Account: acct}, nil); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("empty key: %v", err)
	}
}

// Concurrent duplicates: exactly one request gets the key.
func testIdempotencyConcurrent(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	acct := account(t, s, 0)
	ref := storage.IdemRef{Account: acct, Endpoint: "validate", Key: "same-key"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[storage.IdemOutcome]int{}
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := s.BeginIdem(t.Context(), ref, []byte("h"))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			counts[out]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[storage.IdemNew] != 1 || counts[storage.IdemInFlight] != 49 {
		t.Errorf("outcomes %v", counts)
	}
}

func testIdempotencyPurge(t *testing.T, b backend) {
	c := NewClock()
	s := b.Open(t, c)
	acct := account(t, s, 0)
	ref := func(k string) storage.IdemRef { return storage.IdemRef{Account: acct, Endpoint: "validate", Key: k} }
	begin := func(k, hash string) {
		t.Helper()
		if out, _, err := s.BeginIdem(t.Context(), ref(k), []byte(hash)); err != nil || out != storage.IdemNew {
			t.Fatalf("BeginIdem(%s): %v, %v", k, out, err)
		}
	}
	for _, k := range []string{"old-0001", "old-0002", "old-0003"} {
		begin(k, "h")
	}
	noErr(t, s.CompleteIdem(t.Context(), ref("old-0001"), storage.IdemResponse{Status: 200}), "CompleteIdem")
	c.Advance(12 * time.Hour)
	begin("new-0001", "h")
	c.Advance(12 * time.Hour)
	// old-0003 expired and was begun again: its record is new.
	begin("old-0003", "h2")

	n, err := s.PurgeIdem(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("PurgeIdem: %d, %v; want 2", n, err)
	}
	for _, k := range []string{"old-0003", "new-0001"} {
		if _, err := s.GetIdem(t.Context(), ref(k)); err != nil {
			t.Errorf("live record %s: %v", k, err)
		}
	}
	c.Advance(24 * time.Hour)
	if n, err := s.PurgeIdem(t.Context()); err != nil || n != 2 {
		t.Errorf("second purge: %d, %v", n, err)
	}
	if n, err := s.PurgeIdem(t.Context()); err != nil || n != 0 {
		t.Errorf("third purge: %d, %v", n, err)
	}
}
