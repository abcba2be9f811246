package pebble

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// keyUseEvery is how often a key's last use is written at most.
const keyUseEvery = time.Minute

// MintKey creates an API key for the account with the given scopes and
// returns the key string, which is shown once and never again, and its
// record.
func (db *DB) MintKey(ctx context.Context, account string, scopes []string, label string) (string, storage.APIKey, error) {
	if err := db.check(); err != nil {
		return "", storage.APIKey{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.accounts[account]; !ok {
		if _, _, err := storage.NewKey(account, scopes, label, db.now()); err != nil {
			return "", storage.APIKey{}, err
		}
		return "", storage.APIKey{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, account)
	}
	var full string
	var k storage.APIKey
	for {
		var err error
		if full, k, err = storage.NewKey(account, scopes, label, db.now()); err != nil {
			return "", storage.APIKey{}, err
		}
		if _, dup := db.keys[k.Prefix]; !dup {
			break
		}
	}
	prefix := k.Prefix
	// Creation times are kept to the millisecond; a key minted in the
	// same millisecond as the account's newest one is dated a millisecond
	// later, so that ListKeys's oldest-first order is the minting order.
	for _, o := range db.keys {
		if o.Account == account && !k.CreatedAt.After(o.CreatedAt) {
			k.CreatedAt = o.CreatedAt.Add(time.Millisecond)
		}
	}
	if err := db.putKey(k); err != nil {
		return "", storage.APIKey{}, err
	}
	db.keys[prefix] = k
	return full, k.Clone(), nil
}

// LookupKey returns the record of the key with that prefix, or ErrNotFound.
func (db *DB) LookupKey(ctx context.Context, prefix string) (storage.APIKey, error) {
	if err := db.check(); err != nil {
		return storage.APIKey{}, err
	}
	db.mu.RLock()
	k, ok := db.keys[prefix]
	db.mu.RUnlock()
	if !ok {
		return storage.APIKey{}, fmt.Errorf("%w: key %q", storage.ErrNotFound, prefix)
	}
	return db.withUse(k).Clone(), nil
}

// VerifyKey authenticates a key string (the Bearer token): ErrKeyInvalid
// when it is malformed, unknown or its secret does not match,
// ErrKeyRevoked when it matches a revoked key. It reads no disk: every key
// record is in memory (keys are few: the operator mints them), loaded at
// Open and kept up to date by MintKey and RevokeKey.
func (db *DB) VerifyKey(ctx context.Context, key string) (storage.APIKey, error) {
	if err := db.check(); err != nil {
		return storage.APIKey{}, err
	}
	prefix, _, ok := storage.ParseKey(key)
	if !ok {
		return storage.APIKey{}, storage.ErrKeyInvalid
	}
	db.mu.RLock()
	k, found := db.keys[prefix]
	db.mu.RUnlock()
	if !found {
		return storage.APIKey{}, storage.ErrKeyInvalid
	}
	if err := storage.MatchKey(key, k); err != nil {
		return storage.APIKey{}, err
	}
	db.noteKeyUse(k)
	return k.Clone(), nil
}

// noteKeyUse records that k authenticated a request now. The hot path is
// one map load and one atomic store; the record is written (NoSync) in
// the background when its stored LastUsed is a minute old or more.
func (db *DB) noteKeyUse(k storage.APIKey) {
	now := db.now().UnixMilli()
	v, ok := db.keyUse.Load(k.Prefix)
	if !ok {
		v, _ = db.keyUse.LoadOrStore(k.Prefix, new(keyUse))
	}
	u := v.(*keyUse)
	u.ms.Store(now)
	if now-k.LastUsed.UnixMilli() < keyUseEvery.Milliseconds() && !k.LastUsed.IsZero() {
		return
	}
	if !u.writing.CompareAndSwap(false, true) {
		return
	}
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		defer u.writing.Store(false)
		if db.closed.Load() {
			return // Close writes it
		}
		if err := db.flushKeyUse(k.Prefix, u); err != nil {
			db.log.Warn("cannot record an API key's last use", "prefix", k.Prefix, "err", err)
		}
	}()
}

// keyUse is the last use of one key not yet written.
type keyUse struct {
	ms      atomic.Int64 // Unix ms of the last use
	writing atomic.Bool  // a flush is under way
}

// flushKeyUse writes the key's last use into its record, unsynced: losing
// the last minute of it in a crash is harmless, and a synced write per
// minute per key would cost the API's fsyncs.
func (db *DB) flushKeyUse(prefix string, u *keyUse) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	k, ok := db.keys[prefix]
	if !ok {
		return nil
	}
	t := time.UnixMilli(u.ms.Load()).UTC()
	if !t.After(k.LastUsed) {
		return nil
	}
	k.LastUsed = t
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	b.Set(apiKeyKey(k.Prefix), v, nil)
	if err := db.commit(b, pebble.NoSync); err != nil {
		return err
	}
	db.keys[prefix] = k
	return nil
}

// withUse returns k with the last use noted in memory, when later than
// the stored one.
func (db *DB) withUse(k storage.APIKey) storage.APIKey {
	if v, ok := db.keyUse.Load(k.Prefix); ok {
		if t := time.UnixMilli(v.(*keyUse).ms.Load()).UTC(); t.After(k.LastUsed) {
			k.LastUsed = t
		}
	}
	return k
}

// RevokeKey revokes the key with that prefix; from then on VerifyKey
// answers ErrKeyRevoked. Revoking a revoked key changes nothing.
func (db *DB) RevokeKey(ctx context.Context, prefix string) (storage.APIKey, error) {
	if err := db.check(); err != nil {
		return storage.APIKey{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k, ok := db.keys[prefix]
	if !ok {
		return storage.APIKey{}, fmt.Errorf("%w: key %q", storage.ErrNotFound, prefix)
	}
	if k.Revoked {
		return k.Clone(), nil
	}
	k.Revoked = true
	k.RevokedAt = db.now().Truncate(time.Millisecond)
	if err := db.putKey(k); err != nil {
		return storage.APIKey{}, err
	}
	db.keys[prefix] = k
	return k.Clone(), nil
}

// ListKeys returns the account's keys, revoked ones included, oldest
// first.
func (db *DB) ListKeys(ctx context.Context, account string) ([]storage.APIKey, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	var out []storage.APIKey
	for _, k := range db.keys {
		if k.Account == account {
			out = append(out, db.withUse(k).Clone())
		}
	}
	db.mu.RUnlock()
	slices.SortFunc(out, func(a, b storage.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Prefix, b.Prefix)
	})
	return out, nil
}

// putKey writes the key record, synced: a revocation must survive a crash.
func (db *DB) putKey(k storage.APIKey) error {
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	b := db.pdb.NewBatch()
	b.Set(apiKeyKey(k.Prefix), v, nil)
	return db.commit(b, pebble.Sync)
}

func (db *DB) loadKeys() error {
	return db.scanPrefix([]byte(prefixAPIKey), func(k, v []byte) (bool, error) {
		var r storage.APIKey
		if err := json.Unmarshal(v, &r); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		db.keys[r.Prefix] = r
		return true, nil
	})
}
