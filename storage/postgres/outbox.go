package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// The webhook outbox, shared by the fleet (storage/pebble/outbox.go has the
// contract). Any box's dispatcher delivers any event: DueEvents claims
// the events it returns for this box (claim_boot) for claimTTL, so two
// boxes do not post the same event at once; a claim ends with its
// delivery's outcome, when the claiming box stops (its boot is not seen
// for the lease), or after claimTTL. Delivery stays at least once: a box
// that dies between posting and recording the outcome leaves the event to
// be posted again, and receivers tell repeats apart by the event id.

// claimTTL bounds how long a claim holds while its box is alive: longer
// than a delivery takes (its timeout), so a live box's slow delivery is
// not doubled.
const claimTTL = 5 * time.Minute

// stageEvent fills in ev's defaults and writes it into the outbox, with
// the account's latest-event copy, in tx.
func (db *DB) stageEvent(ctx context.Context, tx pgx.Tx, ev *storage.Event, now time.Time) error {
	if err := storage.PrepareEvent(ev, now); err != nil {
		return err
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO outbox (id, account, next_attempt, event) VALUES ($1, $2, $3, $4)`, ev.ID, ev.Account, ev.NextAttempt, v)
	if isForeignKey(err) {
		return notFound("account", ev.Account)
	}
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO hook_last (account, event) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET event = excluded.event`, ev.Account, v)
	return err
}

// Enqueue adds an event that no other state change comes with.
func (db *DB) Enqueue(ctx context.Context, ev storage.Event) (storage.Event, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		return db.stageEvent(ctx, tx, &ev, db.now())
	})
	return ev, err
}

func decodeEvents(rows pgx.Rows) ([]storage.Event, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Event, error) {
		var v []byte
		var ev storage.Event
		if err := row.Scan(&v); err != nil {
			return ev, err
		}
		err := json.Unmarshal(v, &ev)
		return ev, err
	})
}

