package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
)

// KeyStore keeps the receipt signing key set (server/receipt.KeyStore) in
// the database, one document for the fleet. A save replaces the document
// only if it is still the one this box last loaded (compare and swap): two
// boxes creating the first key at once, or rotating at once, cannot both
// win; the loser gets ErrKeysChanged and loads the winner's set.
type KeyStore struct {
	db     *DB
	mu     sync.Mutex
	loaded []byte
}

// ErrKeysChanged is a save refused because another box changed the key
// set since this box loaded it.
var ErrKeysChanged = errors.New("postgres: the signing key set was changed by another box; load it again")

// SigningKeys returns the fleet's signing key store.
func (db *DB) SigningKeys() *KeyStore { return &KeyStore{db: db} }

// LoadKeys returns the stored document; (nil, nil) when there is none.
func (k *KeyStore) LoadKeys() ([]byte, error) {
	ctx, cancel := k.db.ctx(context.Background())
	defer cancel()
	var v []byte
	err := k.db.pool.QueryRow(ctx, `SELECT doc FROM signing_keys WHERE id = 1`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		v, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.loaded = v
	k.mu.Unlock()
	return v, nil
}

// SaveKeys replaces the document if it is still the one last loaded.
func (k *KeyStore) SaveKeys(data []byte) error {
	ctx, cancel := k.db.ctx(context.Background())
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	q, args := `INSERT INTO signing_keys (id, doc) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, []any{data}
	if k.loaded != nil {
		q, args = `UPDATE signing_keys SET doc = $1 WHERE id = 1 AND doc = $2`, []any{data, k.loaded}
	}
	tag, err := k.db.pool.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrKeysChanged
	}
	k.loaded = data
	return nil
}
