package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Export: a box's shared state as a stream of records, for moving it into
// a fleet (verifyctl db export, then db import into PostgreSQL). Records
// come kind by kind, in an order an importer can write them in: accounts
// first, then what refers to them. Holds are not exported: Open released
// those of the last process (their validations never answered). Egress
// state stays behind: it is the box's own.

// Record types of an export, in the order Export gives them.
const (
	RecAccount     = "account"
	RecKey         = "key"
	RecEntry       = "entry"
	RecResult      = "result"
	RecCache       = "cache"
	RecIdem        = "idem"
	RecJob         = "job"
	RecOutbox      = "outbox"
	RecDeadLetter  = "dead_letter"
	RecHookLast    = "hook_last"
	RecUser        = "user"
	RecInvite      = "invite"
	RecSession     = "session"
	RecSecret      = "secret"
	RecSigningKeys = "signing_keys"
)

// Record is one record of an export: Type says which field is set.
type Record struct {
	Type    string   `json:"type"`
	Account *Account `json:"account,omitempty"`
	Key     *APIKey  `json:"key,omitempty"`
	Entry   *Entry   `json:"entry,omitempty"`
	// Result is a result with its history position (Pos).
	Result *Result `json:"result,omitempty"`
	Pos    int64   `json:"pos,omitempty"`
	// Cache is a cache:true index entry.
	Cache *CacheEntry `json:"cache,omitempty"`
	Idem  *IdemRecord `json:"idem,omitempty"`
	// Job comes with its addresses, in index order.
	Job     *Job     `json:"job,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
	Event   *Event   `json:"event,omitempty"`
	User    *User    `json:"user,omitempty"`
	Invite  *Invite  `json:"invite,omitempty"`
	Session *Session `json:"session,omitempty"`
	// Name and Value are a named secret's (RecSecret); Value alone the
	// signing key set's document (RecSigningKeys).
	Name  string `json:"name,omitempty"`
	Value []byte `json:"value,omitempty"`
}

// CacheEntry is an entry of the cache:true index: an account's latest
// fresh result for an address (lower-cased).
type CacheEntry struct {
	Account  string    `json:"account"`
	Email    string    `json:"email"`
	ResultID string    `json:"result_id"`
	ProbedAt time.Time `json:"probed_at"`
}

// Export calls fn with every record of the box's shared state (see
// above), until fn returns an error.
func (db *DB) Export(fn func(Record) error) error {
	if err := db.check(); err != nil {
		return err
	}
	accts, err := db.ListAccounts()
	if err != nil {
		return err
	}
	for i := range accts {
		if err := fn(Record{Type: RecAccount, Account: &accts[i]}); err != nil {
			return err
		}
	}
	for _, a := range accts {
		keys, err := db.ListKeys(a.ID)
		if err != nil {
			return err
		}
		for i := range keys {
			if err := fn(Record{Type: RecKey, Key: &keys[i]}); err != nil {
				return err
			}
		}
	}
	for _, a := range accts {
		es, err := db.Ledger(a.ID, 0, 0)
		if err != nil {
			return err
		}
		for i := range es {
			if err := fn(Record{Type: RecEntry, Entry: &es[i]}); err != nil {
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
			return true, fn(Record{Type: RecResult, Result: &r, Pos: pos})
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
		return true, fn(Record{Type: RecCache, Cache: &CacheEntry{Account: string(acct), Email: string(email), ResultID: id, ProbedAt: fromMs(ms)}})
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
		return true, fn(Record{Type: RecIdem, Idem: &r})
	})
	if err != nil {
		return err
	}
	var jobs []Job
	err = db.scanPrefix([]byte(prefixJob), func(k, v []byte) (bool, error) {
		var j Job
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
		if err := db.JobAddresses(jobs[i].ID, 0, func(_ int, a string) error { addrs = append(addrs, a); return nil }); err != nil {
			return err
		}
		if err := fn(Record{Type: RecJob, Job: &jobs[i], Addrs: addrs}); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		typ  string
		list func(string, int) ([]Event, error)
	}{{RecOutbox, db.OutboxEvents}, {RecDeadLetter, db.DeadLetters}} {
		evs, err := q.list("", 0)
		if err != nil {
			return err
		}
		for i := range evs {
			if err := fn(Record{Type: q.typ, Event: &evs[i]}); err != nil {
				return err
			}
		}
	}
	for _, a := range accts {
		ev, err := db.LastEvent(a.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(Record{Type: RecHookLast, Event: &ev}); err != nil {
			return err
		}
	}
	users, err := db.ListUsers()
	if err != nil {
		return err
	}
	for i := range users {
		if err := fn(Record{Type: RecUser, User: &users[i]}); err != nil {
			return err
		}
	}
	db.umu.RLock()
	invites := make([]Invite, 0, len(db.us.invites))
	for _, iv := range db.us.invites {
		invites = append(invites, iv)
	}
	sessions := make([]Session, 0, len(db.us.sessions))
	for _, s := range db.us.sessions {
		sessions = append(sessions, s)
	}
	db.umu.RUnlock()
	for i := range invites {
		if err := fn(Record{Type: RecInvite, Invite: &invites[i]}); err != nil {
			return err
		}
	}
	for i := range sessions {
		if err := fn(Record{Type: RecSession, Session: &sessions[i]}); err != nil {
			return err
		}
	}
	return db.scanPrefix(keyMetaSecrets, func(k, v []byte) (bool, error) {
		return true, fn(Record{Type: RecSecret, Name: string(k[len(keyMetaSecrets):]), Value: bytes.Clone(v)})
	})
}
