package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Charges, results and the history. A charge is one transaction that
// locks the account's row, ends the hold (or checks the available
// credits), writes the charge entry, gives the result its history id and
// position, seals the receipt, and inserts the result (which is its
// history row), its cache entry and the idempotent response: all of it
// commits, durably, or none of it does.
//
// History positions are Pebble's (storage/README.md, "History paging
// cursor"): a row's probed_at millisecond times 10⁶ plus its rank among
// the account's rows of that millisecond, the rank being one more than the
// highest position taken in it, read under the account's row lock. Every
// transaction that writes a history row holds that lock, so a position is
// never given out twice, and the cursor walks the same rows on every box.

// posPerMs is how many positions a millisecond has.
const posPerMs = 1_000_000

// positions gives out the history positions of one write of an account;
// the transaction holds the account's row lock. It reads the highest
// position taken in each millisecond of the write's span with one query
// (tops, from the rows of topsSQL: a read of the caller's, often in a
// batch), then gives out the next rank in a row's millisecond; a full
// millisecond (10⁶ rows) spills into the next, whose top it reads then.
// The positions it gave out count though their rows are not written yet.
type positions struct {
	top    map[int64]int64 // millisecond → highest position taken
	lo, hi int64           // the span whose tops were read
	extra  map[int64]bool  // milliseconds read besides
}

// topsSQL reads the highest position of each millisecond of the account
// ($1) in [$2, $3) ($4 = posPerMs): one row per millisecond that has one.
const topsSQL = `SELECT max(pos) FROM results WHERE account = $1 AND pos >= $2 AND pos < $3 GROUP BY div(pos, $4)`

// topsArgs are topsSQL's arguments for the milliseconds lo to hi.
func topsArgs(account string, lo, hi int64) []any {
	return []any{account, lo * posPerMs, (hi + 1) * posPerMs, int64(posPerMs)}
}

// rowQuerier is a pgx.Tx, or a connection in a transaction (pipelined).
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// newPositions starts the positions of a write whose rows are probed in
// the milliseconds lo to hi; the caller adds the rows of topsSQL with
// addTop.
func newPositions(lo, hi int64) *positions {
	return &positions{top: map[int64]int64{}, lo: lo, hi: hi, extra: map[int64]bool{}}
}

// newPositionsAt starts the positions of a write whose rows are probed
// in the milliseconds ms; the caller adds the top of each (afterLock) with
// addTop.
func newPositionsAt(ms []int64) *positions {
	p := newPositions(1, 0)
	for _, m := range ms {
		p.extra[m] = true
	}
	return p
}

// addTop takes in a row of topsSQL.
func (p *positions) addTop(pos int64) { p.top[pos/posPerMs] = max(p.top[pos/posPerMs], pos) }

// next returns the position of a row probed at ms.
func (p *positions) next(ctx context.Context, tx rowQuerier, account string, ms int64) (int64, error) {
	for m := ms; ; m++ {
		if (m < p.lo || m > p.hi) && !p.extra[m] {
			var top *int64
			if err := tx.QueryRow(ctx, `SELECT max(pos) FROM results WHERE account = $1 AND pos >= $2 AND pos < $3`,
				account, m*posPerMs, (m+1)*posPerMs).Scan(&top); err != nil {
				return 0, err
			}
			if top != nil {
				p.addTop(*top)
			}
			p.extra[m] = true
		}
		pos := m * posPerMs
		if t, ok := p.top[m]; ok {
			pos = t + 1
		}
		if pos < (m+1)*posPerMs {
			p.top[m] = pos
			return pos, nil
		}
	}
}

const resultCols = `id, account, pos, history_id, kind, email, status, score, job_id, job_index, latency_ms, probed_at, cached_from, receipt`

func scanResult(row scanner) (storage.Result, int64, error) { return scanResultWith(row) }

// scanResultWith is scanResult of a row whose first columns go to lead.
func scanResultWith(row scanner, lead ...any) (storage.Result, int64, error) {
	var r storage.Result
	var pos, hid int64
	var job *string
	var index *int
	err := row.Scan(append(lead, &r.ID, &r.Account, &pos, &hid, &r.Kind, &r.Email, &r.Status, &r.Score, &job, &index,
		&r.LatencyMs, &r.ProbedAt, &r.CachedFrom, &r.Receipt)...)
	if err != nil {
		return storage.Result{}, 0, err
	}
	r.HistoryID, r.ProbedAt = uint64(hid), r.ProbedAt.UTC()
	if job != nil {
		r.JobID = *job
	}
	if index != nil {
		r.JobIndex = *index
	}
	return r, pos, nil
}

