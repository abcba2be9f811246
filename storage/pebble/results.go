package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// Result value tags: a result stored in full, or (under res/ for a batch
// result) a pointer to its jobres/ key.
const (
	resultTagValue   = 'v'
	resultTagPointer = 'p'
)

func encodeResult(r *storage.Result, pos int64) []byte {
	e := newEnc(96 + len(r.ID) + len(r.Account) + len(r.Email) + len(r.JobID) + len(r.CachedFrom) + len(r.Receipt))
	e.byte1(resultTagValue).str(r.ID).str(r.Account).str(r.Email).str(r.Status).uvarint(uint64(r.Score)).
		str(r.Kind).str(r.JobID).uvarint(uint64(r.JobIndex)).varint(r.LatencyMs).varint(toMs(r.ProbedAt)).
		str(r.CachedFrom).uvarint(r.HistoryID).varint(pos).bytes(r.Receipt)
	return e.b
}

func encodeResultPointer(job string, index int) []byte {
	return newEnc(8 + len(job)).byte1(resultTagPointer).str(job).uvarint(uint64(index)).b
}

// decodeResult decodes a full result; for a pointer it returns the job and
// index it points at.
func decodeResult(v []byte) (r storage.Result, job string, index int, err error) {
	r, _, job, index, err = decodeResultPos(v)
	return r, job, index, err
}

// decodeResultPos is decodeResult with the result's history position.
func decodeResultPos(v []byte) (r storage.Result, pos int64, job string, index int, err error) {
	d := newDec(v, "result")
	switch d.byte1() {
	case resultTagPointer:
		job = d.str()
		index = int(d.uvarint())
		return storage.Result{}, 0, job, index, d.err
	case resultTagValue:
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: result tag", errCorrupt)
		}
		return storage.Result{}, 0, "", 0, d.err
	}
	r.ID = d.str()
	r.Account = d.str()
	r.Email = d.str()
	r.Status = d.str()
	r.Score = int(d.uvarint())
	r.Kind = d.str()
	r.JobID = d.str()
	r.JobIndex = int(d.uvarint())
	r.LatencyMs = d.varint()
	r.ProbedAt = fromMs(d.varint())
	r.CachedFrom = d.str()
	r.HistoryID = d.uvarint()
	pos = d.varint()
	r.Receipt = d.bytes()
	return r, pos, "", 0, d.err
}

func encodeRow(r *storage.Result) []byte {
	e := newEnc(64 + len(r.Email) + len(r.JobID) + len(r.CachedFrom) + len(r.ID))
	e.uvarint(r.HistoryID).varint(toMs(r.ProbedAt)).varint(r.LatencyMs).uvarint(uint64(r.Score)).
		str(r.Status).str(r.Email).str(r.JobID).str(r.CachedFrom).str(r.ID)
	return e.b
}

func decodeRow(kind string, pos int64, v []byte) (storage.HistoryRow, error) {
	d := newDec(v, "history row")
	r := storage.HistoryRow{Kind: kind, Pos: pos}
	r.ID = d.uvarint()
	r.ProbedAt = fromMs(d.varint())
	r.LatencyMs = d.varint()
	r.Score = int(d.uvarint())
	r.Status = d.str()
	r.Email = d.str()
	r.JobID = d.str()
	r.CachedFrom = d.str()
	r.ResultID = d.str()
	return r, d.err
}

// cache entries: the result id and its probed_at.
func encodeCacheEntry(id string, probedMs int64) []byte {
	return newEnc(12 + len(id)).str(id).varint(probedMs).b
}

func decodeCacheEntry(v []byte) (id string, probedMs int64, err error) {
	d := newDec(v, "cache entry")
	id = d.str()
	probedMs = d.varint()
	return id, probedMs, d.err
}

// prepareResult checks r and fills in its ID and ProbedAt.
func (db *DB) prepareResult(r *storage.Result, now time.Time) error {
	return storage.PrepareResult(r, now)
}

