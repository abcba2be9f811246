// Package postgres is verifyd's storage on PostgreSQL (or CockroachDB):
// fleet mode, several verifyd processes on one database as one service
// (docs/fleet.md has the design and the operations guide). DB implements
// the whole storage contract (storage.Store, the suite of
// storage/storagetest), storage.JobLeases (job slices leased to boxes),
// probe.Facts (domain knowledge shared by the boxes), the receipt signing
// key store, and Import (a box's export). Migrate and Check keep the
// versioned schema (migrations/). Every write is one transaction, retried
// on a serialization failure or a deadlock (tx.go); those that change an
// account lock its row first and run at READ COMMITTED; the boxes know of
// each other through their boots (boots.go).
package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxTxAttempts bounds the tries of one transaction that keeps meeting
// serialization failures.
const maxTxAttempts = 10

// retryable reports a failure the transaction may simply be run again
// after: a serialization failure (40001: CockroachDB's retry errors too)
// or a deadlock (40P01).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// inRowTx runs fn in a READ COMMITTED transaction and commits it,
// running it again from the start on a serialization failure or a
// deadlock, with a jittered back-off, up to maxTxAttempts times (fn must
// have no effect outside the transaction: it may run more than once). It
// is for a transaction whose first statement locks the row that orders
// it (SELECT … FOR UPDATE of the
// account): everything it reads after that is under the lock, and a
// transaction that waited for the lock reads the row as the one before it
// left it. At SERIALIZABLE every such wait would end in a serialization
// failure and a retry: fifty validations of one account at once would
// retry fifty times over. CockroachDB runs READ COMMITTED too (23.2+).
func inRowTx(ctx context.Context, pool txStarter, fn func(pgx.Tx) error) error {
	return runTx(ctx, pool, pgx.ReadCommitted, fn)
}

// txStarter is the pool, or one connection of it (a transaction whose
// commit the same connection then flushes: see DB.flush).
type txStarter interface {
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}

var _ txStarter = (*pgxpool.Pool)(nil)
var _ txStarter = (*pgxpool.Conn)(nil)

func runTx(ctx context.Context, pool txStarter, level pgx.TxIsoLevel, fn func(pgx.Tx) error) error {
	var err error
	for attempt := range maxTxAttempts {
		err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: level}, fn)
		if err == nil || !retryable(err) {
			return err
		}
		txRetries.Inc()
		d := time.Duration(1<<min(attempt, 6)) * time.Millisecond
		d += rand.N(d)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(d):
		}
	}
	return err
}
