package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

const accountCols = `id, name, plan, webhook_secret, created_at, secret_rotated_at`

func scanAccount(r scanner) (storage.Account, error) {
	var a storage.Account
	var plan string
	var rotated *time.Time
	if err := r.Scan(&a.ID, &a.Name, &plan, &a.WebhookSecret, &a.CreatedAt, &rotated); err != nil {
		return storage.Account{}, err
	}
	a.Plan = storage.Plan(plan)
	a.CreatedAt = a.CreatedAt.UTC()
	a.SecretRotatedAt = fromOpt(rotated)
	return a, nil
}

// CreateAccount creates an account with a new id and webhook secret; its
// balance starts at 0.
func (db *DB) CreateAccount(ctx context.Context, name string, plan storage.Plan) (storage.Account, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	for {
		a, err := storage.NewAccount(name, plan, db.now())
		if err != nil {
			return storage.Account{}, err
		}
		_, err = db.pool.Exec(ctx, `INSERT INTO accounts (id, name, plan, webhook_secret, created_at) VALUES ($1, $2, $3, $4, $5)`,
			a.ID, a.Name, string(a.Plan), a.WebhookSecret, a.CreatedAt)
		if isUnique(err) {
			continue // the id is taken: another
		}
		if err != nil {
			return storage.Account{}, err
		}
		return a, nil
	}
}

// GetAccount returns the account, or ErrNotFound.
func (db *DB) GetAccount(ctx context.Context, id string) (storage.Account, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	a, err := scanAccount(db.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Account{}, notFound("account", id)
	}
	return a, err
}

// AccountPlan returns the account's plan (httpapi.PlanReader: the guard
// reads it on every API request). A box reuses a plan it read for
// KeyCacheTTL, as it does a key record: a plan changed on another box
// applies here within that time, one changed on this box at once.
func (db *DB) AccountPlan(ctx context.Context, id string) (storage.Plan, error) {
	p, gen, ok := db.plans.get(id, db.keyTTL)
	if ok {
		return p, nil
	}
	a, err := db.GetAccount(ctx, id)
	if err != nil {
		return "", err
	}
	if db.keyTTL > 0 {
		db.plans.put(id, a.Plan, gen)
	}
	return a.Plan, nil
}

// ListAccounts returns every account, ordered by id.
func (db *DB) ListAccounts(ctx context.Context) ([]storage.Account, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+accountCols+` FROM accounts ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.Account, error) { return scanAccount(r) })
}

// SetPlan changes the account's plan.
func (db *DB) SetPlan(ctx context.Context, id string, plan storage.Plan) (storage.Account, error) {
	if err := storage.CheckPlan(plan); err != nil {
		return storage.Account{}, err
	}
	a, err := db.updateAccount(ctx, id, `UPDATE accounts SET plan = $2 WHERE id = $1 RETURNING `+accountCols, string(plan))
	db.plans.forget(id)
	return a, err
}

// RotateWebhookSecret gives the account a new webhook secret.
func (db *DB) RotateWebhookSecret(ctx context.Context, id string) (storage.Account, error) {
	return db.updateAccount(ctx, id, `UPDATE accounts SET webhook_secret = $2, secret_rotated_at = $3 WHERE id = $1 RETURNING `+accountCols,
		storage.NewWebhookSecret(), db.now().Truncate(time.Millisecond))
}

func (db *DB) updateAccount(ctx context.Context, id, sql string, args ...any) (storage.Account, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	a, err := scanAccount(db.pool.QueryRow(ctx, sql, append([]any{id}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Account{}, notFound("account", id)
	}
	return a, err
}
