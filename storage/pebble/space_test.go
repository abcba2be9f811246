package pebble

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// TestSpaceGuard: while the disk has less free space than the reserve,
// every write is refused with ErrNoSpace before Pebble sees it — nothing
// of it is applied, in memory or on disk — and reads go on; once space
// is there again, writes are taken by themselves. (The reserve is raised
// above the disk's free space here; cmd/verifyd's TestDiskFull fills a
// real file system.)
func TestSpaceGuard(t *testing.T) {
	db := openTest(t)
	acct, err := db.CreateAccount(t.Context(), "space", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(t.Context(), acct.ID, 10, ""); err != nil {
		t.Fatal(err)
	}
	h, err := db.Hold(t.Context(), acct.ID, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := db.Hold(t.Context(), acct.ID, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	ref := storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: "space-0001"}
	if out, _, err := db.BeginIdem(t.Context(), ref, []byte("h")); err != nil || out != storage.IdemNew {
		t.Fatalf("BeginIdem: %v %v", out, err)
	}
	g := db.space
	min := g.min
	g.min = 1 << 62 // more than any disk has
	g.look()
	if !db.Low() {
		t.Fatal("the guard does not see the disk as full")
	}
	if _, err := db.Hold(t.Context(), acct.ID, 1, ""); !errors.Is(err, storage.ErrNoSpace) || !storage.NoSpace(err) {
		t.Fatalf("Hold with the disk full: %v", err)
	}
	if _, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "a@x.test", Status: "valid"}}); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("Charge with the disk full: %v", err)
	}
	if _, err := db.AddCredits(t.Context(), acct.ID, 5, ""); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("AddCredits with the disk full: %v", err)
	}
	if _, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct.ID, Addresses: []string{"b@x.test"}}); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("CreateJob with the disk full: %v", err)
	}
	// A release goes: it frees credits a request no longer needs; so
	// does the end of a key whose request answered 503, else its retry
	// would find it in flight.
	if _, err := db.Release(t.Context(), h2, "engine error"); err != nil {
		t.Fatalf("Release with the disk full: %v", err)
	}
	if err := db.AbortIdem(t.Context(), ref); err != nil {
		t.Fatalf("AbortIdem with the disk full: %v", err)
	}
	if _, _, err := db.BeginIdem(t.Context(), ref, []byte("h")); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("BeginIdem with the disk full: %v", err)
	}
	// Reads go on, and show nothing of the refused writes.
	c, err := db.Credits(t.Context(), acct.ID)
	if err != nil || c.Balance != 10 || c.Held != 1 {
		t.Fatalf("credits with the disk full: %+v %v", c, err)
	}
	g.min = min
	g.look()
	if db.Low() {
		t.Fatal("the guard still refuses with space free")
	}
	if _, err := db.Charge(t.Context(), h, storage.ChargeRequest{Result: storage.Result{Email: "a@x.test", Status: "valid"}}); err != nil {
		t.Fatalf("Charge once space is back: %v", err)
	}
	if out, _, err := db.BeginIdem(t.Context(), ref, []byte("h")); err != nil || out != storage.IdemNew {
		t.Fatalf("the key's retry once space is back: %v %v", out, err)
	}
	db.reopen(t)
	if c, err := db.Credits(t.Context(), acct.ID); err != nil || c.Balance != 9 || c.Held != 0 {
		t.Fatalf("credits after a reopen: %+v %v", c, err)
	}
	storagetest.CheckLedger(t, db.DB, acct.ID)
}

// TestPrivateFiles: whatever the umask, every file and directory Pebble
// creates is verifyd's user's only (0600 and 0700): the data holds
// credits, history, key hashes and receipts.
func TestPrivateFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, testOptions(newClock()))
	if err != nil {
		t.Fatal(err)
	}
	acct, err := db.CreateAccount(t.Context(), "files", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(t.Context(), acct.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d files and directories", n)
	}
}
