package storage_test

import (
	"log/slog"
	"testing"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the shared compliance suite on the Pebble backend;
// storage/postgres runs the same on PostgreSQL.
func TestContract(t *testing.T) {
	dirs := map[*storage.DB]string{}
	clocks := map[*storage.DB]*storagetest.Clock{}
	openAt := func(t *testing.T, dir string, c *storagetest.Clock) *storage.DB {
		opts := storage.Options{Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1}
		if c != nil {
			opts.Now = c.Now
		}
		db, err := storage.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dirs[db], clocks[db] = dir, c
		return db
	}
	be := storagetest.Backend[*storage.DB]{
		Open: func(t *testing.T, c *storagetest.Clock) *storage.DB { return openAt(t, t.TempDir(), c) },
		Reopen: func(t *testing.T, db *storage.DB) *storage.DB {
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
