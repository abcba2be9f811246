package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the shared compliance suite (the one storage's tests
// run on Pebble) on a real PostgreSQL: one server, a new migrated
// database per subtest.
func TestContract(t *testing.T) {
	srv := pgtest.Start(t)
	var n atomic.Int32
	open := func(t *testing.T) *DB {
		ctx := context.Background()
		name := fmt.Sprintf("contract_%d", n.Add(1))
		pool := newPool(t, srv, name)
		if _, err := Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
		db, err := Open(ctx, srv.DSN(name), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storagetest.RunAccountsKeys(t, func(t *testing.T) storagetest.AccountsKeys { return open(t) })
	storagetest.RunCredits(t, func(t *testing.T) storagetest.Credits { return open(t) })
}
