package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Domain knowledge the boxes share (probe.Facts): a fact is a value of a
// kind for a key, until it expires. The newest write wins.

// Fact returns the fact of kind for key; ok is false when there is none
// or it expired.
func (db *DB) Fact(kind, key string) (string, time.Time, bool, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	var v string
	var exp time.Time
	err := db.pool.QueryRow(ctx, `SELECT value, expires_at FROM domain_facts WHERE kind = $1 AND key = $2 AND expires_at > $3`,
		kind, key, db.now()).Scan(&v, &exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, err
	}
	return v, exp.UTC(), true, nil
}

// PutFact records a fact until expires.
func (db *DB) PutFact(kind, key, value string, expires time.Time) error {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	_, err := db.pool.Exec(ctx, `INSERT INTO domain_facts (kind, key, value, expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`, kind, key, value, expires)
	return err
}

// purgeFacts deletes the expired facts.
func (db *DB) purgeFacts() error {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	_, err := db.pool.Exec(ctx, `DELETE FROM domain_facts WHERE expires_at <= $1`, db.now())
	return err
}

// FactsOfKind returns the facts of a kind that have not expired, by key.
func (db *DB) FactsOfKind(kind string) (map[string]string, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT key, value FROM domain_facts WHERE kind = $1 AND expires_at > $2`, kind, db.now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	var k, v string
	for rows.Next() {
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}
