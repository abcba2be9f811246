package pebble

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// clock is the suite's fake clock: time passes only when a test says so.
type clock = storagetest.Clock

func newClock() *clock { return storagetest.NewClock() }

// testDB is an open DB in a temporary directory with a fake clock.
type testDB struct {
	*DB
	dir   string
	clock *clock
	opts  *Options // nil: testOptions(clock)
}

func testOptions(c *clock) Options {
	return Options{
		Now:       c.Now,
		Logger:    slog.New(slog.DiscardHandler),
		CacheSize: 8 << 20,
		// Small memtables, so tests read from sstables too, not only from
		// the memtable.
		MemTableSize:  1 << 20,
		PurgeInterval: -1,
	}
}

func openTest(t testing.TB) *testDB {
	t.Helper()
	c := newClock()
	dir := t.TempDir()
	db, err := Open(dir, testOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	tdb := &testDB{DB: db, dir: dir, clock: c}
	t.Cleanup(func() {
		if !tdb.closed.Load() {
			tdb.Close()
		}
	})
	return tdb
}

// reopen closes and opens the database again, as a restart does.
func (tdb *testDB) reopen(t testing.TB) {
	t.Helper()
	if err := tdb.Close(); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(tdb.clock)
	if tdb.opts != nil {
		opts = *tdb.opts
	}
	db, err := Open(tdb.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	tdb.DB = db
}

// account creates an account with n credits.
func (tdb *testDB) account(t testing.TB, n int64) string {
	t.Helper()
	a, err := tdb.CreateAccount(t.Context(), "test", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if _, err := tdb.AddCredits(t.Context(), a.ID, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}

// checkLedger verifies the account's ledger: seqs 1, 2, 3…, every
// entry's Balance and Held the previous ones plus its changes, never
// negative, Held ≤ Balance, and the last entry what Credits reports. It
// returns the entries.
func checkLedger(t testing.TB, db *DB, account string) []storage.Entry {
	t.Helper()
	es, err := db.Ledger(t.Context(), account, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bal, held int64
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i+1, e.Seq)
		}
		var heldDelta int64
		switch e.Kind {
		case storage.EntryHold:
			heldDelta = e.Amount
		case storage.EntryCharge, storage.EntryRelease:
			if e.HoldSeq != 0 { // a charge without a hold: ChargeDirect
				heldDelta = -e.Amount
			}
		}
		bal += e.Delta
		held += heldDelta
		if e.Balance != bal || e.Held != held {
			t.Fatalf("entry %d (%v): balance %d held %d, chain says %d and %d", e.Seq, e.Kind, e.Balance, e.Held, bal, held)
		}
		if bal < 0 || held < 0 || held > bal {
			t.Fatalf("entry %d (%v): balance %d, held %d", e.Seq, e.Kind, bal, held)
		}
		switch e.Kind {
		case storage.EntryAdd, storage.EntryRefund:
			if e.Delta != e.Amount {
				t.Fatalf("entry %d (%v): delta %d, amount %d", e.Seq, e.Kind, e.Delta, e.Amount)
			}
		case storage.EntryCharge, storage.EntryReserve:
			if e.Delta != -e.Amount {
				t.Fatalf("entry %d (%v): delta %d, amount %d", e.Seq, e.Kind, e.Delta, e.Amount)
			}
		case storage.EntryHold, storage.EntryRelease, storage.EntryUse:
			if e.Delta != 0 {
				t.Fatalf("entry %d (%v): delta %d", e.Seq, e.Kind, e.Delta)
			}
		}
	}
	c, err := db.Credits(t.Context(), account)
	if err != nil {
		t.Fatal(err)
	}
	if c.Balance != bal || c.Held != held {
		t.Fatalf("Credits says %+v, ledger %d/%d", c, bal, held)
	}
	return es
}

// hold holds n credits of the account.
func (tdb *testDB) hold(t testing.TB, account string, n int64, ref string) storage.Hold {
	t.Helper()
	h, err := tdb.Hold(t.Context(), account, n, ref)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// result returns a single result for email.
func result(email, status string) storage.Result {
	return storage.Result{Email: email, Status: status, Score: 90, LatencyMs: 42}
}

// validate runs the hot path of one validation: hold, then charge.
func (tdb *testDB) validate(t testing.TB, account string, r storage.Result) storage.Charged {
	t.Helper()
	h, err := tdb.Hold(t.Context(), account, 1, "req")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tdb.Charge(t.Context(), h, storage.ChargeRequest{Result: r})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
