package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's versions: migrations/NNNN_name.sql, applied in order by
// Migrate (verifyctl db migrate), each in its own transaction with its row
// in schema_migrations. Check, at every start, refuses a database this
// binary does not know how to use.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one version of the schema.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the binary's migrations in order.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %s is not NNNN_name.sql", n)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("postgres: migrations are not numbered 1, 2, 3, …: %d is number %d", m.Version, i+1)
		}
	}
	return ms, nil
}

// ErrSchema is a database whose schema this binary cannot use.
var ErrSchema = errors.New("postgres: schema")

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    bigint PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL
)`

// applied returns the versions recorded in schema_migrations, in order
// (none when the table does not exist).
func applied(ctx context.Context, q querier) ([]int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name = 'schema_migrations')`).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT version FROM schema_migrations WHERE version > 0 ORDER BY version`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (int, error) {
		var v int64
		err := r.Scan(&v)
		return int(v), err
	})
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Check reports whether the database's schema is exactly the binary's:
// every migration applied, none it does not know.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	have, err := applied(ctx, pool)
	if err != nil {
		return fmt.Errorf("postgres: reading schema_migrations: %w", err)
	}
	want := len(ms)
	switch {
	case len(have) == 0:
		return fmt.Errorf("%w: the database has no verifyd schema; run verifyctl db migrate (this binary needs version %d)", ErrSchema, want)
	case have[len(have)-1] > want:
		return fmt.Errorf("%w: the database is at version %d, newer than this binary's %d (a newer verifyd migrated it); run that verifyd or a newer one", ErrSchema, have[len(have)-1], want)
	case len(have) < want || !contiguous(have):
		return fmt.Errorf("%w: the database is at version %d and lacks version%s %s of 1..%d; run verifyctl db migrate", ErrSchema,
			have[len(have)-1], plural(len(missing(have, want))), joinInts(missing(have, want)), want)
	}
	return nil
}

// missing is the versions of 1..want not in have.
func missing(have []int, want int) []int {
	var m []int
	for v := 1; v <= want; v++ {
		if !slices.Contains(have, v) {
			m = append(m, v)
		}
	}
	return m
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func contiguous(vs []int) bool {
	for i, v := range vs {
		if v != i+1 {
			return false
		}
	}
	return true
}

// Migrate applies the migrations the database lacks, in order, each in
// its own transaction with its row in schema_migrations, and returns the
// versions it applied. A database at a version the binary does not know
// is refused. Two Migrates at once are safe: each version's transaction
// first locks schema_migrations' lock row (version 0), so the second waits
// and then finds the version applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	r, err := MigrateReport(ctx, pool)
	return r.Applied, err
}

// MigrateResult is what MigrateReport did.
type MigrateResult struct {
	// Applied are the versions whose SQL ran.
	Applied []int
	// Recorded are versions whose row of schema_migrations had been
	// deleted while their objects stayed: each was applied (a version
	// runs in one transaction with its row, so its objects exist only
	// if all of it ran), and only its row is written again.
	Recorded []int
}

// MigrateReport is Migrate, and says which versions it only recorded.
//
// A version whose row is missing (deleted by hand, or a restore of part
// of the table) is run again; when its SQL fails because its objects
// exist (SQLSTATE 42P07 duplicate table, 42710 duplicate object, 42701
// duplicate column, 42P06 duplicate schema, 42723 duplicate function),
// its row is written and nothing else. Any other failure is returned.
func MigrateReport(ctx context.Context, pool *pgxpool.Pool) (MigrateResult, error) {
	ms, err := Migrations()
	if err != nil {
		return MigrateResult{}, err
	}
	return migrate(ctx, pool, ms, len(ms))
}

// isDuplicateObject reports an error of DDL whose object exists.
func isDuplicateObject(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42P07", "42710", "42701", "42P06", "42723":
		return true
	}
	return false
}

// migrate is Migrate up to version upTo (a test's older schema).
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []Migration, upTo int) (MigrateResult, error) {
	var res MigrateResult
	// Two CREATE TABLE IF NOT EXISTS at once may both find the table
	// absent, and the second fail on PostgreSQL's catalog (23505, 42710
	// for the row type, 42P07): the table is then there, and a second try
	// sees it.
	for attempt := 0; ; attempt++ {
		_, err := pool.Exec(ctx, createMigrationsTable)
		var pe *pgconn.PgError
		if err == nil {
			break
		}
		if attempt < 2 && errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710") {
			continue
		}
		return res, fmt.Errorf("postgres: creating schema_migrations: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (0, 'lock', $1)
		ON CONFLICT (version) DO NOTHING`, time.Now().UTC()); err != nil {
		return res, fmt.Errorf("postgres: the lock row of schema_migrations: %w", err)
	}
	for _, m := range ms[:upTo] {
		ran, recorded := false, false
		// READ COMMITTED (inRowTx): after waiting for the lock row, the
		// statements that follow see what the transaction before
		// committed.
		err := inRowTx(ctx, pool, func(tx pgx.Tx) error {
			ran, recorded = false, false
			// The lock row (version 0) orders concurrent migrations:
			// the second waits here, then finds the version applied. It
			// is a lock, not a write, so the DDL that follows is allowed
			// on CockroachDB, which refuses DDL after a write in one
			// transaction; the version's row is written last.
			if _, err := tx.Exec(ctx, `SELECT version FROM schema_migrations WHERE version = 0 FOR UPDATE`); err != nil {
				return err
			}
			have, err := applied(ctx, tx)
			if err != nil {
				return err
			}
			if len(have) > 0 && have[len(have)-1] > len(ms) {
				return fmt.Errorf("%w: the database is at version %d, newer than this binary's %d", ErrSchema, have[len(have)-1], len(ms))
			}
			if slices.Contains(have, m.Version) {
				return nil
			}
			// A savepoint, so that a version found applied can still
			// write its row in this transaction.
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, m.SQL); err != nil {
				_ = sp.Rollback(ctx)
				if !isDuplicateObject(err) {
					return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
				}
				recorded = true
			} else if err := sp.Commit(ctx); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, time.Now().UTC()); err != nil {
				return err
			}
			ran = !recorded
			return nil
		})
		if err != nil {
			return res, err
		}
		switch {
		case ran:
			res.Applied = append(res.Applied, m.Version)
		case recorded:
			res.Recorded = append(res.Recorded, m.Version)
		}
	}
	return res, nil
}

// Versions reports the schema versions applied to the database (none when
// it has no verifyd schema) and the newest this binary knows.
func Versions(ctx context.Context, pool *pgxpool.Pool) (have []int, known int, err error) {
	ms, err := Migrations()
	if err != nil {
		return nil, 0, err
	}
	have, err = applied(ctx, pool)
	return have, len(ms), err
}

// MigrateDSN is Migrate on a connection of its own to dsn.
func MigrateDSN(ctx context.Context, dsn string) ([]int, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer pool.Close()
	return Migrate(ctx, pool)
}