// Charge turns the hold into a charge and stores the result with it (see
// storage.Balances): the charge entry, the hold deleted, the result, its
// history row and cache entry and, with req.Idem, the idempotent response,
// in one transaction. ErrHoldNotActive when the hold was already charged
// or released (by this box, or by another that found its boot stopped).
//
// A part of a credit lease (h.Part) is charged against its block, or,
// when the block is gone, from the available credits (leases.go).
func (db *DB) Charge(ctx context.Context, h storage.Hold, req storage.ChargeRequest) (storage.Charged, error) {
	if h.Part != 0 {
		if db.leases == nil || !db.leases.end(h, false) {
			return storage.Charged{}, holdNotActive(h)
		}
		o := db.chargeOutcome(ctx, h.Account, &h, 0, req)
		if o.blockGone {
			leaseDirect.Inc()
			db.leases.gone(h)
		}
		db.charged(req.Idem, o.err)
		return o.out, o.err
	}
	c, err := db.charge(ctx, h.Account, &h, 0, req)
	db.live.drop(h)
	db.charged(req.Idem, err)
	return c, err
}

// charged ends the request holding idem when its charge completed the
// record (on an error the caller aborts it).
func (db *DB) charged(idem *storage.IdemRef, err error) {
	if idem != nil && err == nil {
		db.idem.end(*idem, true)
	}
}

// ChargeDirect charges n credits without a hold, for a result already
// known (cache: true), or fails with an *InsufficientCreditsError.
func (db *DB) ChargeDirect(ctx context.Context, account string, n int64, req storage.ChargeRequest) (storage.Charged, error) {
	if err := storage.CheckChargeDirect(n); err != nil {
		return storage.Charged{}, err
	}
	c, err := db.charge(ctx, account, nil, n, req)
	db.charged(req.Idem, err)
	return c, err
}

// charge is Charge (h set) and ChargeDirect (h nil: n credits checked
// against the available balance), run in a transaction with the other
// charges of the account that wait at that moment (combine.go). Seal runs
// inside the transaction, with
// the account's row locked: it is quick (a signature) and touches nothing
// else, and a retried transaction calls it again. When it fails the
// charge entry is written and a second entry gives the credits back (as
// on Pebble), and no result is stored.
//
// Durability without the flush under the lock: on PostgreSQL the charge
// commits without waiting for its WAL to reach the disk, which releases
// the account's row at once, and then flush waits until the WAL is on
// disk up to a commit made after it, before Charge returns: the answer is
// never sent before the charge is durable, as on Pebble (which applies a
// charge under the account's lock and syncs after it). One account's
// charges no longer queue behind each other's disk flushes, and
// concurrent flushes share one (PostgreSQL's group commit). A database
// crash before the flush loses the charge with the WAL after it, and no
// client was answered for it. On CockroachDB (no such setting) every
// commit is durable when it returns.
func (db *DB) charge(ctx context.Context, account string, h *storage.Hold, n int64, req storage.ChargeRequest) (storage.Charged, error) {
	o := db.chargeOutcome(ctx, account, h, n, req)
	return o.out, o.err
}

// chargeOutcome is charge with its whole outcome.
func (db *DB) chargeOutcome(ctx context.Context, account string, h *storage.Hold, n int64, req storage.ChargeRequest) chargeOutcome {
	if err := storage.CheckCharge(account, &req); err != nil {
		return chargeOutcome{err: err}
	}
	now := db.now()
	r0 := req.Result
	if err := storage.PrepareResult(&r0, now); err != nil {
		return chargeOutcome{err: err}
	}
	p := &pendingCharge{h: h, n: n, req: req, r0: r0, now: now, done: make(chan chargeOutcome, 1)}
	return db.submit(ctx, account, p)
}

