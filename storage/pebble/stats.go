package pebble

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// statSettle is how long after a day's end its counts are taken as final
// and kept in memory: a batch result is written a few seconds after its
// probe, with the probe's time.
const statSettle = 10 * time.Minute

// dayStats caches the counts of settled days: account → day (Unix ms of
// 00:00 UTC) → counts. Rows of a settled day never change (history is
// append-only by time; positions older than the newest row are only taken
// by the late results statSettle covers).
type dayStats struct {
	mu   sync.Mutex
	days map[string]map[int64]map[string]int
}

// DailyCounts returns the account's rows per UTC day and verdict for the
// last days days, today included, oldest first; days with no row are
// there with empty counts. Settled days are counted once and kept in
// memory, so the cost of a call is a scan of today's rows (and, the first
// time, of the whole range).
func (db *DB) DailyCounts(ctx context.Context, account string, days int) ([]storage.DayCount, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	if err := storage.CheckDays(days); err != nil {
		return nil, err
	}
	if !db.accountExists(account) {
		return nil, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	now := db.now()
	today := now.Truncate(24 * time.Hour)
	out := make([]storage.DayCount, days)
	for i := range out {
		day := today.AddDate(0, 0, i-days+1)
		counts, err := db.dayCounts(account, day, now)
		if err != nil {
			return nil, err
		}
		out[i] = storage.DayCount{Day: day, Counts: counts}
	}
	return out, nil
}

// dayCounts counts one day's rows, from memory when the day is settled and
// was counted before.
func (db *DB) dayCounts(account string, day, now time.Time) (map[string]int, error) {
	key := day.UnixMilli()
	settled := now.Sub(day.Add(24*time.Hour)) >= statSettle
	st := &db.stats
	if settled {
		st.mu.Lock()
		c, ok := st.days[account][key]
		st.mu.Unlock()
		if ok {
			return maps.Clone(c), nil
		}
	}
	counts := make(map[string]int)
	lo := key * storage.PosPerMs
	hi := day.Add(24*time.Hour).UnixMilli()*storage.PosPerMs - 1
	for _, kind := range []byte{histKindSingle, histKindBatch} {
		it, err := db.iter(&pebble.IterOptions{
			LowerBound: histKey(account, kind, hi),
			UpperBound: prefixEnd(histKey(account, kind, lo)),
		})
		if err != nil {
			return nil, err
		}
		for it.First(); it.Valid(); it.Next() {
			r, err := decodeRow("", 0, it.Value())
			if err != nil {
				it.Close()
				return nil, err
			}
			counts[r.Status]++
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return nil, err
		}
	}
	if settled {
		st.mu.Lock()
		if st.days == nil {
			st.days = make(map[string]map[int64]map[string]int)
		}
		if st.days[account] == nil {
			st.days[account] = make(map[int64]map[string]int)
		}
		st.days[account][key] = counts
		st.mu.Unlock()
		return maps.Clone(counts), nil
	}
	return counts, nil
}