// stageResult adds a prepared result's keys to b: the result (under res/,
// or under jobres/ with a pointer under res/ for a batch result), its
// history row and, for a fresh probe, its cache entry. The caller holds the
// account's lock (pa.st).
func (db *DB) stageResult(b *pebble.Batch, pa *posAlloc, r *storage.Result) error {
	pos, err := db.allocResult(pa, r)
	if err != nil {
		return err
	}
	key, re := db.verdicts.index(r)
	db.stageResultAt(b, r, pos, key)
	stageVerdictRef(b, r, re)
	return nil
}

// allocResult gives a prepared result its history id (r.HistoryID) and
// returns its history position. The caller holds the account's lock.
func (db *DB) allocResult(pa *posAlloc, r *storage.Result) (pos int64, err error) {
	id, err := db.histIDs.alloc(db, 1)
	if err != nil {
		return 0, err
	}
	r.HistoryID = id
	return pa.next(r.ProbedAt.UnixMilli())
}

// stageResultAt adds the keys of a result given its id and position by
// allocResult to b (see stageResult); its verdict index key only with
// verdict (lastVerdicts.index).
func (db *DB) stageResultAt(b *pebble.Batch, r *storage.Result, pos int64, verdict bool) {
	kind := byte(histKindSingle)
	if r.Kind == storage.KindBatch {
		kind = histKindBatch
		b.Set(jobResultKey(r.JobID, uint32(r.JobIndex)), encodeResult(r, pos), nil)
		b.Set(resultKey(r.ID), encodeResultPointer(r.JobID, r.JobIndex), nil)
	} else {
		b.Set(resultKey(r.ID), encodeResult(r, pos), nil)
	}
	b.Set(histKey(r.Account, kind, pos), encodeRow(r), nil)
	if verdict {
		stageVerdict(b, r)
	}
	if r.CachedFrom == "" && !r.SkipCache {
		b.Set(cacheKey(r.Account, r.Email), encodeCacheEntry(r.ID, r.ProbedAt.UnixMilli()), nil)
	}
}

// GetResult returns the result with that id (with its receipt), or
// ErrNotFound. The caller checks Account before showing it to anyone.
func (db *DB) GetResult(ctx context.Context, id string) (storage.Result, error) {
	if err := db.check(); err != nil {
		return storage.Result{}, err
	}
	v, err := db.get(resultKey(id))
	if err != nil {
		return storage.Result{}, fmt.Errorf("result %q: %w", id, err)
	}
	r, job, index, err := decodeResult(v)
	if err != nil || job == "" {
		return r, err
	}
	v, err = db.get(jobResultKey(job, uint32(index)))
	if err != nil {
		return storage.Result{}, fmt.Errorf("result %q in job %s: %w", id, job, err)
	}
	r, _, _, err = decodeResult(v)
	return r, err
}

