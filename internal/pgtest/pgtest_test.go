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
