package storage

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// API key scopes (spec §5).
const (
	ScopeValidateRead  = "validate:read"
	ScopeValidateWrite = "validate:write"
)

// The API key format, spec §5: svc_live_<prefix>_<secret>.
const (
	// KeyPrefixLen is the length of a key's prefix: [a-z0-9], 62 bits.
	KeyPrefixLen = 12
	// KeySecretLen is the length of a key's secret: [A-Za-z0-9], 256 bits.
	KeySecretLen = 43
	keyLead      = "svc_live_"
	keyLen       = len(keyLead) + KeyPrefixLen + 1 + KeySecretLen
)

// APIKey is the stored record of an API key. The secret itself is never
// stored: only Hash, the SHA-256 of the whole key string.
//
// Why SHA-256 and not bcrypt or Argon2: those slow hashes protect
// passwords, which have little entropy, against guessing. A key secret is
// 43 characters drawn uniformly from 62 (256 bits, crypto/rand): nobody
// can guess it from its hash faster than by guessing it outright, so a
// fast hash is as safe, and authentication stays a map lookup and one
// SHA-256 (about a microsecond) per request instead of ~50 ms of bcrypt.
type APIKey struct {
	// Prefix identifies the key (the <prefix> of the key string) and finds
	// its record in O(1); it is not secret and may be shown and logged.
	Prefix  string   `json:"prefix"`
	Account string   `json:"account"`
	Label   string   `json:"label,omitempty"`
	Scopes  []string `json:"scopes"`
	// Hash is SHA-256 of the whole key string.
	Hash      []byte    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	Revoked   bool      `json:"revoked,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// LastUsed is when the key last authenticated a request, to the
	// minute: VerifyKey notes each use in memory and writes the record
	// (unsynced) at most once a minute per key, so a crash may forget the
	// last minute of it. Zero: never used.
	LastUsed time.Time `json:"last_used,omitzero"`
}

// keyUseEvery is how often a key's last use is written at most.
const keyUseEvery = time.Minute

// HasScope reports whether the key grants scope.
func (k APIKey) HasScope(scope string) bool { return slices.Contains(k.Scopes, scope) }

func (k APIKey) clone() APIKey {
	k.Scopes = slices.Clone(k.Scopes)
	k.Hash = slices.Clone(k.Hash)
	return k
}

// ParseKey splits a key string svc_live_<prefix>_<secret>. The prefix has a
// fixed length and no "_", so the split is unambiguous; ok is false for
// anything that does not have the exact shape.
func ParseKey(key string) (prefix, secret string, ok bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyLead) || key[len(keyLead)+KeyPrefixLen] != '_' {
		return "", "", false
	}
	prefix = key[len(keyLead) : len(keyLead)+KeyPrefixLen]
	secret = key[len(keyLead)+KeyPrefixLen+1:]
	for i := 0; i < len(prefix); i++ {
		if !strings.ContainsRune(alphaLowerDigits, rune(prefix[i])) {
			return "", "", false
		}
	}
	for i := 0; i < len(secret); i++ {
		if !strings.ContainsRune(alphaBase62, rune(secret[i])) {
			return "", "", false
		}
	}
	return prefix, secret, true
}

// MintKey creates an API key for the account with the given scopes and
// returns the key string, which is shown once and never again, and its
// record.
func (db *DB) MintKey(account string, scopes []string, label string) (string, APIKey, error) {
	if err := db.check(); err != nil {
		return "", APIKey{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.accounts[account]; !ok {
		if _, _, err := NewKey(account, scopes, label, db.now()); err != nil {
			return "", APIKey{}, err
		}
		return "", APIKey{}, fmt.Errorf("%w: account %q", ErrNotFound, account)
	}
	var full string
	var k APIKey
	for {
		var err error
		if full, k, err = NewKey(account, scopes, label, db.now()); err != nil {
			return "", APIKey{}, err
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
		return "", APIKey{}, err
	}
	db.keys[prefix] = k
	return full, k.clone(), nil
}

// LookupKey returns the record of the key with that prefix, or ErrNotFound.
func (db *DB) LookupKey(prefix string) (APIKey, error) {
	if err := db.check(); err != nil {
		return APIKey{}, err
	}
	db.mu.RLock()
	k, ok := db.keys[prefix]
	db.mu.RUnlock()
	if !ok {
		return APIKey{}, fmt.Errorf("%w: key %q", ErrNotFound, prefix)
	}
	return db.withUse(k).clone(), nil
}

// VerifyKey authenticates a key string (the Bearer token): ErrKeyInvalid
// when it is malformed, unknown or its secret does not match,
// ErrKeyRevoked when it matches a revoked key. It reads no disk: every key
// record is in memory (keys are few: the operator mints them), loaded at
// Open and kept up to date by MintKey and RevokeKey.
func (db *DB) VerifyKey(key string) (APIKey, error) {
	if err := db.check(); err != nil {
		return APIKey{}, err
	}
	prefix, _, ok := ParseKey(key)
	if !ok {
		return APIKey{}, ErrKeyInvalid
	}
	db.mu.RLock()
	k, found := db.keys[prefix]
	db.mu.RUnlock()
	if !found {
		return APIKey{}, ErrKeyInvalid
	}
	if err := MatchKey(key, k); err != nil {
		return APIKey{}, err
	}
	db.noteKeyUse(k)
	return k.clone(), nil
}

// noteKeyUse records that k authenticated a request now. The hot path is
// one map load and one atomic store; the record is written (NoSync) in
// the background when its stored LastUsed is a minute old or more.
func (db *DB) noteKeyUse(k APIKey) {
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
func (db *DB) withUse(k APIKey) APIKey {
	if v, ok := db.keyUse.Load(k.Prefix); ok {
		if t := time.UnixMilli(v.(*keyUse).ms.Load()).UTC(); t.After(k.LastUsed) {
			k.LastUsed = t
		}
	}
	return k
}

// RevokeKey revokes the key with that prefix; from then on VerifyKey
// answers ErrKeyRevoked. Revoking a revoked key changes nothing.
func (db *DB) RevokeKey(prefix string) (APIKey, error) {
	if err := db.check(); err != nil {
		return APIKey{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k, ok := db.keys[prefix]
	if !ok {
		return APIKey{}, fmt.Errorf("%w: key %q", ErrNotFound, prefix)
	}
	if k.Revoked {
		return k.clone(), nil
	}
	k.Revoked = true
	k.RevokedAt = db.now().Truncate(time.Millisecond)
	if err := db.putKey(k); err != nil {
		return APIKey{}, err
	}
	db.keys[prefix] = k
	return k.clone(), nil
}

// ListKeys returns the account's keys, revoked ones included, oldest
// first.
func (db *DB) ListKeys(account string) ([]APIKey, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	var out []APIKey
	for _, k := range db.keys {
		if k.Account == account {
			out = append(out, db.withUse(k).clone())
		}
	}
	db.mu.RUnlock()
	slices.SortFunc(out, func(a, b APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Prefix, b.Prefix)
	})
	return out, nil
}

// putKey writes the key record, synced: a revocation must survive a crash.
func (db *DB) putKey(k APIKey) error {
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
		var r APIKey
		if err := json.Unmarshal(v, &r); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		db.keys[r.Prefix] = r
		return true, nil
	})
}