// LookupCache returns the account's latest fresh result for email (compared
// lower-cased) if it was probed less than maxAge ago, for a validation
// with cache: true; ok is false when there is none. Recent entries come
// from memory (cacheMemo): the caller must not modify the result's
// Receipt.
func (db *DB) LookupCache(ctx context.Context, account, email string, maxAge time.Duration) (r storage.Result, ok bool, err error) {
	if err := db.check(); err != nil {
		return storage.Result{}, false, err
	}
	if !db.accountExists(account) {
		return storage.Result{}, false, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	key := cacheKey(account, email)
	fresh := func(r storage.Result) bool { return db.now().Sub(r.ProbedAt) < maxAge }
	r, ok, gen := db.memo.get(key)
	if ok {
		if !fresh(r) {
			cacheMisses.Inc()
			return storage.Result{}, false, nil
		}
		memoHits.Inc()
		cacheHits.Inc()
		return r, true, nil
	}
	v, err := db.get(key)
	if errors.Is(err, storage.ErrNotFound) {
		cacheMisses.Inc()
		return storage.Result{}, false, nil
	}
	if err != nil {
		return storage.Result{}, false, err
	}
	id, probedMs, err := decodeCacheEntry(v)
	if err != nil {
		return storage.Result{}, false, err
	}
	if db.now().Sub(fromMs(probedMs)) >= maxAge {
		cacheMisses.Inc()
		return storage.Result{}, false, nil
	}
	r, err = db.GetResult(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		cacheMisses.Inc()
		return storage.Result{}, false, nil
	}
	if err != nil {
		return storage.Result{}, false, err
	}
	db.memo.add(key, r, gen)
	cacheHits.Inc()
	return r, true, nil
}

// PurgeCache deletes the cache entries probed maxAge or longer ago; they
// can no longer be served. It scans every entry: run it rarely.
func (db *DB) PurgeCache(ctx context.Context, maxAge time.Duration) (int, error) {
	if err := db.check(); err != nil {
		return 0, err
	}
	cutoff := db.now().Add(-maxAge).UnixMilli()
	n := 0
	b := db.pdb.NewBatch()
	err := db.scanPrefix([]byte(prefixCache), func(k, v []byte) (bool, error) {
		_, probedMs, err := decodeCacheEntry(v)
		if err != nil || probedMs <= cutoff {
			b.Delete(k, nil)
			db.memo.forget([][]byte{bytes.Clone(k)})
			n++
		}
		if b.Len() > 1<<20 {
			if err := db.commit(b, pebble.NoSync); err != nil {
				return false, err
			}
			b = db.pdb.NewBatch()
		}
		return true, nil
	})
	if err != nil {
		b.Close()
		return 0, err
	}
	return n, db.commit(b, pebble.NoSync)
}

// posAlloc gives out history positions for one write of one account; the
// caller holds the account's lock until the batch is applied.
type posAlloc struct {
	db      *DB
	st      *acctState
	account string
	mine    []int64 // given out by this write, not yet in Pebble
	last    int64   // highest of mine and st.lastPos
}

// next returns a free position for a row probed at probedMs.
func (pa *posAlloc) next(probedMs int64) (int64, error) {
	st := pa.st
	if !st.histLoaded {
		last, err := pa.highest(0, math.MaxInt64)
		if err != nil {
			return 0, err
		}
		st.lastPos, st.histLoaded = last, true
		st.recent, st.recentFrom = map[int64]int64{}, 0
		if last >= 0 {
			st.recentFrom = last/storage.PosPerMs + 1
		}
	}
	if len(pa.mine) == 0 {
		pa.last = st.lastPos
	}
	base := probedMs * storage.PosPerMs
	var pos int64
	switch {
	case base > pa.last:
		// The common case: the newest row of the account.
		pos = base
	case pa.last < base+storage.PosPerMs-1:
		// Same millisecond as the newest row: the next rank.
		pos = pa.last + 1
	case probedMs >= st.recentFrom && st.recent[probedMs] < base+storage.PosPerMs-1:
		// An older millisecond this process has given out every
		// position of (a probe that started before others that ended
		// first): the next rank, from memory.
		pos = base
		if h, ok := st.recent[probedMs]; ok {
			pos = h + 1
		}
	default:
		// An older millisecond (a clock step back, a late batch
		// result): the next rank within it, from what is stored, once
		// every position given out before is stored (drain). A full
		// millisecond (10⁶ rows) spills into the next one.
		st.drain()
		for lo := base; ; lo += storage.PosPerMs {
			m, err := pa.highest(lo, lo+storage.PosPerMs-1)
			if err != nil {
				return 0, err
			}
			if m < 0 {
				pos = lo
				break
			}
			if m < lo+storage.PosPerMs-1 {
				pos = m + 1
				break
			}
		}
	}
	pa.mine = append(pa.mine, pos)
	pa.last = max(pa.last, pos)
	pa.record(pos)
	return pos, nil
}

// recentSpan is how many milliseconds acctState.recent keeps: a probe that
// ends more than about this long after newer rows were written (past any
// real-time budget) takes the slower path, which reads Pebble.
const recentSpan = 1 << 16

// record notes pos in the account's recent positions; when they span more
// than recentSpan milliseconds, those older than half of it are dropped
// and recentFrom moves past them.
func (pa *posAlloc) record(pos int64) {
	st := pa.st
	ms := pos / storage.PosPerMs
	if ms < st.recentFrom {
		return
	}
	if h, ok := st.recent[ms]; !ok || pos > h {
		st.recent[ms] = pos
	}
	st.recentMax = max(st.recentMax, ms)
	if len(st.recent) < recentSpan {
		return
	}
	cut := st.recentMax - recentSpan/2
	for k := range st.recent {
		if k < cut {
			delete(st.recent, k)
		}
	}
	st.recentFrom = max(st.recentFrom, cut)
}

// apply records the positions given out once the batch is applied.
func (pa *posAlloc) apply() {
	if len(pa.mine) > 0 {
		pa.st.lastPos = max(pa.st.lastPos, pa.last)
	}
}

// highest returns the highest position in [lo, hi] used by the account's
// rows of either kind or given out by this write, −1 if none.
func (pa *posAlloc) highest(lo, hi int64) (int64, error) {
	best := int64(-1)
	for _, p := range pa.mine {
		if p >= lo && p <= hi {
			best = max(best, p)
		}
	}
	for _, kind := range []byte{histKindSingle, histKindBatch} {
		it, err := pa.db.iter(&pebble.IterOptions{
			LowerBound: histKey(pa.account, kind, hi),
			UpperBound: prefixEnd(histKey(pa.account, kind, lo)),
		})
		if err != nil {
			return 0, err
		}
		if it.First() {
			best = max(best, histPos(it.Key()))
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return 0, err
		}
	}
	return best, nil
}

// ListHistory returns the account's history rows of kind (HistoryAll,
// HistorySingle, HistoryBatch; "" is all), newest first, strictly older
// than cursor (empty: from the newest), at most limit of them (0: 50).
func (db *DB) ListHistory(ctx context.Context, account, kind, cursor string, limit int) (storage.HistoryPage, error) {
	if err := db.check(); err != nil {
		return storage.HistoryPage{}, err
	}
	kind, before, limit, err := storage.HistoryArgs(kind, cursor, limit)
	if err != nil || before <= 0 {
		return storage.HistoryPage{}, err
	}
	kinds := []byte{histKindSingle, histKindBatch}
	switch kind {
	case storage.HistorySingle:
		kinds = []byte{histKindSingle}
	case storage.HistoryBatch:
		kinds = []byte{histKindBatch}
	}
	if !db.accountExists(account) {
		return storage.HistoryPage{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}

	// One iterator per kind, merged by position.
	its := make([]*readIter, 0, 2)
	defer func() {
		for _, it := range its {
			it.Close()
		}
	}()
	for _, k := range kinds {
		p := histPrefix(account, k)
		lower := p
		if before != math.MaxInt64 {
			lower = histKey(account, k, before-1)
		}
		it, err := db.iter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
		if err != nil {
			return storage.HistoryPage{}, err
		}
		its = append(its, it)
		it.First()
	}
	rows := make([]storage.HistoryRow, 0, min(limit+1, 256))
	for len(rows) <= limit {
		best := -1
		for i, it := range its {
			if !it.Valid() {
				continue
			}
			if best < 0 || bytes.Compare(it.Key()[len(it.Key())-8:], its[best].Key()[len(its[best].Key())-8:]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		it := its[best]
		v, err := it.ValueAndErr()
		if err != nil {
			return storage.HistoryPage{}, err
		}
		k := storage.KindSingle
		if kinds[best] == histKindBatch {
			k = storage.KindBatch
		}
		row, err := decodeRow(k, histPos(it.Key()), v)
		if err != nil {
			return storage.HistoryPage{}, err
		}
		rows = append(rows, row)
		it.Next()
	}
	for _, it := range its {
		if err := it.Error(); err != nil {
			return storage.HistoryPage{}, err
		}
	}
	page := storage.HistoryPage{Rows: rows}
	if len(rows) > limit {
		page.Rows = rows[:limit]
		page.NextCursor = rows[limit-1].Cursor()
	}
	return page, nil
}
