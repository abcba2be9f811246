package pebble

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/verifyd/verifyd/storage"
)

// Export calls fn with every record of the box's shared state (see
// above), until fn returns an error.
func (db *DB) Export(fn func(storage.Record) error) error {
	if err := db.check(); err != nil {
		return err
	}
	accts, err := db.ListAccounts(context.Background())
	if err != nil {
		return err
	}
	for i := range accts {
		if err := fn(storage.Record{Type: storage.RecAccount, Account: &accts[i]}); err != nil {
			return err
		}
	}
	for _, a := range accts {
		keys, err := db.ListKeys(context.Background(), a.ID)
		if err != nil {
			return err
		}
		for i := range keys {
			if err := fn(storage.Record{Type: storage.RecKey, Key: &keys[i]}); err != nil {
				return err
			}
		}
	}
	for _, a := range accts {
		es, err := db.Ledger(context.Background(), a.ID, 0, 0)
		if err != nil {
			return err
		}
		for i := range es {
			if err := fn(storage.Record{Type: storage.RecEntry, Entry: &es[i]}); err != nil {
				return err
			}
		}
	}
	// Single results under res/ (batch ones are pointers there), then
	// batch results under jobres/.
	for _, p := range []string{prefixResult, prefixJobResult} {
		err := db.scanPrefix([]byte(p), func(k, v []byte) (bool, error) {
			r, pos, job, _, err := decodeResultPos(v)
			if err != nil || job != "" {
				return err == nil, err
			}
			return true, fn(storage.Record{Type: storage.RecResult, Result: &r, Pos: pos})
		})
		if err != nil {
			return err
		}
	}
	err = db.scanPrefix([]byte(prefixCache), func(k, v []byte) (bool, error) {
		rest := k[len(prefixCache):]
		acct, email, ok := bytes.Cut(rest, []byte("/"))
		if !ok {
			return false, fmt.Errorf("%w: cache key %q", errCorrupt, k)
		}
		id, ms, err := decodeCacheEntry(v)
		if err != nil {
			return false, err
		}
		return true, fn(storage.Record{Type: storage.RecCache, Cache: &storage.CacheEntry{Account: string(acct), Email: string(email), ResultID: id, ProbedAt: fromMs(ms)}})
	})
	if err != nil {
		return err
	}
	now := db.now()
	err = db.scanPrefix([]byte(prefixIdem), func(k, v []byte) (bool, error) {
		acct, _, _ := bytes.Cut(k[len(prefixIdem):], []byte("/"))
		r, err := decodeIdem(string(acct), v)
		if err != nil || !r.ExpiresAt.After(now) {
			return err == nil, err
		}
		return true, fn(storage.Record{Type: storage.RecIdem, Idem: &r})
	})
	if err != nil {
		return err
	}
	var jobs []storage.Job
	err = db.scanPrefix([]byte(prefixJob), func(k, v []byte) (bool, error) {
		var j storage.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		jobs = append(jobs, j)
		return true, nil
	})
	if err != nil {
		return err
	}
	for i := range jobs {
		addrs := make([]string, 0, jobs[i].Total)
		if err := db.jobAddresses(jobs[i].ID, 0, func(_ int, a string) error { addrs = append(addrs, a); return nil }); err != nil {
			return err
		}
		if err := fn(storage.Record{Type: storage.RecJob, Job: &jobs[i], Addrs: addrs}); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		typ  string
		list func(context.Context, string, int) ([]storage.Event, error)
	}{{storage.RecOutbox, db.OutboxEvents}, {storage.RecDeadLetter, db.DeadLetters}} {
		evs, err := q.list(context.Background(), "", 0)
		if err != nil {
			return err
		}
		for i := range evs {
			if err := fn(storage.Record{Type: q.typ, Event: &evs[i]}); err != nil {
				return err
			}
		}
	}
	for _, a := range accts {
		ev, err := db.LastEvent(context.Background(), a.ID)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(storage.Record{Type: storage.RecHookLast, Event: &ev}); err != nil {
			return err
		}
	}
	users, err := db.ListUsers(context.Background())
	if err != nil {
		return err
	}
	for i := range users {
		if err := fn(storage.Record{Type: storage.RecUser, User: &users[i]}); err != nil {
			return err
		}
	}
	db.umu.RLock()
	invites := make([]storage.Invite, 0, len(db.us.invites))
	for _, iv := range db.us.invites {
		invites = append(invites, iv)
	}
	sessions := make([]storage.Session, 0, len(db.us.sessions))
	for _, s := range db.us.sessions {
		sessions = append(sessions, s)
	}
	db.umu.RUnlock()
	for i := range invites {
		if err := fn(storage.Record{Type: storage.RecInvite, Invite: &invites[i]}); err != nil {
			return err
		}
	}
	for i := range sessions {
		if err := fn(storage.Record{Type: storage.RecSession, Session: &sessions[i]}); err != nil {
			return err
		}
	}
	return db.scanPrefix(keyMetaSecrets, func(k, v []byte) (bool, error) {
		return true, fn(storage.Record{Type: storage.RecSecret, Name: string(k[len(keyMetaSecrets):]), Value: bytes.Clone(v)})
	})
}
