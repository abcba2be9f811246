package pebble

import (
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

func TestIdempotencyPurge(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 0)
	ref := func(k string) storage.IdemRef { return storage.IdemRef{Account: acct, Endpoint: "validate", Key: k} }
	begin := func(k, hash string) {
		t.Helper()
		if out, _, err := db.BeginIdem(t.Context(), ref(k), []byte(hash)); err != nil || out != storage.IdemNew {
			t.Fatalf("BeginIdem(%s): %v, %v", k, out, err)
		}
	}
	for _, k := range []string{"old-0001", "old-0002", "old-0003"} {
		begin(k, "h")
	}
	if err := db.CompleteIdem(t.Context(), ref("old-0001"), storage.IdemResponse{Status: 200}); err != nil {
		t.Fatal(err)
	}
	db.clock.Advance(12 * time.Hour)
	begin("new-0001", "h")
	db.clock.Advance(12 * time.Hour)
	// old-0003 expired and was begun again: its record is new, its old
	// index key stale.
	begin("old-0003", "h2")

	n, err := db.PurgeIdem(t.Context())
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
	if _, err := db.GetIdem(t.Context(), ref("old-0003")); err != nil {
		t.Errorf("the renewed record: %v", err)
	}
	if _, err := db.GetIdem(t.Context(), ref("new-0001")); err != nil {
		t.Errorf("the live record: %v", err)
	}
	db.clock.Advance(24 * time.Hour)
	if n, err := db.PurgeIdem(t.Context()); err != nil || n != 2 {
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
	a, err := db.CreateAccount(t.Context(), "x", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := db.BeginIdem(t.Context(), storage.IdemRef{Account: a.ID, Endpoint: "e", Key: "k"}, nil); err != nil || out != storage.IdemNew {
		t.Fatalf("BeginIdem: %v, %v", out, err)
	}
	records := func() int {
		t.Helper()
		n := 0
		if err := db.scanPrefix([]byte(prefixIdem), func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := records(); n != 1 {
		t.Fatalf("%d idempotency records before the purge, want 1", n)
	}
	c.Advance(25 * time.Hour)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if records() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not purge")
		}
		time.Sleep(time.Millisecond)
	}
}
