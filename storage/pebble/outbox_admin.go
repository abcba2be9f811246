package pebble

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// What the operator sees of the outbox (verifyctl webhooks): the events
// waiting for delivery, and sending one again at once.

// OutboxEvents returns up to limit (≤ 0: all) events waiting in the
// outbox for the account ("" for every account), soonest due first.
func (db *DB) OutboxEvents(ctx context.Context, account string, limit int) ([]storage.Event, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	var out []storage.Event
	err := db.scanPrefix([]byte(prefixOutbox), func(k, v []byte) (bool, error) {
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

// ResendEvent makes the event with that id due now: a dead letter goes
// back into the outbox with its attempts reset (as Redrive); an event
// waiting in the outbox keeps its attempts and is moved to now. ErrNotFound
// when neither holds it (it was delivered), or when account is not empty
// and the event is another account's.
func (db *DB) ResendEvent(ctx context.Context, account, id string) (storage.Event, error) {
	ev, err := db.Redrive(ctx, account, id)
	if err == nil || !errors.Is(err, storage.ErrNotFound) {
		return ev, err
	}
	if err := db.check(); err != nil {
		return storage.Event{}, err
	}
	db.outboxMu.Lock()
	defer db.outboxMu.Unlock()
	var found *storage.Event
	var from []byte
	err = db.scanPrefix([]byte(prefixOutbox), func(k, v []byte) (bool, error) {
		var e storage.Event
		if err := json.Unmarshal(v, &e); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		if e.ID != id {
			return true, nil
		}
		if account != "" && e.Account != account {
			return false, nil
		}
		found, from = &e, append([]byte(nil), k...)
		return false, nil
	})
	if err != nil {
		return storage.Event{}, err
	}
	if found == nil {
		return storage.Event{}, fmt.Errorf("%w: event %s", storage.ErrNotFound, id)
	}
	nev := *found
	nev.NextAttempt = db.now().UTC().Truncate(time.Millisecond)
	v, err := json.Marshal(nev)
	if err != nil {
		return storage.Event{}, err
	}
	b := db.pdb.NewBatch()
	b.Delete(from, nil)
	b.Set(eventKey(&nev), v, nil)
	return nev, db.commit(b, pebble.Sync)
}
