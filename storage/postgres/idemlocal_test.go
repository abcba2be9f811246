package postgres

import (
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// TestIdemAfterOutage: a pending idempotency key whose request ended
// while the database was away (its AbortIdem failed, or its BeginIdem's
// answer was lost) does not stay "in progress" for as long as its box
// lives. On that box a retry takes it over at once; on another box a
// retry is processed once the first box's heartbeat has ended it, a
// moment after the database returns — long before the first box's lease
// would matter (it never runs out: the box lives). A key whose request
// still runs stays in flight on both boxes. On b4dd917 the key answered
// IdemInFlight on every retry for as long as the box lived.
func TestIdemAfterOutage(t *testing.T) {
	srv, _, open := fleetOf(t, 3*time.Second)
	a, b := open("a"), open("b")
	acct, err := a.CreateAccount(t.Context(), "idem", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(k string) storage.IdemRef {
		return storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: k}
	}
	begin := func(db *DB, k string, want storage.IdemOutcome) {
		t.Helper()
		if out, _, err := db.BeginIdem(t.Context(), ref(k), []byte("h")); err != nil || out != want {
			t.Fatalf("BeginIdem(%s) on %s: %v %v, want %v", k, db.box, out, err, want)
		}
	}
	begin(a, "aborted-here", storage.IdemNew)
	begin(a, "aborted-there", storage.IdemNew)
	begin(a, "running", storage.IdemNew)

	srv.Kill()
	for _, k := range []string{"aborted-here", "aborted-there"} {
		if err := a.AbortIdem(t.Context(), ref(k)); err == nil {
			t.Fatal("AbortIdem with the database down did not fail")
		}
	}
	if _, _, err := a.BeginIdem(t.Context(), ref("lost"), []byte("h")); err == nil {
		t.Fatal("BeginIdem with the database down did not fail")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The connections the kill broke are not handed out again (pgx
	// would find that out on their first use).
	a.pool.Reset()
	b.pool.Reset()

	// On box a: taken over at once; the running one stays in flight.
	begin(a, "aborted-here", storage.IdemNew)
	begin(a, "running", storage.IdemInFlight)
	begin(b, "running", storage.IdemInFlight)
	// On box b: in flight until a's heartbeat ends it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, err := b.BeginIdem(t.Context(), ref("aborted-there"), []byte("h"))
		if err == nil && out == storage.IdemNew {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a key whose request ended in the outage: %v %v on the other box a minute later", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	begin(b, "lost", storage.IdemNew)
	begin(a, "aborted-there", storage.IdemInFlight) // b holds it now
	begin(b, "running", storage.IdemInFlight)
	if n := len(a.idem.strays()); n != 0 {
		t.Fatalf("%d stray keys left on a", n)
	}
}
