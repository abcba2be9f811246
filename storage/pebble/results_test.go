package pebble

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// putBatchRows writes n batch results for acct at the clock's time
// through a job, in chunks.
func (tdb *testDB) putBatchRows(t testing.TB, acct string, n int, chunk int) storage.Job {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("b%d@example.com", i)
	}
	j, err := tdb.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tdb.StartJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += chunk {
		var rs []storage.JobResult
		for k := i; k < min(n, i+chunk); k++ {
			rs = append(rs, storage.JobResult{Index: k, Result: storage.Result{Email: addrs[k], Status: "valid", Score: 80, LatencyMs: -1}})
		}
		if j, err = tdb.PutJobResults(t.Context(), j.ID, rs); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// walk pages through the account's history and returns every row.
func walk(t *testing.T, db *DB, acct, kind string, limit int) []storage.HistoryRow {
	t.Helper()
	return storagetest.WalkHistory(t, db, acct, kind, limit)
}

// Walking pages with any limit yields every row exactly once, newest first,
// though 1,000 rows share one millisecond; also per kind.
func TestHistoryPagingLossless(t *testing.T) {
	db := openTest(t)
	acct := db.account(t, 10_000)
	other := db.account(t, 10)
	db.validate(t, other, result("other@example.com", "valid"))

	t0 := db.clock.Now()
	// 20 rows in earlier milliseconds, 1,000 in t0, 20 later; single rows
	// written concurrently, batch rows in chunks, interleaved.
	db.clock.Set(t0.Add(-20 * time.Millisecond))
	for range 20 {
		db.validate(t, acct, result("early@example.com", "valid"))
		db.clock.Advance(time.Millisecond)
	}
	db.clock.Set(t0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				h, err := db.Hold(t.Context(), acct, 1, "")
				if err == nil {
					_, err = db.Charge(t.Context(), h, storage.ChargeRequest{Result: result(fmt.Sprintf("s%d-%d@example.com", g, i), "valid")})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	db.putBatchRows(t, acct, 400, 37)
	wg.Wait()
	for range 20 {
		db.clock.Advance(time.Millisecond)
		db.validate(t, acct, result("late@example.com", "risky"))
	}

	want := map[string]int{storage.HistoryAll: 1040, storage.HistorySingle: 640, storage.HistoryBatch: 400}
	for _, kind := range []string{storage.HistoryAll, storage.HistorySingle, storage.HistoryBatch} {
		for _, limit := range []int{1, 7, 50, 200} {
			rows := walk(t, db.DB, acct, kind, limit)
			if len(rows) != want[kind] {
				t.Errorf("kind %s, limit %d: %d rows, want %d", kind, limit, len(rows), want[kind])
			}
			seen := make(map[uint64]bool)
			inT0 := 0
			for i, r := range rows {
				if seen[r.ID] {
					t.Fatalf("kind %s, limit %d: row %d twice", kind, limit, r.ID)
				}
				seen[r.ID] = true
				if kind != storage.HistoryAll && r.Kind != kind {
					t.Fatalf("kind %s: a %s row", kind, r.Kind)
				}
				if r.ProbedAt.Equal(t0) {
					inT0++
				}
				if i == 0 {
					continue
				}
				prev := rows[i-1]
				// Newest first: by probed_at, then by write order (ids
				// grow with it within an account).
				if r.ProbedAt.After(prev.ProbedAt) || r.Pos >= prev.Pos ||
					r.ProbedAt.Equal(prev.ProbedAt) && r.ID >= prev.ID {
					t.Fatalf("kind %s, limit %d: row %d (%v, id %d) after row %d (%v, id %d)",
						kind, limit, i, r.ProbedAt, r.ID, i-1, prev.ProbedAt, prev.ID)
				}
			}
			if kind == storage.HistoryAll && inT0 != 1000 {
				t.Errorf("%d rows in the shared millisecond", inT0)
			}
		}
	}

	// A client's own millisecond cursor keeps the spec's meaning: rows
	// probed strictly before that instant.
	p, err := db.ListHistory(t.Context(), acct, storage.HistoryAll, t0.Format(time.RFC3339Nano), 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 20 || p.Rows[0].Email != "early@example.com" || !p.Rows[0].ProbedAt.Before(t0) {
		t.Errorf("millisecond cursor: %d rows, first %+v", len(p.Rows), p.Rows[0])
	}
	if p, err := db.ListHistory(t.Context(), acct, storage.HistoryAll, "1970-01-01T00:00:00Z", 10); err != nil || len(p.Rows) != 0 {
		t.Errorf("cursor at the epoch: %d rows, %v", len(p.Rows), err)
	}
	if _, err := db.ListHistory(t.Context(), acct, "weird", "", 10); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := db.ListHistory(t.Context(), acct, storage.HistoryAll, "not a time", 10); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("bad cursor: %v", err)
	}
	if p, err := db.ListHistory(t.Context(), acct, "", "", 0); err != nil || len(p.Rows) != storage.DefaultHistoryLimit {
		t.Errorf("default limit: %d rows, %v", len(p.Rows), err)
	}
	// Another account sees only its own row.
	if rows := walk(t, db.DB, other, storage.HistoryAll, 5); len(rows) != 1 {
		t.Errorf("other account: %d rows", len(rows))
	}
	// Positions survive a restart: new rows in t0 go on after the others.
	db.reopen(t)
	db.clock.Set(t0)
	db.validate(t, acct, result("again@example.com", "valid"))
	if rows := walk(t, db.DB, acct, storage.HistoryAll, 50); len(rows) != 1041 {
		t.Errorf("after reopen: %d rows", len(rows))
	}
}
