package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage"
)

// Options configure a DB.
type Options struct {
	// Now is the clock of the records' times; default time.Now. Tests
	// set it.
	Now func() time.Time
	// Box names this verifyd among the fleet's (its holds are its own: it
	// releases them when it starts again after a crash). Default the
	// host name.
	Box string
}

// DB is the storage contract on PostgreSQL. So far it implements
// storage.Accounts and storage.Keys.
type DB struct {
	pool *pgxpool.Pool
	now  func() time.Time
	box  string
}

var (
	_ storage.Accounts = (*DB)(nil)
	_ storage.Keys     = (*DB)(nil)
)

// Open connects to the database at dsn and checks that its schema is
// this binary's (Check): a database to migrate first is refused.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := Check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	box := opts.Box
	if box == "" {
		box, _ = os.Hostname()
	}
	return &DB{pool: pool, now: func() time.Time { return now().UTC() }, box: box}, nil
}

// Close closes the connections.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// ctx is the context of the contract's calls, which take none (as the
// Pebble backend's): a bound on one call's database time.
func (db *DB) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// callTimeout bounds one storage call: past it the API answers 500
// INTERNAL (docs/fleet.md, "While the database is unreachable").
const callTimeout = 30 * time.Second

// isUnique reports a unique-key violation (23505).
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func notFound(what, id string) error { return fmt.Errorf("%w: %s %q", storage.ErrNotFound, what, id) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{storage.ErrInvalid}, args...)...)
}

func holdNotActive(h storage.Hold) error {
	return fmt.Errorf("%w: %s/%d", storage.ErrHoldNotActive, h.Account, h.Seq)
}

// fromOpt reads a nullable timestamptz: NULL is the zero time.
func fromOpt(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// scanner is a pgx.Row or pgx.Rows.
type scanner interface{ Scan(dest ...any) error }
