package pebble_test

import (
	"log/slog"
	"testing"

	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the shared compliance suite on the Pebble backend;
// storage/postgres runs the same on PostgreSQL.
func TestContract(t *testing.T) {
	dirs := map[*pebble.DB]string{}
	clocks := map[*pebble.DB]*storagetest.Clock{}
	openAt := func(t *testing.T, dir string, c *storagetest.Clock) *pebble.DB {
		opts := pebble.Options{Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1}
		if c != nil {
			opts.Now = c.Now
		}
		db, err := pebble.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dirs[db], clocks[db] = dir, c
		return db
	}
	be := storagetest.Backend[*pebble.DB]{
		Open: func(t *testing.T, c *storagetest.Clock) *pebble.DB { return openAt(t, t.TempDir(), c) },
		Reopen: func(t *testing.T, db *pebble.DB) *pebble.DB {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, dirs[db], clocks[db])
		},
	}
	storagetest.RunAccountsKeys(t, func(t *testing.T) storagetest.AccountsKeys { return be.Open(t, nil) })
	storagetest.RunCredits(t, func(t *testing.T) storagetest.Credits { return be.Open(t, nil) })
	storagetest.RunCharges(t, be)
	storagetest.RunJobs(t, be)
	storagetest.RunUsers(t, be)
}
