package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

const keyCols = `prefix, account, label, scopes, hash, created_at, revoked_at, last_used`

func scanKey(r scanner) (storage.APIKey, error) {
	var k storage.APIKey
	var revoked, used *time.Time
	if err := r.Scan(&k.Prefix, &k.Account, &k.Label, &k.Scopes, &k.Hash, &k.CreatedAt, &revoked, &used); err != nil {
		return storage.APIKey{}, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.RevokedAt, k.Revoked = fromOpt(revoked), revoked != nil
	k.LastUsed = fromOpt(used)
	return k, nil
}

// MintKey creates an API key for the account and returns the key string,
// shown once, and its record. Keys minted in the same millisecond for one
// account are dated a millisecond apart, so ListKeys's order is the
// minting order (the account's row lock orders them across boxes).
func (db *DB) MintKey(ctx context.Context, account string, scopes []string, label string) (string, storage.APIKey, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	full0, k0, err := storage.NewKey(account, scopes, label, db.now())
	if err != nil {
		return "", storage.APIKey{}, err
	}
	var full string
	var k storage.APIKey
	// READ COMMITTED: the account's row lock orders the mints (a second
	// one reads the first's key after the wait; see inRowTx).
	err = inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		full, k = full0, k0 // a retried transaction starts again from them
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, account).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("account", account)
		}
		if err != nil {
			return err
		}
		for {
			var taken bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE prefix = $1)`, k.Prefix).Scan(&taken); err != nil {
				return err
			}
			if !taken {
				break
			}
			if full, k, err = storage.NewKey(account, scopes, label, db.now()); err != nil {
				return err
			}
		}
		var newest *time.Time
		if err := tx.QueryRow(ctx, `SELECT max(created_at) FROM api_keys WHERE account = $1`, account).Scan(&newest); err != nil {
			return err
		}
		if newest != nil && !k.CreatedAt.After(*newest) {
			k.CreatedAt = newest.UTC().Add(time.Millisecond)
		}
		_, err = tx.Exec(ctx, `INSERT INTO api_keys (prefix, account, label, scopes, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			k.Prefix, k.Account, k.Label, k.Scopes, k.Hash, k.CreatedAt)
		return err
	})
	if err != nil {
		return "", storage.APIKey{}, err
	}
	return full, k, nil
}

// LookupKey returns the record of the key with that prefix, or ErrNotFound.
func (db *DB) LookupKey(ctx context.Context, prefix string) (storage.APIKey, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	k, err := scanKey(db.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE prefix = $1`, prefix))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.APIKey{}, notFound("key", prefix)
	}
	return k, err
}

// VerifyKey authenticates a key string: ErrKeyInvalid when it is
// malformed, unknown or its secret does not match, ErrKeyRevoked when it
// matches a revoked key. The record comes from the box's key cache when
// it was read less than Options.KeyCacheTTL ago. Its last use is written
// at most once a minute.
func (db *DB) VerifyKey(ctx context.Context, key string) (storage.APIKey, error) {
	prefix, _, ok := storage.ParseKey(key)
	if !ok {
		return storage.APIKey{}, storage.ErrKeyInvalid
	}
	k, gen, cached := db.keys.get(prefix, db.keyTTL)
	if !cached {
		var err error
		k, err = db.LookupKey(ctx, prefix)
		if errors.Is(err, storage.ErrNotFound) {
			return storage.APIKey{}, storage.ErrKeyInvalid
		}
		if err != nil {
			return storage.APIKey{}, err
		}
		if db.keyTTL > 0 {
			db.keys.put(prefix, k, gen)
		}
	}
	if err := storage.MatchKey(key, k); err != nil {
		return storage.APIKey{}, err
	}
	now := db.now().Truncate(time.Millisecond)
	if (k.LastUsed.IsZero() || now.Sub(k.LastUsed) >= time.Minute) && db.touching.begin(prefix) {
		// One request of the box writes it; the others of that moment
		// go on (each writing it queued on the key's row lock, and on
		// its commit's flush: 256 writes at the start of a minute under
		// load, measured).
		defer db.touching.end(prefix)
		ctx, cancel := db.ctx(ctx)
		defer cancel()
		// Only the first of the requests of that minute writes it.
		tag, err := db.pool.Exec(ctx, `UPDATE api_keys SET last_used = $2 WHERE prefix = $1 AND (last_used IS NULL OR last_used <= $3)`,
			prefix, now, now.Add(-time.Minute))
		if err == nil {
			// Written now, or by another box within the minute.
			k.LastUsed = now
			if db.keyTTL > 0 && tag.RowsAffected() <= 1 {
				db.keys.put(prefix, k, gen)
			}
		}
	}
	return k, nil
}

// RevokeKey revokes the key (once: a second revocation keeps the first
// time), or ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, prefix string) (storage.APIKey, error) {
	db.keys.forget(prefix)
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	k, err := scanKey(db.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE prefix = $1 RETURNING `+keyCols,
		prefix, db.now().Truncate(time.Millisecond)))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.APIKey{}, notFound("key", prefix)
	}
	return k, err
}

// ListKeys returns the account's keys, revoked ones included, oldest
// first.
func (db *DB) ListKeys(ctx context.Context, account string) ([]storage.APIKey, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys WHERE account = $1 ORDER BY created_at, prefix`, account)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.APIKey, error) { return scanKey(r) })
}

// keySet is a set of key prefixes, for VerifyKey's last-use writes under
// way.
type keySet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// begin adds prefix, reporting false when it was there.
func (s *keySet) begin(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[prefix]; ok {
		return false
	}
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	s.m[prefix] = struct{}{}
	return true
}

func (s *keySet) end(prefix string) {
	s.mu.Lock()
	delete(s.m, prefix)
	s.mu.Unlock()
}
