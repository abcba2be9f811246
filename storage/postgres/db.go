package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage"
)

// Options configure a DB.
type Options struct {
	// Now is the clock of the records' times, used as it is. Default:
	// the database's clock, advanced by the monotonic clock between two
	// readings (clock.go), so that no box's wall clock step moves the
	// fleet's times. Tests set it.
	Now func() time.Time
	// Box names this verifyd among the fleet's, in its boot row (see
	// boots.go) and the notes of the ledger entries that release its
	// holds. Default the host name. Two boxes may share a name: what
	// belongs to a process is named by its boot, a random id.
	Box string
	// Lease is how long a box not heard from (its heartbeat, every
	// Lease/3) is taken as stopped: its holds are released and its
	// pending idempotency keys taken over. Default 30 s.
	Lease time.Duration
	// IdemTTL is how long an idempotency record is kept (spec §7: 24 h).
	// Default 24 h.
	IdemTTL time.Duration
	// KeyCacheTTL is how long a box reuses an API key record it read
	// (VerifyKey), and so how long a key revoked on another box may still
	// work on this one. Default 5 s; negative: none.
	KeyCacheTTL time.Duration
	// CallTimeout bounds one call of the storage contract (its database
	// time, retries included): past it the call fails. Default 30 s.
	CallTimeout time.Duration
	// CreditLeases lets the box hold blocks of an account's credits that
	// validate on it many times a second, and hand each validation its
	// credit from the block in memory (leases.go): a validation then
	// costs the database its charge alone. verifyd sets it from
	// storage.credit_leases (default on).
	CreditLeases bool
	// ChargeGather is how long a charge or hold waits for others of its
	// account before its transaction starts, while that account's
	// charges arrive on this box faster than one per ChargeGather
	// (combine.go): PostgreSQL's commit_delay, applied only under load.
	// Default DefaultChargeGather; negative: none.
	ChargeGather time.Duration
	// Logger receives the package's log lines; default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxConns is the connections a box keeps to the database at most,
// unless the DSN says pool_max_conns.
const DefaultMaxConns = 32

// DefaultKeyCacheTTL is Options.KeyCacheTTL's default.
const DefaultKeyCacheTTL = 5 * time.Second

// DefaultChargeGather is Options.ChargeGather's default.
const DefaultChargeGather = 5 * time.Millisecond

// DefaultLease is Options.Lease's default.
const DefaultLease = 30 * time.Second

// DB is the storage contract on PostgreSQL. So far it implements
// the whole storage.Store, and storage.JobLeases.
type DB struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	box     string
	boot    string
	lease   time.Duration
	idemTTL time.Duration
	log     *slog.Logger
	keyTTL  time.Duration
	keys    readCache[storage.APIKey] // VerifyKey's, by prefix
	// touching: the keys whose last use a request of this box writes
	touching keySet
	plans    readCache[storage.Plan] // AccountPlan's, by account
	// callTimeout bounds one contract call (ctx).
	callTimeout time.Duration
	// asyncCommit: holds and charges commit without waiting for their WAL
	// flush (PostgreSQL; CockroachDB has no such setting); see Hold and
	// charge.
	asyncCommit bool
	// genericPlans: a charge transaction keeps its statements' generic
	// plans (plan_cache_mode; PostgreSQL).
	genericPlans bool

	seen      atomic.Int64 // lastSeen, Unix ns
	flushSlot atomic.Uint32

	charges   combiner
	factReads factReads

	idem idemLocal // this box's requests holding idempotency keys

	// clock is the fleet's clock (clock.go) that now reads, unless
	// Options.Now was set (then nil); wall is the box's own.
	clock *dbClock
	wall  wallClock

	live liveHolds // this boot's holds a caller may still end (sweepHolds)
	// leases are the box's blocks of credits (leases.go); nil: none
	// (Options.CreditLeases).
	leases *creditLeases

	primary primaryWatch // the server written to (primary.go)
	journal journal      // the charges answered last (reconcile.go)

	stop   chan struct{}
	beaten chan struct{} // a heartbeat reached the database (maintain)
	wg     sync.WaitGroup
	closed sync.Once
}