// DueEvents returns up to limit events due by now, most overdue first,
// and claims them for this box (see above): events another live box
// claimed are not returned.
func (db *DB) DueEvents(ctx context.Context, limit int) ([]storage.Event, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `UPDATE outbox SET claim_boot = $3, claim_until = now() + $5::interval
		WHERE id IN (SELECT o.id FROM outbox o WHERE o.next_attempt <= $2
			AND (o.claim_boot = $3 OR o.claim_until IS NULL OR o.claim_until < now() OR `+fmt.Sprintf(deadBoot, "o.claim_boot")+`)
			ORDER BY o.next_attempt, o.id LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING next_attempt, id, event`, db.lease, db.now(), db.boot, limit, claimTTL)
	if err != nil {
		return nil, err
	}
	type due struct {
		at time.Time
		id string
		ev []byte
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (due, error) {
		var d due
		err := row.Scan(&d.at, &d.id, &d.ev)
		return d, err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order.
	out := make([]storage.Event, len(ds))
	for i, d := range ds {
		if err := json.Unmarshal(d.ev, &out[i]); err != nil {
			return nil, err
		}
	}
	sortEvents(out)
	return out, nil
}

// NextDue returns when the earliest event is due; ok is false when the
// outbox is empty.
func (db *DB) NextDue(ctx context.Context) (time.Time, bool, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var at *time.Time
	if err := db.pool.QueryRow(ctx, `SELECT min(next_attempt) FROM outbox`).Scan(&at); err != nil {
		return time.Time{}, false, err
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return at.UTC(), true, nil
}

// moveEvent deletes ev (as it was read: the same next attempt) from the
// outbox and runs then in the same transaction; ErrNotFound when it is no
// longer there.
func (db *DB) moveEvent(ctx context.Context, ev storage.Event, then func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = $1 AND next_attempt = $2`, ev.ID, ev.NextAttempt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: event %s due %v", storage.ErrNotFound, ev.ID, ev.NextAttempt)
		}
		if then == nil {
			return nil
		}
		return then(ctx, tx)
	})
}

// MarkDelivered removes a delivered event from the outbox.
func (db *DB) MarkDelivered(ctx context.Context, ev storage.Event) error {
	return db.moveEvent(ctx, ev, nil)
}

// Reschedule records a failed attempt and makes the event due again at
// next, unclaimed.
func (db *DB) Reschedule(ctx context.Context, ev storage.Event, next time.Time, status int, errText string) (storage.Event, error) {
	nev := ev
	nev.Attempts++
	nev.LastStatus, nev.LastError = status, errText
	nev.NextAttempt = next.UTC().Truncate(time.Millisecond)
	return nev, db.moveEvent(ctx, ev, func(ctx context.Context, tx pgx.Tx) error { return insertOutbox(ctx, tx, &nev) })
}

func insertOutbox(ctx context.Context, tx pgx.Tx, ev *storage.Event) error {
	v, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO outbox (id, account, next_attempt, event) VALUES ($1, $2, $3, $4)`, ev.ID, ev.Account, ev.NextAttempt, v)
	return err
}

// DeadLetter records a last failed attempt and moves the event to the
// dead letters.
func (db *DB) DeadLetter(ctx context.Context, ev storage.Event, status int, errText string) (storage.Event, error) {
	nev := ev
	nev.Attempts++
	nev.LastStatus, nev.LastError = status, errText
	nev.DeadAt = db.now().Truncate(time.Millisecond)
	return nev, db.moveEvent(ctx, ev, func(ctx context.Context, tx pgx.Tx) error {
		v, err := json.Marshal(nev)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO dead_letters (id, account, event) VALUES ($1, $2, $3)`, nev.ID, nev.Account, v)
		return err
	})
}

// DeadLetters returns up to limit (≤ 0: all) dead events of the account
// ("" for every account), oldest first.
func (db *DB) DeadLetters(ctx context.Context, account string, limit int) ([]storage.Event, error) {
	return db.events(ctx, `SELECT event FROM dead_letters WHERE $1 = '' OR account = $1 ORDER BY id LIMIT $2`, account, limit)
}

// OutboxEvents returns up to limit (≤ 0: all) events waiting in the
// outbox for the account ("" for every account), soonest due first.
func (db *DB) OutboxEvents(ctx context.Context, account string, limit int) ([]storage.Event, error) {
	return db.events(ctx, `SELECT event FROM outbox WHERE $1 = '' OR account = $1 ORDER BY next_attempt, id LIMIT $2`, account, limit)
}

func (db *DB) events(ctx context.Context, q, account string, limit int) ([]storage.Event, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, q, account, limit)
	if err != nil {
		return nil, err
	}
	return decodeEvents(rows)
}

// Redrive moves a dead event back into the outbox, due now, its attempts
// reset. With account not empty, another account's event is ErrNotFound.
func (db *DB) Redrive(ctx context.Context, account, id string) (storage.Event, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var ev storage.Event
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var v []byte
		err := tx.QueryRow(ctx, `DELETE FROM dead_letters WHERE id = $1 AND ($2 = '' OR account = $2) RETURNING event`, id, account).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dead letter %s: %w", id, storage.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(v, &ev); err != nil {
			return err
		}
		ev.Attempts, ev.DeadAt = 0, time.Time{}
		ev.NextAttempt = db.now().Truncate(time.Millisecond)
		return insertOutbox(ctx, tx, &ev)
	})
	return ev, err
}

// ResendEvent makes the event with that id due now: a dead letter as
// Redrive; an event waiting in the outbox keeps its attempts and is moved
// to now, unclaimed.
func (db *DB) ResendEvent(ctx context.Context, account, id string) (storage.Event, error) {
	ev, err := db.Redrive(ctx, account, id)
	if err == nil || !errors.Is(err, storage.ErrNotFound) {
		return ev, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var v []byte
	err = db.pool.QueryRow(ctx, `SELECT event FROM outbox WHERE id = $1 AND ($2 = '' OR account = $2)`, id, account).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Event{}, fmt.Errorf("%w: event %s", storage.ErrNotFound, id)
	}
	if err != nil {
		return storage.Event{}, err
	}
	if err := json.Unmarshal(v, &ev); err != nil {
		return storage.Event{}, err
	}
	nev := ev
	nev.NextAttempt = db.now().Truncate(time.Millisecond)
	return nev, db.moveEvent(ctx, ev, func(ctx context.Context, tx pgx.Tx) error { return insertOutbox(ctx, tx, &nev) })
}

// LastEvent returns the latest event enqueued for the account, or
// ErrNotFound.
func (db *DB) LastEvent(ctx context.Context, account string) (storage.Event, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var v []byte
	err := db.pool.QueryRow(ctx, `SELECT event FROM hook_last WHERE account = $1`, account).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Event{}, fmt.Errorf("last event of %q: %w", account, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Event{}, err
	}
	var ev storage.Event
	return ev, json.Unmarshal(v, &ev)
}

// sortEvents orders events by next attempt, then id.
func sortEvents(evs []storage.Event) {
	slices.SortFunc(evs, func(a, b storage.Event) int {
		if c := a.NextAttempt.Compare(b.NextAttempt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
