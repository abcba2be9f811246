// Package pebbletest opens throwaway Pebble stores for the tests of the
// packages above storage.
package pebbletest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// Open opens a store in a temporary directory with now as its clock (nil:
// real time), small caches and no background purges, closed when the test
// ends (a cleanup: services the test starts later close first).
func Open(t testing.TB, now func() time.Time) *pebble.DB {
	t.Helper()
	return OpenIn(t, t.TempDir(), now)
}

// OpenIn is Open in dir: a test that stops and opens a store again.
func OpenIn(t testing.TB, dir string, now func() time.Time) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, pebble.Options{Now: now, Logger: slog.New(slog.DiscardHandler),
		PurgeInterval: -1, CacheSize: 8 << 20, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Account creates an enterprise account with credits and returns its id.
func Account(t testing.TB, db storage.Store, credits int64) string {
	t.Helper()
	a, err := db.CreateAccount(t.Context(), "test", storage.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	if credits > 0 {
		if _, err := db.AddCredits(t.Context(), a.ID, credits, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}