var (
	_ storage.Accounts    = (*DB)(nil)
	_ storage.Keys        = (*DB)(nil)
	_ storage.Balances    = (*DB)(nil)
	_ storage.Idempotency = (*DB)(nil)
	_ storage.Results     = (*DB)(nil)
	_ storage.Jobs        = (*DB)(nil)
	_ storage.JobLeases   = (*DB)(nil)
	_ storage.Outbox      = (*DB)(nil)
	_ storage.Users       = (*DB)(nil)
	_ storage.Secrets     = (*DB)(nil)
	_ storage.Store       = (*DB)(nil)
)

// Open connects to the database at dsn and checks that its schema is
// this binary's (Check): a database to migrate first is refused. It
// registers this process's boot, releases the holds of stopped boxes
// (Reap) and keeps its boot alive until Close.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// A transaction a box left open — its link went silent between two
	// statements, or before its COMMIT — holds the rows it locked (an
	// account's) for every box until PostgreSQL ends it: end it once no
	// call could still be waiting on it (TestFleetSilentBoxFreesItsAccount).
	callTimeout := opts.CallTimeout
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt((callTimeout + time.Second).Milliseconds(), 10)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgx's default (4 on this size of machine) queues a busy box's
		// validations in front of the pool.
		cfg.MaxConns = DefaultMaxConns
	}
	countRoundTrips(&cfg.ConnConfig.Config)
	readWrite(cfg, dsn)
	db := &DB{}
	cfg.ConnConfig.OnPgError = db.onReadOnly(cfg.ConnConfig.OnPgError)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := Check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	*db = DB{
		pool: pool, callTimeout: callTimeout,
		box: opts.Box, boot: newBootID(), lease: opts.Lease, idemTTL: opts.IdemTTL, log: opts.Logger,
		stop: make(chan struct{}), beaten: make(chan struct{}, 1),
	}
	db.primary.wake = make(chan struct{}, 1)
	if opts.Now != nil {
		db.now = func() time.Time { return opts.Now().UTC() }
	} else {
		db.clock = &dbClock{}
		db.now = db.clock.now
	}
	if db.box == "" {
		db.box, _ = os.Hostname()
	}
	if db.lease <= 0 {
		db.lease = DefaultLease
	}
	if db.idemTTL <= 0 {
		db.idemTTL = storage.DefaultIdemTTL
	}
	switch db.keyTTL = opts.KeyCacheTTL; {
	case db.keyTTL == 0:
		db.keyTTL = DefaultKeyCacheTTL
	case db.keyTTL < 0:
		db.keyTTL = 0
	}
	switch db.charges.gather = opts.ChargeGather; {
	case db.charges.gather == 0:
		db.charges.gather = DefaultChargeGather
	case db.charges.gather < 0:
		db.charges.gather = 0
	}
	if db.log == nil {
		db.log = slog.Default()
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.asyncCommit = !strings.Contains(version, "CockroachDB")
	db.genericPlans = db.asyncCommit
	if err := db.syncClock(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: read the database's clock: %w", err)
	}
	if err := db.registerBoot(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: register this box: %w", err)
	}
	if _, err := db.Reap(); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: release the holds of stopped boxes: %w", err)
	}
	db.checkPrimary()
	if opts.CreditLeases {
		db.leases = newCreditLeases()
		db.wg.Add(1)
		go db.leaseLoop()
	}
	db.wg.Add(3)
	go db.heartbeat()
	go db.maintain()
	go db.watch()
	return db, nil
}

