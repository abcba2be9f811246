package postgres

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The fleet's clock. Every time a box writes or compares (ledger entries,
// idempotency expiry, history positions, webhook due times, cache ages,
// purges) must mean the same on every box, whatever each box's own wall
// clock says: an NTP step or a resumed VM moves one box's clock by
// seconds or hours, and a box an hour ahead would see the others'
// idempotency records as expired and purge them. So a box takes its time
// from the database: at Open and at every heartbeat it reads the
// database's clock (clock_timestamp()), and in between it advances that
// reading by Go's monotonic clock, which no step of the wall clock moves.
// The time never goes back (a new reading behind the last time given out
// is held until it catches up). Leases were already on the database's
// clock (boots.seen_at = now()).
//
// The box's own wall clock is only compared with it, for the operator:
// verifyd_storage_pg_clock_skew_seconds, and a warning when they differ by
// more than clockSkewWarn. Tests that need to see time pass set
// Options.Now instead, which is used as it is.

// clockSkewWarn is the difference between a box's wall clock and the
// database's above which the box logs a warning.
const clockSkewWarn = 2 * time.Second

type dbClock struct {
	mu   sync.Mutex
	base time.Time // the database's time at mono
	mono time.Time // this process's time.Now() (its monotonic reading) then
	last time.Time // the last time given out
	// warned: the last reading's skew was over clockSkewWarn.
	warned bool
}

// now is the database's time now, by the last reading and the monotonic
// time since.
func (c *dbClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.base.Add(time.Since(c.mono))
	if t.Before(c.last) {
		t = c.last
	}
	c.last = t
	return t
}

// set takes a reading of the database's clock, db, made by a round trip
// sent at sent and answered at recv (both time.Now(), monotonic), and
// returns the skew of wall, the box's own clock, from it.
func (c *dbClock) set(db, sent, recv time.Time, wall time.Time) time.Duration {
	mid := sent.Add(recv.Sub(sent) / 2)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.mono = db.UTC(), mid
	return wall.Sub(db.Add(time.Since(mid)))
}

// syncClock reads the database's clock (at Open and every heartbeat);
// the heartbeat's own statement returns it (see heartbeat), so this is
// for Open.
func (db *DB) syncClock(ctx context.Context) error {
	if db.clock == nil {
		return nil
	}
	sent := time.Now()
	var t time.Time
	if err := db.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return err
	}
	db.tookClock(t, sent, time.Now())
	return nil
}

// tookClock takes a reading of the database's clock made between sent and
// recv.
func (db *DB) tookClock(t, sent, recv time.Time) {
	if db.clock == nil {
		return
	}
	skew := db.clock.set(t, sent, recv, db.wall.now())
	clockSkew.Set(skew.Seconds())
	over := math.Abs(skew.Seconds()) > clockSkewWarn.Seconds()
	db.clock.mu.Lock()
	warn := over && !db.clock.warned
	back := !over && db.clock.warned
	db.clock.warned = over
	db.clock.mu.Unlock()
	switch {
	case warn:
		db.log.Warn("this box's clock differs from the database's; verifyd keeps the fleet's times on the database's clock (check NTP on both)",
			"box", db.box, "skew", skew.Round(time.Millisecond))
	case back:
		db.log.Info("this box's clock agrees with the database's again", "box", db.box, "skew", skew.Round(time.Millisecond))
	}
}

// wallClock is the box's own wall clock, only ever compared with the
// database's (a test steps it).
type wallClock struct {
	f atomic.Pointer[func() time.Time]
}

func (w *wallClock) now() time.Time {
	if f := w.f.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

func (w *wallClock) set(f func() time.Time) { w.f.Store(&f) }
