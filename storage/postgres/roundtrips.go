package postgres

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// Round trips to the database are what a fleet's validation waits for,
// so they are counted (verifyd_storage_pg_round_trips_total): a round
// trip is a write to a database connection after a read from it, or its
// first write. pgx sends a whole pipeline (a Batch, or the statements of
// one Exec) in one write and then reads the answers, so this counts the
// exchanges a call makes, whatever it sends in each; a write split in
// several (a message larger than a TLS record) counts once.

// countRoundTrips makes every connection of cfg count its round trips.
func countRoundTrips(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t := &tripConn{Conn: c}
		t.read.Store(true) // the first write starts a round trip
		return t, nil
	}
}

// tripConn counts the round trips on one connection.
type tripConn struct {
	net.Conn
	// read is set by a read and cleared by a write: a write that finds
	// it set starts a round trip.
	read atomic.Bool
}

func (c *tripConn) Write(p []byte) (int, error) {
	if c.read.Swap(false) {
		roundTrips.Inc()
	}
	return c.Conn.Write(p)
}

func (c *tripConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.Store(true)
	}
	return n, err
}