// Close ends this boot: its row is deleted, the holds it still has are
// released (a validation in flight now answers 500 uncharged), and the
// connections are closed.
func (db *DB) Close() error {
	var err error
	db.closed.Do(func() {
		close(db.stop)
		db.wg.Wait()
		ctx, cancel := db.ctx(context.Background())
		defer cancel()
		// Its job slices are free at once (freeSlice would make the
		// others wait for the lease), then its boot goes.
		_, err = db.pool.Exec(ctx, `UPDATE job_slices SET owner = '', leased_at = NULL WHERE owner = $1`, db.boot)
		if err != nil {
			db.log.Error("cannot give this box's job slices back; the others take them after the lease", "err", err)
		}
		if _, err = db.pool.Exec(ctx, `DELETE FROM boots WHERE id = $1`, db.boot); err == nil {
			_, err = db.Reap()
		}
		db.pool.Close()
	})
	return err
}

// Abandon closes the connections as a killed process would: the boot row
// stays, and what this process held (holds, job slices, claimed events,
// pending idempotency keys) goes to the other boxes only when its lease
// runs out. For crash tests; Close ends a process.
func (db *DB) Abandon() {
	db.closed.Do(func() {
		close(db.stop)
		db.wg.Wait()
		db.pool.Close()
	})
}

// Boot returns this process's boot id.
func (db *DB) Boot() string { return db.boot }

// ctx is the context of one contract call: the caller's (a request's
// deadline reaches the database), bounded by Options.CallTimeout.
func (db *DB) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, db.callTimeout)
}

// DefaultCallTimeout is Options.CallTimeout's default: past it the API
// answers 500 INTERNAL (docs/fleet.md, "While the database is
// unreachable").
const DefaultCallTimeout = 30 * time.Second

// isUnique reports a unique-key violation (23505).
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// flush returns once the database's WAL is on disk up to now: a
// synchronous commit of a write (one of the box's flush_marks rows)
// flushes the WAL up to its commit record, and so every commit made before
// it. A transaction that writes nothing flushes nothing (PostgreSQL
// commits it asynchronously). Concurrent flushes share the disk's flush
// (group commit); the slots keep them off each other's row locks.
//
// A flush that fails is not tried again: the charges it covers were
// committed without waiting for their WAL, and when the failure is the
// database going down, a crash may have lost them; a retry would then
// flush the restarted server's WAL, succeed, and have them answered 200
// though they are gone (TestFleetDatabaseRestart saw it: 359 charge
// entries for 360 keys answered, once in a loaded run, with retries over
// about a second). Their callers get the error: a 500, which the
// Idempotency-Key replays when the charge survived and runs again when it
// did not.
//
// It runs on conn, the connection the commits it covers were made on:
// that connection does not survive a restart of the server, so a flush
// that succeeds was made by the server that holds those commits (on
// another connection, a flush could reach a restarted server that lost
// them, and succeed).
func (db *DB) flush(ctx context.Context, conn *pgxpool.Conn) error {
	slot := db.flushSlot.Add(1) % flushSlots
	_, err := conn.Exec(ctx, flushSQL, db.boot, int32(slot))
	return err
}

// flushSQL is the flush's write, of a box's slot (boot, slot).
const flushSQL = `INSERT INTO flush_marks (boot, slot, n) VALUES ($1, $2, 1)
	ON CONFLICT (boot, slot) DO UPDATE SET n = flush_marks.n + 1`

// flushSlots is how many flush_marks rows a box spreads its flushes over.
const flushSlots = 64

// isConnErr reports a failure to reach the database (no SQLSTATE): running
// the requests of a batch one by one would only fail them one by one.
func isConnErr(err error) bool {
	var pe *pgconn.PgError
	return !errors.As(err, &pe)
}

// isForeignKey reports a foreign-key violation (23503): a row of an
// account that does not exist.
func isForeignKey(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

func notFound(what, id string) error { return fmt.Errorf("%w: %s %q", storage.ErrNotFound, what, id) }

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
