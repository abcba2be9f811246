package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage"
)

// Idempotency records (spec §7.3), as on Pebble (storage/pebble/idem.go), shared
// by the fleet: a key begun on one box replays on any other. A pending
// record names the boot processing its request; while that boot is alive
// (on any box) a duplicate is IdemInFlight, and once it has stopped (see
// boots.go) the next BeginIdem takes the key over, since that request
// never answered. Unlike Pebble's, every write here is durable: the
// database syncs each commit.

const idemCols = `request_hash, done, status, header_names, header_vals, body, created_at, expires_at`

func scanIdem(ref storage.IdemRef, row scanner, extra ...any) (storage.IdemRecord, error) {
	rec := storage.IdemRecord{IdemRef: ref}
	var names, vals []string
	dest := append([]any{&rec.RequestHash, &rec.Done, &rec.Response.Status, &names, &vals, &rec.Response.Body,
		&rec.CreatedAt, &rec.ExpiresAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return storage.IdemRecord{}, err
	}
	if len(names) != len(vals) {
		return storage.IdemRecord{}, errors.New("postgres: idempotency record with unpaired headers")
	}
	for i := range names {
		rec.Response.Header = append(rec.Response.Header, storage.HeaderField{Name: names[i], Value: vals[i]})
	}
	rec.CreatedAt, rec.ExpiresAt = rec.CreatedAt.UTC(), rec.ExpiresAt.UTC()
	return rec, nil
}

// BeginIdem looks up the record of ref and, when there is no live one,
// writes a pending one (see storage.IdemOutcome).
func (db *DB) BeginIdem(ctx context.Context, ref storage.IdemRef, requestHash []byte) (storage.IdemOutcome, storage.IdemRecord, error) {
	if err := storage.CheckIdemRef(ref); err != nil {
		return 0, storage.IdemRecord{}, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// Under the key's lock, this box's requests holding it cannot change
	// (see idemlocal.go).
	defer db.idem.lock(ref)()
	running := db.idem.running(ref)
	var out storage.IdemOutcome
	var rec storage.IdemRecord
	for try := 0; ; try++ {
		// One connection for the read and the flush of a replay (flush).
		conn, err := db.pool.Acquire(ctx)
		if err != nil {
			if try == 0 {
				return 0, storage.IdemRecord{}, err // nothing written
			}
			// The try before may have written the pending record: a
			// server that stops ends a backend waiting for its
			// synchronous standby with FATAL after its commit, and the
			// error pgx then reports says nothing reached the server
			// (TestBeginIdemCommittedThenCut; TestFleetFailoverSync's
			// key answered 409 for a minute after the failover).
			return db.beganIdem(ref, running, 0, storage.IdemRecord{}, err)
		}
		out, rec, err = db.beginIdem(ctx, conn, ref, requestHash, running)
		conn.Release()
		// A pooled connection a link reset broke fails before anything
		// reaches the server, and the pool drops it: again, on another,
		// as long as that is so (a reset breaks every connection the
		// pool holds, at most its size). Without it, the request went on
		// without its key (fail-open) and, its key answered already,
		// answered 500 instead of the replay (TestFleetLinkResets, a key
		// sent again after the resets, once in make test;
		// TestBeginIdemAfterLinkReset).
		if err != nil && try <= int(db.pool.Config().MaxConns) && pgconn.SafeToRetry(err) && ctx.Err() == nil {
			idemRetries.Inc()
			continue
		}
		return db.beganIdem(ref, running, out, rec, err)
	}
}

// beganIdem records what BeginIdem's last try left.
func (db *DB) beganIdem(ref storage.IdemRef, running bool, out storage.IdemOutcome, rec storage.IdemRecord, err error) (storage.IdemOutcome, storage.IdemRecord, error) {
	switch {
	case err != nil && !running:
		// It may have committed: a pending record no request holds.
		db.idem.lost(ref)
	case err == nil && out == storage.IdemNew:
		db.idem.begin(ref)
	}
	return out, rec, err
}

func (db *DB) beginIdem(ctx context.Context, conn *pgxpool.Conn, ref storage.IdemRef, requestHash []byte, running bool) (storage.IdemOutcome, storage.IdemRecord, error) {
	now := db.now().Truncate(time.Millisecond)
	for {
		var out storage.IdemOutcome
		var rec storage.IdemRecord
		raced := false
		err := inRowTx(ctx, conn, func(tx pgx.Tx) error {
			raced = false
			var mine, alive bool
			old, err := scanIdem(ref, tx.QueryRow(ctx, `SELECT `+idemCols+`, boot = $4,
				EXISTS (SELECT 1 FROM boots WHERE boots.id = idem.boot AND boots.seen_at >= now() - $5::interval)
				FROM idem WHERE account = $1 AND endpoint = $2 AND key = $3 FOR UPDATE`,
				ref.Account, ref.Endpoint, ref.Key, db.boot, db.lease), &mine, &alive)
			if mine {
				// This box knows whether its request still runs.
				alive = running
			}
			found := err == nil
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if found && old.ExpiresAt.After(now) {
				switch {
				case !bytes.Equal(old.RequestHash, requestHash):
					out, rec = storage.IdemMismatch, old
					return nil
				case old.Done:
					out, rec = storage.IdemReplay, old
					return nil
				case alive:
					out, rec = storage.IdemInFlight, old
					return nil
				}
				// Pending in a boot that stopped, or in a request of
				// this box that ended: that request never answered, so
				// this one takes the key over.
			}
			rec = storage.IdemRecord{IdemRef: ref, RequestHash: append([]byte{}, requestHash...), CreatedAt: now, ExpiresAt: now.Add(db.idemTTL)}
			out = storage.IdemNew
			if found {
				_, err = tx.Exec(ctx, `UPDATE idem SET request_hash = $4, done = false, boot = $5, status = 0,
					header_names = '{}', header_vals = '{}', body = NULL, created_at = $6, expires_at = $7
					WHERE account = $1 AND endpoint = $2 AND key = $3`,
					ref.Account, ref.Endpoint, ref.Key, rec.RequestHash, db.boot, rec.CreatedAt, rec.ExpiresAt)
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO idem (account, endpoint, key, request_hash, boot, created_at, expires_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (account, endpoint, key) DO NOTHING`,
				ref.Account, ref.Endpoint, ref.Key, rec.RequestHash, db.boot, rec.CreatedAt, rec.ExpiresAt)
			if err != nil {
				return err
			}
			// Another BeginIdem inserted it meanwhile: read it again.
			raced = tag.RowsAffected() == 0
			return nil
		})
		if isForeignKey(err) {
			return 0, storage.IdemRecord{}, notFound("account", ref.Account)
		}
		if err != nil {
			return 0, storage.IdemRecord{}, err
		}
		if !raced {
			if out == storage.IdemReplay && db.asyncCommit {
				// The answer replayed may be a charge's whose commit is
				// not flushed yet (see charge): never replay it before.
				if err := db.flush(ctx, conn); err != nil {
					return 0, storage.IdemRecord{}, err
				}
			}
			return out, rec, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, storage.IdemRecord{}, err
		}
	}
}

// completeIdem stores the response of the live pending record of ref;
// without one (it expired) nothing is recorded, as on Pebble.
func completeIdem(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, ref storage.IdemRef, resp storage.IdemResponse, now time.Time) error {
	_, err := q.Exec(ctx, completeIdemSQL, completeIdemArgs(ref, resp, now)...)
	return err
}

const completeIdemSQL = `UPDATE idem SET done = true, boot = '', status = $4, header_names = $5, header_vals = $6, body = $7
	WHERE account = $1 AND endpoint = $2 AND key = $3 AND expires_at > $8`

func completeIdemArgs(ref storage.IdemRef, resp storage.IdemResponse, now time.Time) []any {
	names := make([]string, len(resp.Header))
	vals := make([]string, len(resp.Header))
	for i, h := range resp.Header {
		names[i], vals[i] = h.Name, h.Value
	}
	return []any{ref.Account, ref.Endpoint, ref.Key, resp.Status, names, vals, resp.Body, now}
}

// recordIdemSQL writes the completed record of a key that BeginIdem could
// not record (storage.ChargeRequest.IdemHash): inserted, or over an
// expired record, or over a pending one of the same request (an earlier
// attempt's, on any box, whose BeginIdem committed though its answer was
// lost: that attempt ended without a charge, or this one would replay
// it); a record of another request, or a completed one, is left alone.
const recordIdemSQL = `INSERT INTO idem AS i (account, endpoint, key, request_hash, done, boot, status, header_names, header_vals, body, created_at, expires_at)
	VALUES ($1, $2, $3, $9, true, '', $4, $5, $6, $7, $8, $10)
	ON CONFLICT (account, endpoint, key) DO UPDATE SET request_hash = $9, done = true, boot = '', status = $4,
		header_names = $5, header_vals = $6, body = $7, created_at = $8, expires_at = $10
	WHERE i.expires_at <= $8 OR (NOT i.done AND i.request_hash = $9)`

func recordIdemArgs(ref storage.IdemRef, hash []byte, resp storage.IdemResponse, now time.Time, ttl time.Duration) []any {
	now = now.Truncate(time.Millisecond)
	return append(completeIdemArgs(ref, resp, now), hash, now.Add(ttl))
}

// CompleteIdem stores the response of the request that began ref.
func (db *DB) CompleteIdem(ctx context.Context, ref storage.IdemRef, resp storage.IdemResponse) error {
	if err := storage.CheckIdemRef(ref); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	err := completeIdem(ctx, db.pool, ref, resp, db.now())
	db.idem.end(ref, err == nil)
	return err
}

// AbortIdem deletes this box's pending record of ref, so a retry with the
// same key is processed afresh; a completed record, or another box's, is
// left alone.
func (db *DB) AbortIdem(ctx context.Context, ref storage.IdemRef) error {
	if err := storage.CheckIdemRef(ref); err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	// Only this box's pending record: the key may have been taken over
	// by a retry on another box meanwhile (this one was reaped), whose
	// record must stay.
	_, err := db.pool.Exec(ctx, `DELETE FROM idem WHERE account = $1 AND endpoint = $2 AND key = $3 AND NOT done AND boot = $4`,
		ref.Account, ref.Endpoint, ref.Key, db.boot)
	db.idem.end(ref, err == nil)
	return err
}

// GetIdem returns the live record of ref, or ErrNotFound.
func (db *DB) GetIdem(ctx context.Context, ref storage.IdemRef) (storage.IdemRecord, error) {
	if err := storage.CheckIdemRef(ref); err != nil {
		return storage.IdemRecord{}, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rec, err := scanIdem(ref, db.pool.QueryRow(ctx, `SELECT `+idemCols+` FROM idem
		WHERE account = $1 AND endpoint = $2 AND key = $3 AND expires_at > $4`, ref.Account, ref.Endpoint, ref.Key, db.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.IdemRecord{}, storage.ErrNotFound
	}
	return rec, err
}

// PurgeIdem deletes the records expired by now and returns how many.
// Every box's idempotency loop may run it; they delete disjoint rows.
func (db *DB) PurgeIdem(ctx context.Context) (int, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	tag, err := db.pool.Exec(ctx, `DELETE FROM idem WHERE expires_at <= $1`, db.now())
	return int(tag.RowsAffected()), err
}
