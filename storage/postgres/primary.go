package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The primary. A box writes to one PostgreSQL server, the primary; under
// a failover manager (Patroni, pg_auto_failover, a managed service) the
// primary may die and a standby be promoted in its place. The DSN names
// every server (host=a,b port=p,q) and pgx connects to the first that
// takes writes: target_session_attrs=read-write, which Open sets when the
// DSN names several and does not say (a box has nothing to do with a
// read-only server).
//
// pgx checks a server only when it connects. A server that turns
// read-only under open connections (a switchover that demotes it without
// a restart) answers a write with SQLSTATE 25006: the connection is then
// closed (OnPgError), the pool reset, so that every new connection looks
// for the primary again, and the watch below runs at once.
//
// The watch asks the server, every watchEvery (watchEveryDown while it is
// not ready), whether it is a writable primary, within watchTimeout. Its
// last answer is Ready (the /readyz of cmd/verifyd), the metric
// verifyd_storage_pg_ready, and a log line at each change: the database
// out of reach, a standby, back (after how long, which server), the
// primary changed (another server than before).

// The watch's pace and bound.
const (
	watchEvery     = 2 * time.Second
	watchEveryDown = 500 * time.Millisecond
	watchTimeout   = 2 * time.Second
)

// ErrNotReady is Ready's error while the box cannot write to a primary.
var ErrNotReady = errors.New("postgres: no writable primary")

// primaryState is what the watch found last.
type primaryState struct {
	ready  bool
	reason string    // why not ready: "unreachable", "read-only"
	since  time.Time // of the current state
}

// primaryWatch is the state of DB.watch.
type primaryWatch struct {
	state atomic.Pointer[primaryState]
	wake  chan struct{} // run the watch now (a read-only error)
	// last is the server the box last wrote to, "" before the first,
	// timeline its timeline; reconcile is set when the box is to look
	// for the charges it answered (reconcile.go).
	mu        sync.Mutex
	last      string
	timeline  string
	reconcile bool
	from      time.Time // the reconciliation covers the journal's window before this
	lastOK    time.Time // the last check that found a writable primary
}

// reconcileTimeout bounds one reconciliation.
const reconcileTimeout = 30 * time.Second

// readWrite makes cfg's connections look for a server that takes writes
// when dsn names several servers and does not choose the target session
// itself. With one server there is none other to look for: the check
// would only add a round trip to every new connection (on a slow link
// it made a heartbeat's new connection miss its deadline), and the watch
// sees a read-only server anyway.
func readWrite(cfg *pgxpool.Config, dsn string) {
	if strings.Contains(dsn, "target_session_attrs") {
		return
	}
	hosts := map[string]bool{fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port): true}
	for _, f := range cfg.ConnConfig.Fallbacks { // a host's TLS variants too
		hosts[fmt.Sprintf("%s:%d", f.Host, f.Port)] = true
	}
	if len(hosts) > 1 {
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
}

// onReadOnly closes a connection whose server refused a write for being
// read-only (25006) and wakes the watch; pgx's own handler (close on
// FATAL) runs for the rest.
func (db *DB) onReadOnly(prev pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(c *pgconn.PgConn, pe *pgconn.PgError) bool {
		if pe.Code == "25006" {
			readOnlyErrors.Inc()
			select {
			case db.primary.wake <- struct{}{}:
			default:
			}
			return false
		}
		if prev != nil {
			return prev(c, pe)
		}
		return true
	}
}

// Ready reports whether the box can write to a primary: nil, or an error
// wrapping ErrNotReady that says why (out of reach, read-only) and since
// when. It reads the watch's last answer: no query.
func (db *DB) Ready() error {
	st := db.primary.state.Load()
	if st == nil || st.ready {
		return nil
	}
	return fmt.Errorf("%w: %s for %s", ErrNotReady, st.reason, time.Since(st.since).Round(100*time.Millisecond))
}