// GetResult returns the result with that id (with its receipt), or
// ErrNotFound.
func (db *DB) GetResult(ctx context.Context, id string) (storage.Result, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	r, _, err := scanResult(db.pool.QueryRow(ctx, `SELECT `+resultCols+` FROM results WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Result{}, notFound("result", id)
	}
	return r, err
}

// LookupCache returns the account's latest fresh result for email
// (compared lower-cased) if it was probed less than maxAge ago.
func (db *DB) LookupCache(ctx context.Context, account, email string, maxAge time.Duration) (storage.Result, bool, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	r, _, err := scanResult(db.pool.QueryRow(ctx, `SELECT `+prefixed("r.", resultCols)+` FROM cache c JOIN results r ON r.id = c.result_id
		WHERE c.account = $1 AND c.email = $2`, account, storage.CacheEmail(email)))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Result{}, false, db.mustExist(ctx, account)
	}
	if err != nil {
		return storage.Result{}, false, err
	}
	if db.now().Sub(r.ProbedAt) >= maxAge {
		return storage.Result{}, false, nil
	}
	return r, true, nil
}

// mustExist returns ErrNotFound for an unknown account.
func (db *DB) mustExist(ctx context.Context, account string) error {
	var exists bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, account).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return notFound("account", account)
	}
	return nil
}

// PurgeCache deletes the cache entries probed maxAge or longer ago.
func (db *DB) PurgeCache(ctx context.Context, maxAge time.Duration) (int, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `DELETE FROM cache WHERE probed_at <= $1`, db.now().Add(-maxAge).Truncate(time.Millisecond))
	return int(tag.RowsAffected()), err
}

// ListHistory returns the account's history rows of kind, newest first,
// strictly older than cursor (storage.HistoryArgs).
func (db *DB) ListHistory(ctx context.Context, account, kind, cursor string, limit int) (storage.HistoryPage, error) {
	kind, before, limit, err := storage.HistoryArgs(kind, cursor, limit)
	if err != nil || before <= 0 {
		return storage.HistoryPage{}, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	q := `SELECT history_id, probed_at, latency_ms, score, status, email, job_id, cached_from, id, kind, pos FROM results
		WHERE account = $1 AND pos < $2 `
	args := []any{account, before, limit + 1}
	if kind != storage.HistoryAll {
		q += `AND kind = $4 `
		args = append(args, kind)
	}
	rows, err := db.pool.Query(ctx, q+`ORDER BY pos DESC LIMIT $3`, args...)
	if err != nil {
		return storage.HistoryPage{}, err
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.HistoryRow, error) {
		var h storage.HistoryRow
		var id int64
		var job *string
		err := row.Scan(&id, &h.ProbedAt, &h.LatencyMs, &h.Score, &h.Status, &h.Email, &job, &h.CachedFrom, &h.ResultID, &h.Kind, &h.Pos)
		h.ID, h.ProbedAt = uint64(id), h.ProbedAt.UTC()
		if job != nil {
			h.JobID = *job
		}
		return h, err
	})
	if err != nil {
		return storage.HistoryPage{}, err
	}
	if len(list) == 0 {
		return storage.HistoryPage{}, db.mustExist(ctx, account)
	}
	page := storage.HistoryPage{Rows: list}
	if len(list) > limit {
		page.Rows = list[:limit]
		page.NextCursor = list[limit-1].Cursor()
	}
	return page, nil
}

// DailyCounts returns the account's rows per UTC day and verdict for the
// last days days, today included, oldest first (a day is the positions
// of its milliseconds, as on Pebble).
func (db *DB) DailyCounts(ctx context.Context, account string, days int) ([]storage.DayCount, error) {
	if err := storage.CheckDays(days); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.mustExist(ctx, account); err != nil {
		return nil, err
	}
	today := db.now().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, 1-days)
	const dayPos = 24 * 3600 * 1000 * posPerMs
	lo := first.UnixMilli() * posPerMs
	rows, err := db.pool.Query(ctx, `SELECT div(pos - $2, $3)::bigint AS day, status, count(*) FROM results
		WHERE account = $1 AND pos >= $2 AND pos < $4 GROUP BY day, status`,
		account, lo, int64(dayPos), lo+int64(days)*dayPos)
	if err != nil {
		return nil, err
	}
	out := make([]storage.DayCount, days)
	for i := range out {
		out[i] = storage.DayCount{Day: first.AddDate(0, 0, i), Counts: map[string]int{}}
	}
	var day, n int64
	var status string
	_, err = pgx.ForEachRow(rows, []any{&day, &status, &n}, func() error {
		if day >= 0 && day < int64(days) {
			out[day].Counts[status] += int(n)
		}
		return nil
	})
	return out, err
}

// prefixed puts p before every column of a column list.
func prefixed(p, cols string) string { return p + strings.ReplaceAll(cols, ", ", ", "+p) }
