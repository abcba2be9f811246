package pebble

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The cache memo only shortens lookups: a DB with it answers every
// LookupCache as one without it, through fresh results, results kept out
// of the cache, results served from the cache, batch results replacing
// entries, expiry, purges, restarts and a memo too small for everything.
func TestCacheMemoAgreesWithPebble(t *testing.T) {
	for _, memo := range []int{DefaultMemoSize, 2_000} {
		t.Run(fmt.Sprint("memo=", memo), func(t *testing.T) {
			with, without := openTestMemo(t, memo), openTestMemo(t, -1)
			dbs := []*testDB{with, without}
			accts := make([]string, 2)
			for i, db := range dbs {
				accts[i] = db.account(t, 1_000_000)
			}
			rng := rand.New(rand.NewPCG(1, uint64(memo)))
			emails := []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com", "b0@example.com", "b1@example.com"}
			score := 0
			for step := range 600 {
				op := rng.IntN(100)
				email := emails[rng.IntN(len(emails))]
				score = (score + 1) % 101
				advance := time.Duration(rng.IntN(20)) * time.Minute
				for i, db := range dbs {
					acct := accts[i]
					switch {
					case op < 40: // a fresh result
						r := result(email, "valid")
						r.Score, r.Receipt = score, fmt.Appendf(nil, `{"step":%d}`, step)
						db.validate(t, acct, r)
					case op < 50: // an unknown verdict, kept out of the cache
						r := result(email, "unknown")
						r.Score, r.SkipCache = score, true
						db.validate(t, acct, r)
					case op < 60: // served from the cache: does not replace it
						r := result(email, "valid")
						r.Score, r.CachedFrom = score, "0190e6b2-2f5e-7c3a-9d5b-0a1b2c3d4e5f"
						db.validate(t, acct, r)
					case op < 70: // batch results for b0@ and b1@
						db.putBatchRows(t, acct, 2, 2)
					case op < 85:
						db.clock.Advance(advance)
					case op < 90:
						if _, err := db.PurgeCache(t.Context(), time.Hour); err != nil {
							t.Fatal(err)
						}
					case op < 93:
						db.reopen(t)
					}
				}
				for _, e := range emails {
					r1, ok1, err1 := with.LookupCache(t.Context(), accts[0], e, time.Hour)
					r2, ok2, err2 := without.LookupCache(t.Context(), accts[1], e, time.Hour)
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					same := ok1 == ok2 && r1.Email == r2.Email && r1.Status == r2.Status && r1.Score == r2.Score &&
						r1.Kind == r2.Kind && r1.ProbedAt.Equal(r2.ProbedAt) && string(r1.Receipt) == string(r2.Receipt)
					if !same {
						t.Fatalf("step %d, op %d, %s: with the memo %v %+v, without %v %+v", step, op, e, ok1, r1, ok2, r2)
					}
				}
			}
			if memo > 0 && with.memo.bytes > memo {
				t.Errorf("memo holds %d bytes, over its %d", with.memo.bytes, memo)
			}
		})
	}
}

func openTestMemo(t *testing.T, size int) *testDB {
	t.Helper()
	c := newClock()
	dir := t.TempDir()
	opts := testOptions(c)
	opts.MemoSize = size
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	tdb := &testDB{DB: db, dir: dir, clock: c, opts: &opts}
	t.Cleanup(func() {
		if !tdb.closed.Load() {
			tdb.Close()
		}
	})
	return tdb
}
