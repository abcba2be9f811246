package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestServer: a real server takes a database, a table and a committed
// row; the row survives a kill -9 of the server and its restart (the
// commit was durable: fsync is on), and Stop removes the directory.
func TestServer(t *testing.T) {
	srv := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.CreateDatabase(ctx, "verifyd_test"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srv.DSN("verifyd_test"))
	if err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync %q, %v", fsync, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (k text PRIMARY KEY, v bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ('a', 42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, srv.DSN("verifyd_test"))
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	if err := conn.QueryRow(ctx, "SELECT v FROM t WHERE k = 'a'").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after kill -9 and restart: %d, %v", v, err)
	}
	conn.Close(ctx)
}

// TestFailover: a synchronous standby made by StartStandby has every row
// the primary committed when the primary is stopped at once; promoted, it
// takes writes; the old primary, rewound, streams from it and has the
// new rows.
func TestFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := StartWith(t)
	if err := primary.CreateDatabase(ctx, "ha"); err != nil {
		t.Fatal(err)
	}
	standby := StartStandby(t, primary.Addr())
	if err := primary.Set(ctx, "synchronous_standby_names", "*"); err != nil {
		t.Fatal(err)
	}
	if err := primary.WaitStreaming(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	exec := func(s *Server, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.DSN("ha"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s on :%d: %v", sql, s.Port, err)
		}
	}
	count := func(s *Server) int {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.DSN("ha"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(primary, `CREATE TABLE t (k int PRIMARY KEY)`)
	exec(primary, `INSERT INTO t SELECT generate_series(1, 100)`)
	primary.StopImmediate()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(standby); n != 100 {
		t.Fatalf("the promoted standby has %d rows of 100 committed synchronously", n)
	}
	exec(standby, `INSERT INTO t VALUES (101)`)
	if err := primary.Rewind(standby.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitStreaming(ctx, 1, false); err != nil {
		t.Fatalf("%v\nthe rewound primary's log:\n%s\nthe new primary's:\n%s", err, primary.Log(), standby.Log())
	}
	for deadline := time.Now().Add(20 * time.Second); count(primary) != 101; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the rewound primary has %d rows, want 101; its log:\n%s", count(primary), primary.Log())
		}
	}
	conn, err := pgx.Connect(ctx, primary.DSN("ha"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO t VALUES (102)`); err == nil {
		t.Fatal("the rewound primary took a write: it is not a standby")
	}
}
