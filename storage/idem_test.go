package storage

import (
	"sync"
	"testing"
	"time"
)

func TestIdempotency(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	ref := IdemRef{Account: acct, Endpoint: "POST /v1/validate", Key: "key-0001"}
	begin := func(hash string) (IdemOutcome, IdemRecord) {
		t.Helper()
		out, rec, err := db.BeginIdem(ref, []byte(hash))
		if err != nil {
			t.Fatal(err)
		}
		return out, rec
	}
	if out, _ := begin("h1"); out != IdemNew {
		t.Fatalf("first: %v", out)
	}
	if out, _ := begin("h1"); out != IdemInFlight {
		t.Errorf("duplicate while pending: %v", out)
	}
	if out, _ := begin("h2"); out != IdemMismatch {
		t.Errorf("other body while pending: %v", out)
	}
	resp := IdemResponse{Status: 202, Header: []HeaderField{{"Content-Type", "application/json"}}, Body: []byte(`{"job_id":"x"}`)}
	if err := db.CompleteIdem(ref, resp); err != nil {
		t.Fatal(err)
	}
	out, rec := begin("h1")
	if out != IdemReplay || rec.Response.Status != 202 || string(rec.Response.Body) != `{"job_id":"x"}` || rec.Response.Header[0].Name != "Content-Type" {
		t.Fatalf("replay: %v %+v", out, rec)
	}
	if out, _ := begin("h2"); out != IdemMismatch {
		t.Errorf("other body after completion: %v", out)
	}
	// Keys are per account and per endpoint.
	if out, _, _ := db.BeginIdem(IdemRef{Account: acct, Endpoint: "POST /v1/batch", Key: ref.Key}, []byte("h2")); out != IdemNew {
		t.Errorf("same key, other endpoint: %v", out)
	}

	// 24 hours later the record is gone: the key starts afresh.
	db.clock.Advance(24*time.Hour - time.Millisecond)
	if out, _ := begin("h2"); out != IdemMismatch {
		t.Errorf("just before expiry: %v", out)
	}
	db.clock.Advance(time.Millisecond)
	if _, err := db.GetIdem(ref); err == nil {
		t.Error("expired record returned")
	}
	if out, _ := begin("h2"); out != IdemNew {
		t.Errorf("after expiry: %v", out)
	}

	// Abort lets a retry in; it never deletes a completed record.
	if err := db.AbortIdem(ref); err != nil {
		t.Fatal(err)
	}
	if out, _ := begin("h3"); out != IdemNew {
		t.Errorf("after abort: %v", out)
	}
	db.CompleteIdem(ref, resp)
	db.AbortIdem(ref)
	if out, _ := begin("h3"); out != IdemReplay {
		t.Errorf("abort of a completed record: %v", out)
	}

	// A record pending in a process that died is taken over.
	ref2 := IdemRef{Account: acct, Endpoint: "POST /v1/validate", Key: "key-0002"}
	if out, _, _ := db.BeginIdem(ref2, []byte("h")); out != IdemNew {
		t.Fatal(out)
	}
	db.reopen(t)
	if out, _, _ := db.BeginIdem(ref2, []byte("h")); out != IdemNew {
		t.Errorf("pending of a dead process: %v", out)
	}
	if out, _, _ := db.BeginIdem(ref2, []byte("h")); out != IdemInFlight {
		t.Errorf("pending of this process: %v", out)
	}
	if _, _, err := db.BeginIdem(IdemRef{Account: "acct_nope", Endpoint: "e", Key: "k"}, nil); err == nil {
		t.Error("unknown account")
	}
	if _, _, err := db.BeginIdem(IdemRef{Account: acct}, nil); err == nil {
		t.Error("empty key")
	}
}

// Concurrent duplicates: exactly one request gets the key.
func TestIdempotencyConcurrent(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	ref := IdemRef{Account: acct, Endpoint: "validate", Key: "same-key"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[IdemOutcome]int{}
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := db.BeginIdem(ref, []byte("h"))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			counts[out]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[IdemNew] != 1 || counts[IdemInFlight] != 49 {
		t.Errorf("outcomes %v", counts)
	}
}

func TestIdempotencyPurge(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	ref := func(k string) IdemRef { return IdemRef{Account: acct, Endpoint: "validate", Key: k} }
	for _, k := range []string{"old-0001", "old-0002", "old-0003"} {
		db.BeginIdem(ref(k), []byte("h"))
	}
	db.CompleteIdem(ref("old-0001"), IdemResponse{Status: 200})
	db.clock.Advance(12 * time.Hour)
	db.BeginIdem(ref("new-0001"), []byte("h"))
	db.clock.Advance(12 * time.Hour)
	// old-0003 expired and was begun again: its record is new, its old
	// index key stale.
	db.BeginIdem(ref("old-0003"), []byte("h2"))

	n, err := db.PurgeIdem()
	if err != nil || n != 2 {
		t.Fatalf("PurgeIdem: %d, %v", n, err)
	}
	countKeys := func(prefix string) int {
		n := 0
		db.scanPrefix([]byte(prefix), func(_, _ []byte) (bool, error) { n++; return true, nil })
		return n
	}
	if r, i := countKeys(prefixIdem), countKeys(prefixIdemExpiry); r != 2 || i != 2 {
		t.Errorf("%d records and %d index keys left, want 2 and 2", r, i)
	}
	if _, err := db.GetIdem(ref("old-0003")); err != nil {
		t.Errorf("the renewed record: %v", err)
	}
	if _, err := db.GetIdem(ref("new-0001")); err != nil {
		t.Errorf("the live record: %v", err)
	}
	db.clock.Advance(24 * time.Hour)
	if n, err := db.PurgeIdem(); err != nil || n != 2 {
		t.Errorf("second purge: %d, %v", n, err)
	}
	if r, i := countKeys(prefixIdem), countKeys(prefixIdemExpiry); r != 0 || i != 0 {
		t.Errorf("%d records and %d index keys left", r, i)
	}
}

// The background loop purges on its own.
func TestIdempotencyPurgeLoop(t *testing.T) {
	c := newClock()
	opts := testOptions(c)
	opts.PurgeInterval = time.Millisecond
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, _ := db.CreateAccount("x", PlanFree)
	db.BeginIdem(IdemRef{Account: a.ID, Endpoint: "e", Key: "k"}, nil)
	c.Advance(25 * time.Hour)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n := 0
		db.scanPrefix([]byte(prefixIdem), func(_, _ []byte) (bool, error) { n++; return true, nil })
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not purge")
		}
		time.Sleep(time.Millisecond)
	}
}
