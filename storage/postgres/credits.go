package postgres

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// The credits: the account's row carries balance, held and next_seq;
// every change is one transaction that locks that row first (so an
// account's changes are ordered, whatever box makes them), writes its
// ledger entry and updates the row. No overdraft: the availability check
// reads the locked row, and the table's CHECK refuses balance − held < 0
// whatever a bug would write. Charge and ChargeDirect come with the
// results tables.

// acctRow is the locked row of an account.
type acctRow struct {
	balance, held int64
	seq           uint64 // the next ledger entry's
}

// lockAccount locks the account's row in tx and reads it, or ErrNotFound.
func lockAccount(ctx context.Context, tx pgx.Tx, account string) (acctRow, error) {
	var r acctRow
	var seq int64
	err := tx.QueryRow(ctx, `SELECT balance, held, next_seq FROM accounts WHERE id = $1 FOR UPDATE`, account).Scan(&r.balance, &r.held, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return acctRow{}, notFound("account", account)
	}
	r.seq = uint64(seq)
	return r, err
}

// insertEntry is the statement that writes a ledger entry (args from
// next).
const insertEntry = `INSERT INTO ledger (account, seq, at, kind, amount, delta, balance, held, hold_seq, ref, note)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// next makes the ledger entry after r, moves r past it and returns the
// entry with insertEntry's arguments; the caller writes it and then saves
// r with saveAccount.
func (r *acctRow) next(account string, now time.Time, kind storage.EntryKind,
	amount, delta, heldDelta int64, holdSeq uint64, ref, note string) (storage.Entry, []any) {
	e := storage.Entry{
		Account: account, Seq: r.seq, Time: now.Truncate(time.Millisecond), Kind: kind,
		Amount: amount, Delta: delta, Balance: r.balance + delta, Held: r.held + heldDelta,
		HoldSeq: holdSeq, Ref: ref, Note: note,
	}
	var hs *int64
	if holdSeq != 0 {
		v := int64(holdSeq)
		hs = &v
	}
	r.balance, r.held, r.seq = e.Balance, e.Held, r.seq+1
	return e, []any{account, int64(e.Seq), e.Time, kind.String(), amount, delta, e.Balance, e.Held, hs, ref, note}
}

// entry writes the ledger entry after r (see next).
func (r *acctRow) entry(ctx context.Context, tx pgx.Tx, account string, now time.Time, kind storage.EntryKind,
	amount, delta, heldDelta int64, holdSeq uint64, ref, note string) (storage.Entry, error) {
	e, args := r.next(account, now, kind, amount, delta, heldDelta, holdSeq, ref, note)
	if _, err := tx.Exec(ctx, insertEntry, args...); err != nil {
		return storage.Entry{}, err
	}
	return e, nil
}

// saveAccountSQL is the statement saveAccount runs.
const saveAccountSQL = `UPDATE accounts SET balance = $2, held = $3, next_seq = $4 WHERE id = $1`

func saveAccount(ctx context.Context, tx pgx.Tx, account string, r acctRow) error {
	_, err := tx.Exec(ctx, saveAccountSQL, account, r.balance, r.held, int64(r.seq))
	return err
}

// Credits returns the account's balance and held credits.
func (db *DB) Credits(ctx context.Context, account string) (storage.Credits, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var c storage.Credits
	err := db.pool.QueryRow(ctx, `SELECT balance, held FROM accounts WHERE id = $1`, account).Scan(&c.Balance, &c.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Credits{}, notFound("account", account)
	}
	return c, err
}

// AddCredits adds n > 0 credits to the account.
func (db *DB) AddCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error) {
	if err := storage.CheckAddCredits(n); err != nil {
		return storage.Entry{}, err
	}
	return db.adjust(ctx, account, func(ctx context.Context, tx pgx.Tx, r *acctRow) (storage.Entry, error) {
		return r.entry(ctx, tx, account, db.now(), storage.EntryAdd, n, n, 0, 0, "", note)
	})
}

// SetCredits sets the account's balance to n, never below the credits
// held by validations in flight.
func (db *DB) SetCredits(ctx context.Context, account string, n int64, note string) (storage.Entry, error) {
	if err := storage.CheckSetCredits(n); err != nil {
		return storage.Entry{}, err
	}
	return db.adjust(ctx, account, func(ctx context.Context, tx pgx.Tx, r *acctRow) (storage.Entry, error) {
		if err := storage.CheckSetCreditsHeld(n, r.held); err != nil {
			return storage.Entry{}, err
		}
		return r.entry(ctx, tx, account, db.now(), storage.EntrySet, n, n-r.balance, 0, 0, "", note)
	})
}

// adjust runs one change of the account's credits in a transaction that
// locks its row.
func (db *DB) adjust(ctx context.Context, account string, change func(context.Context, pgx.Tx, *acctRow) (storage.Entry, error)) (storage.Entry, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var e storage.Entry
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		r, err := lockAccount(ctx, tx, account)
		if err != nil {
			return err
		}
		if e, err = change(ctx, tx, &r); err != nil {
			return err
		}
		return saveAccount(ctx, tx, account, r)
	})
	if err != nil {
		return storage.Entry{}, err
	}
	return e, nil
}

// Hold takes n credits of the account for a validation about to run, or
// fails with an *InsufficientCreditsError when fewer are available
// (balance − held). The hold is recorded with this process's boot: when
// the boot stops, a running box releases it (Reap).
//
// On PostgreSQL the hold's commit does not wait for its WAL to reach the
// disk (synchronous_commit off for this transaction), as Pebble does not
// sync a hold: a hold lost in a database crash was never charged, and the
// charge or release that ends it is synced, which flushes the WAL before
// it, the hold's record included. This halves the flushes a validation
// waits for, under the account's row lock. A hold goes in the transaction
// of the account's charges and holds waiting on this box (combine.go).
func (db *DB) Hold(ctx context.Context, account string, n int64, ref string) (storage.Hold, error) {
	if err := storage.CheckHold(n); err != nil {
		return storage.Hold{}, err
	}
	p := &pendingCharge{hold: true, ref: ref, n: n, now: db.now(), done: make(chan chargeOutcome, 1)}
	o := db.submit(ctx, account, p)
	if o.err != nil && ref != "" && !errors.Is(o.err, storage.ErrInsufficientCredits) && !errors.Is(o.err, storage.ErrInvalid) &&
		!errors.Is(o.err, storage.ErrNotFound) {
		// Its COMMIT may have run with its answer lost: the caller
		// answers 500 and never ends the hold, so the heartbeat looks it
		// up by its ref and releases it (TestFleetLostHoldReleased).
		db.orphanMu.Lock()
		db.orphans = append(db.orphans, orphan{h: storage.Hold{Account: account, Ref: ref},
			note: "released: its request failed (the hold's answer was lost)",
			// Its COMMIT may become visible after the first look (the
			// call gave up while the server was still at it): it is
			// looked for until no transaction of the call can still end.
			until: time.Now().Add(2*db.callTimeout + time.Second)})
		db.orphanMu.Unlock()
	}
	return o.held, o.err
}

// Release ends the hold without a charge; ErrHoldNotActive when it was
// already charged or released. When the database cannot be reached the
// hold is remembered and released again by the heartbeat loop until that
// works: its request has ended, so its credits must not stay held while
// this box lives.
func (db *DB) Release(ctx context.Context, h storage.Hold, note string) (storage.Entry, error) {
	e, err := db.release(ctx, h, note)
	if err != nil && !errors.Is(err, storage.ErrHoldNotActive) && !errors.Is(err, storage.ErrNotFound) {
		db.log.Warn("cannot release a hold; will retry", "account", h.Account, "hold", h.Seq, "err", err)
		db.orphanMu.Lock()
		db.orphans = append(db.orphans, orphan{h: h, note: note})
		db.orphanMu.Unlock()
	}
	return e, err
}

// orphan is a hold whose Release failed, or (h.Seq 0: ledger sequences
// start at 1) one whose Hold failed, perhaps after its commit, known by
// its ref, a request id.
type orphan struct {
	h    storage.Hold
	note string
	// until, for one known by its ref, is how long it is looked for
	// (monotonic): a COMMIT whose answer was lost may become visible
	// after the first look.
	until time.Time
}

// release releases the orphan's hold; one known by its ref is looked up
// first (this boot's holds of that ref: none when its Hold never
// committed).
func (o orphan) release(db *DB) (done bool, err error) {
	hs := []storage.Hold{o.h}
	if o.h.Seq == 0 {
		ctx, cancel := db.ctx(context.Background())
		defer cancel()
		rows, err := db.pool.Query(ctx, `SELECT seq, amount FROM holds WHERE account = $1 AND ref = $2 AND boot = $3`, o.h.Account, o.h.Ref, db.boot)
		if err != nil {
			return false, err
		}
		hs = hs[:0]
		var seq, amount int64
		if _, err := pgx.ForEachRow(rows, []any{&seq, &amount}, func() error {
			hs = append(hs, storage.Hold{Account: o.h.Account, Seq: uint64(seq), N: amount, Ref: o.h.Ref})
			return nil
		}); err != nil {
			return false, err
		}
		if len(hs) == 0 {
			// Not committed, or not visible yet: looked for again
			// until its window ends.
			return time.Now().After(o.until), nil
		}
	}
	for _, h := range hs {
		_, err := db.release(context.Background(), h, o.note)
		if err != nil && !errors.Is(err, storage.ErrHoldNotActive) && !errors.Is(err, storage.ErrNotFound) {
			return false, err
		}
		if err == nil && o.h.Seq == 0 {
			staleHoldsReleased.Inc()
		}
	}
	return true, nil
}

// releaseOrphans releases the orphans (holds whose Release, or whose
// Hold, failed), stopping at the first failure and keeping the rest.
func (db *DB) releaseOrphans() {
	db.orphanMu.Lock()
	todo := db.orphans
	db.orphans = nil
	db.orphanMu.Unlock()
	var again []orphan
	defer func() {
		if len(again) > 0 {
			db.orphanMu.Lock()
			db.orphans = append(db.orphans, again...)
			db.orphanMu.Unlock()
		}
	}()
	for i, o := range todo {
		done, err := o.release(db)
		if err != nil {
			db.log.Warn("cannot release a hold yet; will retry", "account", o.h.Account, "hold", o.h.Seq, "ref", o.h.Ref, "err", err)
			again = append(again, todo[i:]...)
			return
		}
		if !done {
			again = append(again, o)
		}
	}
}

func (db *DB) release(ctx context.Context, h storage.Hold, note string) (storage.Entry, error) {
	return db.adjust(ctx, h.Account, func(ctx context.Context, tx pgx.Tx, r *acctRow) (storage.Entry, error) {
		var n int64
		err := tx.QueryRow(ctx, `DELETE FROM holds WHERE account = $1 AND seq = $2 RETURNING amount`, h.Account, int64(h.Seq)).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.Entry{}, holdNotActive(h)
		}
		if err != nil {
			return storage.Entry{}, err
		}
		return r.entry(ctx, tx, h.Account, db.now(), storage.EntryRelease, n, 0, -n, h.Seq, h.Ref, note)
	})
}

// Holds returns the account's active holds, oldest first.
func (db *DB) Holds(ctx context.Context, account string) ([]storage.Hold, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT seq, amount, ref, at FROM holds WHERE account = $1 ORDER BY seq`, account)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Hold, error) {
		h := storage.Hold{Account: account}
		var seq int64
		err := row.Scan(&seq, &h.N, &h.Ref, &h.At)
		h.Seq, h.At = uint64(seq), h.At.UTC()
		return h, err
	})
}

