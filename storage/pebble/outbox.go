package pebble

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// stageEvent fills in ev's defaults and adds it to b, with the account's
// latest-event copy.
func (db *DB) stageEvent(b *pebble.Batch, ev *storage.Event, now time.Time) error {
	if err := storage.PrepareEvent(ev, now); err != nil {
		return err
	}
	if !db.accountExists(ev.Account) {
		return fmt.Errorf("%w: account %q", storage.ErrNotFound, ev.Account)
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	b.Set(eventKey(ev), v, nil)
	b.Set(hookLastKey(ev.Account), v, nil)
	return nil
}

// Enqueue adds an event that no other state change comes with (a
// reputation.warning), synced.
func (db *DB) Enqueue(ctx context.Context, ev storage.Event) (storage.Event, error) {
	if err := db.check(); err != nil {
		return storage.Event{}, err
	}
	b := db.pdb.NewBatch()
	if err := db.stageEvent(b, &ev, db.now()); err != nil {
		b.Close()
		return storage.Event{}, err
	}
	return ev, db.commit(b, pebble.Sync)
}

// DueEvents returns up to limit events due by now, most overdue first.
func (db *DB) DueEvents(ctx context.Context, limit int) ([]storage.Event, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	upper := appendU64([]byte(prefixOutbox), uint64(toMs(db.now()))+1)
	var out []storage.Event
	err := db.scan([]byte(prefixOutbox), upper, func(k, v []byte) (bool, error) {
		var ev storage.Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		out = append(out, ev)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// NextDue returns when the earliest event is due; ok is false when the
// outbox is empty.
func (db *DB) NextDue(ctx context.Context) (at time.Time, ok bool, err error) {
	if err := db.check(); err != nil {
		return time.Time{}, false, err
	}
	err = db.scanPrefix([]byte(prefixOutbox), func(k, _ []byte) (bool, error) {
		ms, valid := parseOutboxKey(k)
		if !valid {
			return false, fmt.Errorf("%w: outbox key %q", errCorrupt, k)
		}
		at, ok = fromMs(ms), true
		return false, nil
	})
	return at, ok, err
}

// MarkDelivered removes a delivered event from the outbox. ErrNotFound
// when it is no longer there (delivered, rescheduled or dead already).
func (db *DB) MarkDelivered(ctx context.Context, ev storage.Event) error {
	return db.moveEvent(ev, nil, nil)
}

// Reschedule records a failed attempt (status: the HTTP status, 0 for
// none; errText why) and makes the event due again at next.
func (db *DB) Reschedule(ctx context.Context, ev storage.Event, next time.Time, status int, errText string) (storage.Event, error) {
	nev := ev
	nev.Attempts++
	nev.LastStatus, nev.LastError = status, errText
	nev.NextAttempt = next.UTC().Truncate(time.Millisecond)
	return nev, db.moveEvent(ev, eventKey(&nev), &nev)
}

// DeadLetter records a last failed attempt and moves the event to the
// dead-letter queue (spec §6: after 24 h).
func (db *DB) DeadLetter(ctx context.Context, ev storage.Event, status int, errText string) (storage.Event, error) {
	nev := ev
	nev.Attempts++
	nev.LastStatus, nev.LastError = status, errText
	nev.DeadAt = db.now().Truncate(time.Millisecond)
	return nev, db.moveEvent(ev, deadLetterKey(ev.ID), &nev)
}

// moveEvent deletes ev's outbox key and, with to, writes nev there, in one
// synced batch.
func (db *DB) moveEvent(ev storage.Event, to []byte, nev *storage.Event) error {
	if err := db.check(); err != nil {
		return err
	}
	db.outboxMu.Lock()
	defer db.outboxMu.Unlock()
	from := eventKey(&ev)
	ok, err := db.has(from)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: event %s due %v", storage.ErrNotFound, ev.ID, ev.NextAttempt)
	}
	b := db.pdb.NewBatch()
	b.Delete(from, nil)
	if to != nil {
		v, err := json.Marshal(nev)
		if err != nil {
			b.Close()
			return err
		}
		b.Set(to, v, nil)
	}
	return db.commit(b, pebble.Sync)
}

// DeadLetters returns up to limit (≤ 0: all) dead events of the account
// ("" for every account), oldest first.
func (db *DB) DeadLetters(ctx context.Context, account string, limit int) ([]storage.Event, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	var out []storage.Event
	err := db.scanPrefix([]byte(prefixDeadLetter), func(k, v []byte) (bool, error) {
		var ev storage.Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		if account == "" || ev.Account == account {
			out = append(out, ev)
		}
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// Redrive moves a dead event back into the outbox, due now, its attempts
// reset (the dashboard's retry). With account not empty, another
// account's event is ErrNotFound.
func (db *DB) Redrive(ctx context.Context, account, id string) (storage.Event, error) {
	if err := db.check(); err != nil {
		return storage.Event{}, err
	}
	db.outboxMu.Lock()
	defer db.outboxMu.Unlock()
	v, err := db.get(deadLetterKey(id))
	if err != nil {
		return storage.Event{}, fmt.Errorf("dead letter %s: %w", id, err)
	}
	var ev storage.Event
	if err := json.Unmarshal(v, &ev); err != nil {
		return storage.Event{}, fmt.Errorf("%w: dead letter %s: %v", errCorrupt, id, err)
	}
	if account != "" && ev.Account != account {
		return storage.Event{}, fmt.Errorf("dead letter %s: %w", id, storage.ErrNotFound)
	}
	ev.Attempts, ev.DeadAt = 0, time.Time{}
	ev.NextAttempt = db.now().Truncate(time.Millisecond)
	nv, err := json.Marshal(ev)
	if err != nil {
		return storage.Event{}, err
	}
	b := db.pdb.NewBatch()
	b.Delete(deadLetterKey(id), nil)
	b.Set(eventKey(&ev), nv, nil)
	return ev, db.commit(b, pebble.Sync)
}

// LastEvent returns the latest event enqueued for the account, or
// ErrNotFound.
func (db *DB) LastEvent(ctx context.Context, account string) (storage.Event, error) {
	if err := db.check(); err != nil {
		return storage.Event{}, err
	}
	v, err := db.get(hookLastKey(account))
	if err != nil {
		return storage.Event{}, fmt.Errorf("last event of %q: %w", account, err)
	}
	var ev storage.Event
	if err := json.Unmarshal(v, &ev); err != nil {
		return storage.Event{}, fmt.Errorf("%w: last event of %q: %v", errCorrupt, account, err)
	}
	return ev, nil
}

func eventKey(ev *storage.Event) []byte { return outboxKey(toMs(ev.NextAttempt), ev.ID) }
