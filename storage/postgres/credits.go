package postgres

import (
	"context"
	"errors"
	"math"
	"sync"
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
		if n < r.held {
			// What the boxes' credit leases have not handed out is not
			// held by a validation in flight: the blocks end first.
			if err := db.endBlocks(ctx, tx, account, r); err != nil {
				return storage.Entry{}, err
			}
		}
		if err := storage.CheckSetCreditsHeld(n, r.held); err != nil {
			return storage.Entry{}, err
		}
		return r.entry(ctx, tx, account, db.now(), storage.EntrySet, n, n-r.balance, 0, 0, "", note)
	})
}

// endBlocks releases the account's credit leases (leases.go) in tx, one
// ledger entry each. The boxes that hold them charge their parts in
// flight from the available credits.
func (db *DB) endBlocks(ctx context.Context, tx pgx.Tx, account string, r *acctRow) error {
	rows, err := tx.Query(ctx, `DELETE FROM holds WHERE account = $1 AND ref = $2 RETURNING seq, amount`, account, leaseRef)
	if err != nil {
		return err
	}
	var seqs, amounts []int64
	var seq, amount int64
	if _, err := pgx.ForEachRow(rows, []any{&seq, &amount}, func() error {
		seqs, amounts = append(seqs, seq), append(amounts, amount)
		return nil
	}); err != nil {
		return err
	}
	for i, seq := range seqs {
		if _, err := r.entry(ctx, tx, account, db.now(), storage.EntryRelease, amounts[i], 0, -amounts[i], uint64(seq), leaseRef,
			"credit lease ended: the balance was set below the credits held"); err != nil {
			return err
		}
	}
	return nil
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
// the boot stops, a running box releases it (Reap); while it lives, the
// heartbeat releases those of its holds no caller has (sweepHolds).
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
	// now times the blocks' use on this box; at is the hold's time, by
	// the records' clock.
	now, at := time.Now(), db.now()
	if db.leases != nil {
		if h, ok := db.leases.take(account, n, ref, now); ok {
			h.At = at.Truncate(time.Millisecond)
			return h, nil
		}
	}
	p := &pendingCharge{hold: true, ref: ref, n: n, now: at, done: make(chan chargeOutcome, 1)}
	p.lease = db.leases != nil && db.leases.startTake(account, now)
	db.live.begin(ref)
	if p.lease {
		db.live.begin(leaseRef)
	}
	o := db.submit(ctx, account, p)
	if p.lease {
		// The block's holds row is the lease manager's from here, or
		// the heartbeat's when its answer was lost (sweepHolds).
		var lease *storage.Hold
		if o.err == nil && o.leased {
			lease = &o.held
		}
		db.live.end(leaseRef, o.held, lease != nil)
		h := db.leases.taken(account, lease, n, ref, now)
		if lease != nil {
			db.live.end(ref, storage.Hold{}, false)
			h.At = lease.At
			return h, nil
		}
	}
	db.live.end(ref, o.held, o.err == nil)
	return o.held, o.err
}

// Release ends the hold without a charge; ErrHoldNotActive when it was
// already charged or released. When it fails otherwise (the database
// cannot be reached, the request's deadline), the heartbeat releases the
// hold once the database answers again: its request has ended, so its
// credits must not stay held while this box lives.
//
// A part of a credit lease (h.Part) goes back to its block in memory: no
// ledger entry; the block's return releases what is left of it.
func (db *DB) Release(ctx context.Context, h storage.Hold, note string) (storage.Entry, error) {
	if h.Part != 0 {
		if db.leases == nil || !db.leases.end(h, true) {
			return storage.Entry{}, holdNotActive(h)
		}
		return storage.Entry{}, nil
	}
	e, err := db.release(ctx, h, note)
	db.live.drop(h)
	if err != nil && !errors.Is(err, storage.ErrHoldNotActive) && !errors.Is(err, storage.ErrNotFound) {
		db.log.Warn("cannot release a hold; the heartbeat will", "account", h.Account, "hold", h.Seq, "err", err)
	}
	return e, err
}

// liveHolds knows which of this boot's holds a caller may still end:
// those handed to a caller that has not called Charge or Release with
// them yet, and those a Hold call under way may still hand out (its
// transaction may have committed, its answer not back yet). Any other
// hold of the boot in the database is one no caller will ever end: a
// Hold whose answer was lost (the call failed, or its caller's context
// ended while its transaction still ran, perhaps to a COMMIT), or one
// whose Release failed. sweepHolds releases those.
//
// This needs no timing: a lost hold becomes visible whenever its commit
// does, and the next sweep after that finds it. Before, a failed Hold
// was looked for by its ref for a while (2 × call_timeout), and a
// commit later than that (a combined transaction retried one request at
// a time, a database restarting) left the credit held for as long as
// the box lived (TestFleetDatabaseRestart, 2 of 7 runs under load).
type liveHolds struct {
	mu    sync.Mutex
	calls map[string]int       // refs of Hold calls under way
	held  map[holdKey]struct{} // handed out, not ended yet
}

type holdKey struct {
	account string
	seq     uint64
}

func (l *liveHolds) begin(ref string) {
	l.mu.Lock()
	if l.calls == nil {
		l.calls, l.held = map[string]int{}, map[holdKey]struct{}{}
	}
	l.calls[ref]++
	l.mu.Unlock()
}

// end ends a Hold call of ref, handing h out when ok, in one step: a
// sweep never sees the hold as neither under way nor held.
func (l *liveHolds) end(ref string, h storage.Hold, ok bool) {
	l.mu.Lock()
	if l.calls[ref]--; l.calls[ref] <= 0 {
		delete(l.calls, ref)
	}
	if ok {
		l.held[holdKey{h.Account, h.Seq}] = struct{}{}
	}
	l.mu.Unlock()
}

// drop takes h back: its caller charged or released it (or tried).
func (l *liveHolds) drop(h storage.Hold) {
	l.mu.Lock()
	delete(l.held, holdKey{h.Account, h.Seq})
	l.mu.Unlock()
}

// ended reports that no caller can end h any more.
func (l *liveHolds) ended(h storage.Hold) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, held := l.held[holdKey{h.Account, h.Seq}]
	return !held && l.calls[h.Ref] == 0
}

// sweepHolds releases this boot's holds that no caller has (liveHolds).
// It runs after each heartbeat that reached the database. A hold is read
// before it is checked against the live ones, so one handed out between
// the two is seen as held, and one charged meanwhile is no longer active
// (ErrHoldNotActive, skipped).
func (db *DB) sweepHolds() error {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT account, seq, amount, ref FROM holds WHERE boot = $1`, db.boot)
	if err != nil {
		return err
	}
	hs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Hold, error) {
		var h storage.Hold
		var seq int64
		err := row.Scan(&h.Account, &seq, &h.N, &h.Ref)
		h.Seq = uint64(seq)
		return h, err
	})
	if err != nil {
		return err
	}
	for _, h := range hs {
		if !db.live.ended(h) {
			continue
		}
		_, err := db.release(context.Background(), h, "released: its request ended without it (its answer lost, or its release failed)")
		switch {
		case errors.Is(err, storage.ErrHoldNotActive):
		case err != nil:
			return err
		default:
			staleHoldsReleased.Inc()
			db.log.Info("released a hold its request left", "account", h.Account, "hold", h.Seq, "ref", h.Ref)
		}
	}
	return nil
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
