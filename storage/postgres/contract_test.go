package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the storage contract's suite (storage/storagetest,
// the one storage/pebble runs on Pebble) on a real PostgreSQL: one
// server, a new migrated database per subtest. Reopen closes the DB and
// opens another on the same database: a second box, the first one's
// process stopped.
func TestContract(t *testing.T) {
	srv := pgtest.Start(t)
	var n atomic.Int32
	dsns := map[*DB]string{}
	clocks := map[*DB]*storagetest.Clock{}
	openAt := func(t *testing.T, dsn string, c *storagetest.Clock) *DB {
		db, err := Open(context.Background(), dsn, Options{Now: c.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dsns[db], clocks[db] = dsn, c
		return db
	}
	storagetest.Run(t, storagetest.Backend[*DB]{
		Open: func(t *testing.T, c *storagetest.Clock) *DB {
			name := fmt.Sprintf("contract_%d", n.Add(1))
			pool := newPool(t, srv, name)
			if _, err := Migrate(context.Background(), pool); err != nil {
				t.Fatal(err)
			}
			return openAt(t, srv.DSN(name), c)
		},
		Reopen: func(t *testing.T, db *DB) *DB {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, dsns[db], clocks[db])
		},
	})
}
