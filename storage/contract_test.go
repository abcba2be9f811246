package storage_test

import (
	"testing"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestContract runs the shared compliance suite on the Pebble backend;
// storage/postgres runs the same on PostgreSQL.
func TestContract(t *testing.T) {
	open := func(t *testing.T) *storage.DB {
		db, err := storage.Open(t.TempDir(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storagetest.RunAccountsKeys(t, func(t *testing.T) storagetest.AccountsKeys { return open(t) })
	storagetest.RunCredits(t, func(t *testing.T) storagetest.Credits { return open(t) })
}
