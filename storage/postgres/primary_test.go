package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage"
)

// waitReady waits, a minute at most, until db's Ready is nil (want) or
// not (!want), and returns how long that took.
func waitReady(t *testing.T, db *DB, want bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := db.Ready()
		if (err == nil) == want {
			if !want && !errors.Is(err, ErrNotReady) {
				t.Fatalf("Ready: %v, want ErrNotReady", err)
			}
			return time.Since(start)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("Ready is still %v after a minute", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPrimaryWatch: Ready follows the database. The server stopped:
// not ready within the watch's bound; started again: ready, with no
// restart of the box. The server turned read-only under the box's open
// connections (default_transaction_read_only, as a demoted primary): the
// first write refused with 25006 closes its connection and the box is
// not ready until the server takes writes again; then a charge goes
// through.
func TestPrimaryWatch(t *testing.T) {
	srv, pool, open := fleetOf(t, 30*time.Second)
	db := open("a")
	ctx := context.Background()
	if err := db.Ready(); err != nil {
		t.Fatalf("Ready after Open: %v", err)
	}
	acct, err := db.CreateAccount(ctx, "watch", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(ctx, acct.ID, 10, ""); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	took := waitReady(t, db, false)
	t.Logf("server killed: not ready after %v", took)
	if took > watchEvery+watchTimeout+5*time.Second {
		t.Errorf("not ready %v after the kill: the watch runs every %v, within %v", took, watchEvery, watchTimeout)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server back: ready after %v", waitReady(t, db, true))

	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	before := readOnlyErrors.Get()
	exec(`ALTER SYSTEM SET default_transaction_read_only = on`)
	exec(`SELECT pg_reload_conf()`)
	// A write on a connection the box opened before: refused (25006).
	time.Sleep(200 * time.Millisecond) // the reload reaches the backends
	if _, err := db.AddCredits(ctx, acct.ID, 1, ""); err == nil {
		t.Fatal("a write to a read-only server succeeded")
	}
	if readOnlyErrors.Get() == before {
		t.Error("the read-only error was not counted")
	}
	waitReady(t, db, false)
	if err := db.Ready(); err == nil || !errors.Is(err, ErrNotReady) {
		t.Fatalf("Ready on a read-only server: %v", err)
	}
	exec(`SET default_transaction_read_only = off`)
	exec(`ALTER SYSTEM RESET default_transaction_read_only`)
	exec(`SELECT pg_reload_conf()`)
	waitReady(t, db, true)
	if _, err := db.AddCredits(ctx, acct.ID, 1, ""); err != nil {
		t.Fatalf("a write once the server takes writes again: %v", err)
	}
}

// TestReconcileFindsLostCharges: a charge answered and then gone from
// the database (its result row deleted behind the box's back, as a
// failover to a standby that had not received it leaves it) is found
// and reported, once, when the box finds the database again after an
// outage; the charges still there are not.
func TestReconcileFindsLostCharges(t *testing.T) {
	testReconcile(t, 0)
}

// TestReconcileAfterALongOutage: the reconciliation looks at the charges
// answered before the outage began, however long the database was away
// (here four times the journal's window, shortened for the test).
func TestReconcileAfterALongOutage(t *testing.T) {
	saved := journalWindow
	journalWindow = 500 * time.Millisecond
	t.Cleanup(func() { journalWindow = saved })
	testReconcile(t, 4*journalWindow)
}

// testReconcile charges three validations, deletes the first one's
// result, takes the database away for at least away, and expects that
// one reported lost.
func testReconcile(t *testing.T, away time.Duration) {
	srv, pool, open := fleetOf(t, 30*time.Second)
	db := open("a")
	ctx := context.Background()
	acct, err := db.CreateAccount(ctx, "reconcile", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(ctx, acct.ID, 10, ""); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		h, err := db.Hold(ctx, acct.ID, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.Charge(ctx, h, storage.ChargeRequest{Result: storage.Result{Email: fmt.Sprintf("r%d@x.test", i), Status: "valid"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Result.ID)
	}
	// The first charge's rows are gone.
	if _, err := pool.Exec(ctx, `DELETE FROM results WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	lost, runs := lostCharges.Get(), reconciliations.Get()
	srv.Kill()
	waitReady(t, db, false)
	time.Sleep(away)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, db, true)
	// The reconciliation runs once the box is ready again.
	for deadline := time.Now().Add(time.Minute); reconciliations.Get() == runs && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if got := lostCharges.Get() - lost; got != 1 {
		t.Errorf("%d lost charges reported, want 1 (result %s)", got, ids[0])
	}
	if got := reconciliations.Get() - runs; got != 1 {
		t.Errorf("%d reconciliations, want 1", got)
	}
	// A second check of a database that stayed up runs none.
	time.Sleep(2 * watchEvery)
	if got := reconciliations.Get() - runs; got != 1 {
		t.Errorf("%d reconciliations after the database stayed up, want 1", got)
	}
}

// TestReadWriteOnlyWithSeveralHosts: a DSN naming several servers gets
// target_session_attrs=read-write unless it says otherwise; one naming a
// single server (with sslmode=prefer's TLS and plain variants of it) gets
// no check of its own.
func TestReadWriteOnlyWithSeveralHosts(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://u@db1:5432/v":                                 false,
		"postgres://u@db1:5432/v?sslmode=prefer":                  false,
		"postgres://u@db1:5432,db2:5432/v":                        true,
		"host=db1,db2 port=5432,5433 user=u dbname=v":             true,
		"postgres://u@db1,db2/v?target_session_attrs=any":         false,
		"postgres://u@db1:5432,db2:5432/v?sslmode=disable":        true,
		"postgres://u@db1:5432/v?target_session_attrs=read-write": true,
	} {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		readWrite(cfg, dsn)
		if got := cfg.ConnConfig.ValidateConnect != nil; got != want {
			t.Errorf("%s: a read-write check %v, want %v", dsn, got, want)
		}
	}
}