// Ledger returns up to limit entries of the account with Seq > after, in
// order (limit ≤ 0: all of them).
func (db *DB) Ledger(ctx context.Context, account string, after uint64, limit int) ([]storage.Entry, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var exists bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, account).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, notFound("account", account)
	}
	lim := int64(limit)
	if limit <= 0 {
		lim = math.MaxInt64
	}
	rows, err := db.pool.Query(ctx, `SELECT seq, at, kind, amount, delta, balance, held, hold_seq, ref, note FROM ledger
		WHERE account = $1 AND seq > $2 ORDER BY seq LIMIT $3`, account, int64(after), lim)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Entry, error) {
		e := storage.Entry{Account: account}
		var seq int64
		var kind string
		var hs *int64
		if err := row.Scan(&seq, &e.Time, &kind, &e.Amount, &e.Delta, &e.Balance, &e.Held, &hs, &e.Ref, &e.Note); err != nil {
			return e, err
		}
		e.Seq, e.Time = uint64(seq), e.Time.UTC()
		if hs != nil {
			e.HoldSeq = uint64(*hs)
		}
		k, ok := entryKinds[kind]
		if !ok {
			return e, errors.New("postgres: ledger entry of unknown kind " + kind)
		}
		e.Kind = k
		return e, nil
	})
}

// entryKinds reads the ledger's kind column.
var entryKinds = func() map[string]storage.EntryKind {
	m := map[string]storage.EntryKind{}
	for k := storage.EntryAdd; k <= storage.EntryRefund; k++ {
		m[k.String()] = k
	}
	return m
}()
