package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/internal/faultproxy"
	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
)

// proxiedFleet migrates a database "fleet" on srv and returns a proxy in
// front of srv, which the test may cut, and the database's DSN through it.
func proxiedFleet(t *testing.T, srv *pgtest.Server) (*faultproxy.Proxy, string) {
	t.Helper()
	if _, err := Migrate(context.Background(), newPool(t, srv, "fleet")); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return proxy, strings.Replace(srv.DSN("fleet"), srv.Addr(), proxy.Addr(), 1)
}

// TestBeginIdemAfterLinkReset: a link reset breaks the connections the
// pool holds; the next BeginIdem's first write fails before anything
// reaches the server, and it is tried again on another connection
// instead of failing (the request then went on without its key: a key
// answered already was answered 500 instead of replayed).
func TestBeginIdemAfterLinkReset(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	proxy, dsn := proxiedFleet(t, srv)
	db, err := Open(ctx, dsn, Options{Box: "a", Lease: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	acct, err := db.CreateAccount(ctx, "reset", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	ref := func(i int) storage.IdemRef {
		return storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: fmt.Sprintf("key-%08d", i)}
	}
	// Fill the pool: several connections, idle now.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := db.BeginIdem(ctx, ref(i), []byte("h")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for round := range 3 {
		cut := proxy.Reset()
		before := idemRetries.Get()
		out, _, err := db.BeginIdem(ctx, ref(100+round), []byte("h"))
		if err != nil {
			t.Fatalf("round %d: BeginIdem after a reset that cut %d connections: %v (tried again %d times)", round, cut, err, idemRetries.Get()-before)
		}
		if out != storage.IdemNew {
			t.Fatalf("round %d: %v, want a new record", round, out)
		}
		t.Logf("round %d: %d connections cut, BeginIdem tried again %d times", round, cut, idemRetries.Get()-before)
	}
}

// TestBeginIdemCommittedThenCut: a BeginIdem whose commit the server
// made while its connection was ended (a server stopping ends a backend
// waiting for its synchronous standby with FATAL, its commit made
// locally) and whose next try finds the database out of reach. The
// pending record it wrote is this box's to end: once the database is
// back the heartbeat's work deletes it, and a retry of the key on
// another box is processed instead of waiting for a request that no
// longer runs (TestFleetFailoverSync saw a key answered 409 for a
// minute after a failover).
func TestBeginIdemCommittedThenCut(t *testing.T) {
	srv := pgtest.StartWith(t)
	ctx := context.Background()
	proxy, dsn := proxiedFleet(t, srv)
	open := func(box string) *DB {
		db, err := Open(ctx, dsn, Options{Box: box, Lease: 30 * time.Second, CallTimeout: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open("a"), open("b")
	acct, err := a.CreateAccount(ctx, "cut", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	ref := storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: "key-committed-then-cut"}
	admin, err := pgxpool.New(ctx, srv.DSN("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	// Every commit now waits for a standby that never comes.
	if err := srv.Set(ctx, "synchronous_standby_names", "nobody"); err != nil {
		t.Fatal(err)
	}
	type began struct {
		out storage.IdemOutcome
		err error
	}
	done := make(chan began, 1)
	go func() {
		out, _, err := a.BeginIdem(ctx, ref, []byte("h"))
		done <- began{out, err}
	}()
	var pid int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = 'fleet' AND wait_event = 'SyncRep'`).Scan(&pid)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no BeginIdem commit waits for the standby: %v", err)
		}
	}
	// The database out of reach for the next try, and the backend ended
	// with its commit made.
	proxy.Refuse()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err == nil {
		t.Fatalf("BeginIdem answered %v through a connection the server ended", r.out)
	}
	if err := srv.Set(ctx, "synchronous_standby_names", ""); err != nil {
		t.Fatal(err)
	}
	proxy.Pass()
	var pending int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM idem WHERE key = $1 AND NOT done`, ref.Key).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Fatalf("%d pending records: the commit was not made, the test shows nothing", pending)
	}
	a.endStrays() // what a's heartbeat does once the database answers
	out, _, err := b.BeginIdem(ctx, ref, []byte("h"))
	if err != nil || out != storage.IdemNew {
		t.Fatalf("a retry of the key on another box: %v %v, want a new record (the pending one a's request left was a's to end)", out, err)
	}
}
