package pebble_test

import (
	"log/slog"
	"testing"

	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the storage contract's suite (storage/storagetest)
// on Pebble; storage/postgres runs the same on PostgreSQL. Reopen closes
// the DB and opens its directory again: a restart.
func TestContract(t *testing.T) {
	dirs := map[*pebble.DB]string{}
	clocks := map[*pebble.DB]*storagetest.Clock{}
	openAt := func(t *testing.T, dir string, c *storagetest.Clock) *pebble.DB {
		db, err := pebble.Open(dir, pebble.Options{Now: c.Now, Logger: slog.New(slog.DiscardHandler), PurgeInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dirs[db], clocks[db] = dir, c
		return db
	}
	storagetest.Run(t, storagetest.Backend[*pebble.DB]{
		Open: func(t *testing.T, c *storagetest.Clock) *pebble.DB { return openAt(t, t.TempDir(), c) },
		Reopen: func(t *testing.T, db *pebble.DB) *pebble.DB {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, dirs[db], clocks[db])
		},
	})
}