// watch runs the primary's check until Close.
func (db *DB) watch() {
	defer db.wg.Done()
	t := time.NewTimer(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		case <-db.primary.wake:
		}
		ready := db.checkPrimary()
		if ready {
			t.Reset(watchEvery)
		} else {
			t.Reset(watchEveryDown)
		}
	}
}

// checkPrimary asks the database whether it is a writable primary and
// notes the answer; it resets the pool when the server is a standby.
func (db *DB) checkPrimary() bool {
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	var standby bool
	var server, timeline string
	// The timeline is the first part of the WAL file's name: a promotion
	// starts a new one, whatever the server's address (a virtual IP
	// stays the same).
	err := db.pool.QueryRow(ctx, `SELECT current_setting('transaction_read_only')::bool,
		coalesce(host(inet_server_addr()) || ':' || inet_server_port(), 'local socket'),
		CASE WHEN pg_is_in_recovery() THEN '' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END`).Scan(&standby, &server, &timeline)
	now := time.Now()
	next := primaryState{ready: err == nil && !standby, since: now}
	if !next.ready && db.leases != nil {
		// The blocks' rows may be lost with this primary: no part is
		// taken from them any more (a part in flight is charged from the
		// available credits if its block is gone).
		db.leases.retireAll()
	}
	switch {
	case err != nil:
		next.reason = "unreachable"
	case standby:
		next.reason = "read-only"
		// Every connection goes: new ones look for the primary.
		db.pool.Reset()
	}
	prev := db.primary.state.Load()
	again, from := false, time.Time{}
	if next.ready {
		// Another server or timeline than the last one written to: a
		// failover the box may not even have seen as an outage (it took
		// less than the watch's period).
		db.primary.mu.Lock()
		last, lastTL := db.primary.last, db.primary.timeline
		db.primary.last, db.primary.timeline = server, timeline
		// What to look for: the charges answered in the journal's window
		// before the database went away, counted from the last check
		// that found it writable (before the outage's start, which the
		// watch sees up to a period late), however long it was away.
		pending := func() {
			at := db.primary.lastOK
			if !db.primary.reconcile || at.Before(db.primary.from) {
				db.primary.from = at
			}
			db.primary.reconcile = true
		}
		if last != "" && (last != server || lastTL != timeline) {
			primaryChanges.Inc()
			if db.leases != nil {
				db.leases.retireAll()
			}
			db.log.Warn("the database's primary changed", "from", last, "to", server, "timeline_from", lastTL, "timeline", timeline)
			pending()
		}
		if prev != nil && !prev.ready {
			pending()
		}
		db.primary.lastOK = now
		again, from = db.primary.reconcile, db.primary.from
		db.primary.mu.Unlock()
	}
	db.notePrimary(prev, &next, err, server)
	if again {
		// After the state: the box serves while it reconciles.
		rctx, rcancel := context.WithTimeout(context.Background(), reconcileTimeout)
		_, _, rerr := db.reconcile(rctx, from.Add(-journalWindow))
		rcancel()
		if rerr != nil {
			db.log.Warn("reconciliation after the database came back failed; tried again at the next check", "err", rerr)
		} else {
			db.primary.mu.Lock()
			db.primary.reconcile = false
			db.primary.mu.Unlock()
		}
	}
	return next.ready
}

// notePrimary records the watch's new state when it differs from prev:
// Ready's answer, verifyd_storage_pg_ready and a log line.
func (db *DB) notePrimary(prev, next *primaryState, err error, server string) {
	if prev != nil && prev.ready == next.ready && prev.reason == next.reason {
		return // no change: keep the state's start
	}
	db.primary.state.Store(next)
	if next.ready {
		pgReady().Set(1)
	} else {
		pgReady().Set(0)
	}
	switch {
	case !next.ready && err != nil:
		db.log.Warn("the database is out of reach: requests that need it answer 500 and /readyz 503 until it is back", "err", err)
	case !next.ready:
		db.log.Warn("the database server is a standby (read-only): connecting again to find the primary", "server", server)
	case prev != nil:
		db.log.Warn("the database is writable again", "after", next.since.Sub(prev.since).Round(time.Millisecond), "server", server)
	}
}
