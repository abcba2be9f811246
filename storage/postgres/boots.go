package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Boots: every DB (one run of one verifyd) registers a boot row at Open
// and keeps its seen_at fresh with a heartbeat every Lease/3, on the
// database's clock. A boot not seen for Lease has stopped (killed, hung,
// cut off from the database): whichever box reaps first releases its
// holds (its validations never answered, so nothing was charged), and its
// pending idempotency keys may be taken over. On one box Pebble does the
// same at Open for the process before it; in a fleet the other boxes do
// it within Lease + Lease/3, without waiting for the dead box to return.
//
// A box that loses its row (the database was unreachable for longer than
// the lease, and another box reaped it) registers again: what it held
// meanwhile was released, so a charge of such a hold fails with
// ErrHoldNotActive and its validation answers 500, uncharged.

// newBootID is 16 random hex digits.
func newBootID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// registerBoot inserts (or renews) the boot's row.
func (db *DB) registerBoot(ctx context.Context) error {
	start := time.Now()
	_, err := db.pool.Exec(ctx, `INSERT INTO boots (id, box, started_at, seen_at) VALUES ($1, $2, now(), now())
		ON CONFLICT (id) DO UPDATE SET seen_at = now()`, db.boot, db.box)
	if err == nil {
		db.seen.Store(start.UnixNano())
	}
	return err
}

// lastSeen is when the last heartbeat that reached the database was sent
// (its seen_at is later).
func (db *DB) lastSeen() time.Time { return time.Unix(0, db.seen.Load()) }

// heartbeat keeps the boot's row fresh, every lease/3, until Close. It
// does nothing else: on a slow link the reaping and the purges take
// seconds (a reap waits for account rows other boxes lock), and a
// heartbeat queued behind them would let this box's lease run out while
// it lives, and the others take its holds and slices (TestFleetSlowLink).
// The work that follows a heartbeat runs on maintain.
func (db *DB) heartbeat() {
	defer db.wg.Done()
	beat := time.NewTicker(db.lease / 3)
	defer beat.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-beat.C:
			ctx, cancel := context.WithTimeout(context.Background(), db.lease/3)
			start := time.Now()
			// The same round trip reads the database's clock (clock.go).
			var dbNow time.Time
			err := db.pool.QueryRow(ctx, `UPDATE boots SET seen_at = now() WHERE id = $1 RETURNING clock_timestamp()`, db.boot).Scan(&dbNow)
			if err == nil {
				db.seen.Store(start.UnixNano())
				db.tookClock(dbNow, start, time.Now())
			}
			if errors.Is(err, pgx.ErrNoRows) {
				db.log.Error("this box's boot was reaped by another box (the database was out of reach for longer than the lease): registering again", "boot", db.boot)
				err = db.registerBoot(ctx)
			}
			cancel()
			if err != nil {
				heartbeatFailures.Inc()
				db.log.Warn("heartbeat to the database failed", "boot", db.boot, "err", err)
				continue
			}
			select {
			case db.beaten <- struct{}{}:
			default: // maintain is busy: it runs again after
			}
		}
	}
}

// maintain does what follows a heartbeat that reached the database —
// releasing the holds no request will end and ending the idempotency
// keys whose own end failed — and, every lease, reaps stopped boots and purges expired
// domain facts and idempotency records, until Close.
func (db *DB) maintain() {
	defer db.wg.Done()
	reap := time.NewTicker(db.lease)
	defer reap.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-db.beaten:
			if err := db.sweepHolds(); err != nil {
				db.log.Warn("cannot release the holds requests left yet; will retry", "err", err)
			}
			db.endStrays()
		case <-reap.C:
			if _, err := db.Reap(); err != nil {
				db.log.Warn("cannot reap stopped boxes", "err", err)
			}
			if err := db.purgeFacts(); err != nil {
				db.log.Warn("cannot purge expired domain facts", "err", err)
			}
			// Expired idempotency records (Pebble's own loop does this on
			// one box); every box may, they delete the same rows.
			if _, err := db.PurgeIdem(context.Background()); err != nil {
				db.log.Warn("cannot purge expired idempotency records", "err", err)
			}
		}
	}
}

// deadBoot is the SQL condition, on a row's boot column b, that its boot
// has stopped (no row, or not seen for the lease $lease).
const deadBoot = `NOT EXISTS (SELECT 1 FROM boots WHERE boots.id = %s AND boots.seen_at >= now() - $1::interval)`

// Reap releases the holds of every stopped boot and deletes the rows of
// boots stopped for the lease; it returns the holds released. Every box
// runs it every Lease; it is safe to run on several at once (a hold is
// released by the transaction that deletes it).
func (db *DB) Reap() (int, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT account FROM holds WHERE `+fmt.Sprintf(deadBoot, "holds.boot"), db.lease)
	if err != nil {
		return 0, err
	}
	accounts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, account := range accounts {
		released := 0
		_, err := db.adjust(context.Background(), account, func(ctx context.Context, tx pgx.Tx, r *acctRow) (storage.Entry, error) {
			released = 0
			rows, err := tx.Query(ctx, `DELETE FROM holds WHERE account = $2 AND `+fmt.Sprintf(deadBoot, "holds.boot")+`
				RETURNING seq, amount, ref, boot`, db.lease, account)
			if err != nil {
				return storage.Entry{}, err
			}
			type gone struct {
				seq, n    int64
				ref, boot string
			}
			hs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (gone, error) {
				var g gone
				err := row.Scan(&g.seq, &g.n, &g.ref, &g.boot)
				return g, err
			})
			if err != nil {
				return storage.Entry{}, err
			}
			var e storage.Entry
			for _, h := range hs {
				e, err = r.entry(ctx, tx, account, db.now(), storage.EntryRelease, h.n, 0, -h.n, uint64(h.seq), h.ref,
					"released: its verifyd stopped (boot "+h.boot+")")
				if err != nil {
					return storage.Entry{}, err
				}
			}
			released = len(hs)
			return e, nil
		})
		if err != nil {
			return n, err
		}
		n += released
		if released > 0 {
			staleHoldsReleased.Add(released)
			db.log.Info("released holds of validations a stopped verifyd left unanswered", "account", account, "holds", released)
		}
	}
	if _, err = db.pool.Exec(ctx, `DELETE FROM boots WHERE seen_at < now() - $1::interval AND id <> $2`, db.lease, db.boot); err != nil {
		return n, err
	}
	_, err = db.pool.Exec(ctx, `DELETE FROM flush_marks WHERE `+fmt.Sprintf(deadBoot, "flush_marks.boot"), db.lease)
	return n, err
}
