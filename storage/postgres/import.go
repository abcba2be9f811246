package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Import writes a box's export (storage.(*DB).Export, verifyctl db export)
// into an empty fleet database, in one transaction: all of it or nothing.
// It keeps every id, ledger sequence, history id and position, so receipts,
// cursors and idempotency keys go on working; it rebuilds what the fleet
// keeps besides (the accounts' credit counters, the slices of the jobs
// still running, the history id sequence) and checks every account's
// ledger, entry by entry, against its credits. A database that holds an
// account already is refused.

// ImportStats counts what Import wrote, by record type.
type ImportStats map[string]int

// ErrNotEmpty is an import into a database that holds data.
var ErrNotEmpty = errors.New("postgres: the database holds accounts already; import only into an empty fleet database")

// Import reads records with next until it reports none left (ok false).
func (db *DB) Import(next func() (rec storage.Record, ok bool, err error)) (ImportStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	stats := ImportStats{}
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		// Lock out a second import before looking: the migrations' lock
		// row (no LOCK TABLE: CockroachDB has none).
		if _, err := tx.Exec(ctx, `SELECT version FROM schema_migrations WHERE version = 0 FOR UPDATE`); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrNotEmpty
		}
		im := &importer{ctx: ctx, tx: tx, stats: stats, rows: map[string][][]any{}}
		for {
			rec, ok, err := next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if err := im.add(rec); err != nil {
				return fmt.Errorf("%s record: %w", rec.Type, err)
			}
		}
		return im.finish()
	})
	if err != nil {
		return nil, err
	}
	return stats, nil
}

// importer buffers rows per table and copies them in batches.
type importer struct {
	ctx   context.Context
	tx    pgx.Tx
	stats ImportStats
	rows  map[string][][]any
	order []string // tables in the order first seen
	jobs  []storage.Job
}

// copyCols are the columns Import copies into each table.
var copyCols = map[string][]string{
	"accounts":     {"id", "name", "plan", "webhook_secret", "created_at", "secret_rotated_at"},
	"api_keys":     {"prefix", "account", "label", "scopes", "hash", "created_at", "revoked_at", "last_used"},
	"ledger":       {"account", "seq", "at", "kind", "amount", "delta", "balance", "held", "hold_seq", "ref", "note"},
	"results":      {"id", "account", "pos", "history_id", "kind", "email", "status", "score", "job_id", "job_index", "latency_ms", "probed_at", "cached_from", "receipt"},
	"cache":        {"account", "email", "result_id", "probed_at"},
	"idem":         {"account", "endpoint", "key", "request_hash", "done", "boot", "status", "header_names", "header_vals", "body", "created_at", "expires_at"},
	"jobs":         {"id", "account", "status", "list_name", "webhook_url", "total", "processed", "counts", "reasons", "reserved", "used", "refunded", "created_at", "started_at", "completed_at", "error"},
	"job_addrs":    {"job_id", "idx", "slice", "addr"},
	"outbox":       {"id", "account", "next_attempt", "event"},
	"dead_letters": {"id", "account", "event"},
	"hook_last":    {"account", "event"},
	"users":        {"id", "email_lc", "doc"},
	"invites":      {"id", "account", "doc"},
	"sessions":     {"id", "user_id", "last_seen", "expires_at", "doc"},
	"secrets":      {"name", "value"},
	"signing_keys": {"id", "doc"},
}

const copyBatch = 5000

func (im *importer) put(table string, row ...any) error {
	if _, seen := im.rows[table]; !seen {
		im.order = append(im.order, table)
	}
	im.rows[table] = append(im.rows[table], row)
	if len(im.rows[table]) >= copyBatch {
		return im.flushAll()
	}
	return nil
}

// flushAll copies every buffered row, tables in the order first seen (an
// export gives accounts before what refers to them).
func (im *importer) flushAll() error {
	for _, t := range im.order {
		rows := im.rows[t]
		if len(rows) == 0 {
			continue
		}
		if _, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{t}, copyCols[t], pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy into %s: %w", t, err)
		}
		im.rows[t] = rows[:0]
	}
	return nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func jsonDoc(v any) ([]byte, error) { return json.Marshal(v) }

func (im *importer) add(rec storage.Record) error {
	im.stats[rec.Type]++
	switch rec.Type {
	case storage.RecAccount:
		a := rec.Account
		return im.put("accounts", a.ID, a.Name, string(a.Plan), a.WebhookSecret, a.CreatedAt, optTime(a.SecretRotatedAt))
	case storage.RecKey:
		k := rec.Key
		return im.put("api_keys", k.Prefix, k.Account, k.Label, k.Scopes, k.Hash, k.CreatedAt, optTime(k.RevokedAt), optTime(k.LastUsed))
	case storage.RecEntry:
		e := rec.Entry
		var hs *int64
		if e.HoldSeq != 0 {
			v := int64(e.HoldSeq)
			hs = &v
		}
		return im.put("ledger", e.Account, int64(e.Seq), e.Time, e.Kind.String(), e.Amount, e.Delta, e.Balance, e.Held, hs, e.Ref, e.Note)
	case storage.RecResult:
		r := rec.Result
		var job *string
		var index *int
		if r.Kind == storage.KindBatch {
			job, index = &r.JobID, &r.JobIndex
		}
		return im.put("results", r.ID, r.Account, rec.Pos, int64(r.HistoryID), r.Kind, r.Email, r.Status, r.Score, job, index,
			r.LatencyMs, r.ProbedAt, r.CachedFrom, r.Receipt)
	case storage.RecCache:
		c := rec.Cache
		return im.put("cache", c.Account, c.Email, c.ResultID, c.ProbedAt)
	case storage.RecIdem:
		r := rec.Idem
		names := make([]string, len(r.Response.Header))
		vals := make([]string, len(r.Response.Header))
		for i, h := range r.Response.Header {
			names[i], vals[i] = h.Name, h.Value
		}
		hash := r.RequestHash
		if hash == nil {
			hash = []byte{}
		}
		// A pending record names no live boot: a retry takes it over.
		return im.put("idem", r.Account, r.Endpoint, r.Key, hash, r.Done, "", r.Response.Status, names, vals, r.Response.Body,
			r.CreatedAt, r.ExpiresAt)
	case storage.RecJob:
		j := rec.Job
		if len(rec.Addrs) != j.Total {
			return fmt.Errorf("job %s has %d addresses, not %d", j.ID, len(rec.Addrs), j.Total)
		}
		if err := im.put("jobs", j.ID, j.Account, string(j.Status), j.ListName, j.WebhookURL, j.Total, j.Processed,
			countsJSON(j.Counts), countsJSON(j.Reasons),
			j.Reserved, j.Used, j.Refunded, j.CreatedAt, optTime(j.StartedAt), optTime(j.CompletedAt), j.Error); err != nil {
			return err
		}
		slices := storage.JobSliceCount(j.Total)
		for i, a := range rec.Addrs {
			if err := im.put("job_addrs", j.ID, i, storage.JobSliceOf(a, slices), a); err != nil {
				return err
			}
		}
		if j.Active() {
			im.jobs = append(im.jobs, *j)
		}
		return nil
	case storage.RecOutbox, storage.RecDeadLetter, storage.RecHookLast:
		ev := rec.Event
		v, err := jsonDoc(ev)
		if err != nil {
			return err
		}
		switch rec.Type {
		case storage.RecOutbox:
			return im.put("outbox", ev.ID, ev.Account, ev.NextAttempt, v)
		case storage.RecDeadLetter:
			return im.put("dead_letters", ev.ID, ev.Account, v)
		}
		return im.put("hook_last", ev.Account, v)
	case storage.RecUser:
		v, err := jsonDoc(rec.User)
		if err != nil {
			return err
		}
		return im.put("users", rec.User.ID, strings.ToLower(rec.User.Email), v)
	case storage.RecInvite:
		v, err := jsonDoc(rec.Invite)
		if err != nil {
			return err
		}
		return im.put("invites", rec.Invite.ID, rec.Invite.Account, v)
	case storage.RecSession:
		s := rec.Session
		v, err := jsonDoc(s)
		if err != nil {
			return err
		}
		return im.put("sessions", s.ID, s.User, s.LastSeen, s.ExpiresAt, v)
	case storage.RecSecret:
		return im.put("secrets", rec.Name, rec.Value)
	case storage.RecSigningKeys:
		return im.put("signing_keys", 1, rec.Value)
	}
	return fmt.Errorf("unknown record type %q", rec.Type)
}

// finish copies what is left, then rebuilds and checks what the fleet
// keeps besides the records.
func (im *importer) finish() error {
	if err := im.flushAll(); err != nil {
		return err
	}
	ctx, tx := im.ctx, im.tx
	// Every account's ledger, entry by entry; its counters from the last.
	rows, err := tx.Query(ctx, `SELECT id FROM accounts ORDER BY id`)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range ids {
		rows, err := tx.Query(ctx, `SELECT seq, kind, amount, delta, balance, held, hold_seq FROM ledger WHERE account = $1 ORDER BY seq`, id)
		if err != nil {
			return err
		}
		var bal, held, seq int64
		var kind string
		var amount, delta, eb, eh int64
		var hs *int64
		n := int64(0)
		_, err = pgx.ForEachRow(rows, []any{&seq, &kind, &amount, &delta, &eb, &eh, &hs}, func() error {
			n++
			if seq != n {
				return fmt.Errorf("account %s: ledger entry %d has seq %d", id, n, seq)
			}
			bal += delta
			switch {
			case kind == "hold":
				held += amount
			case (kind == "charge" || kind == "release") && hs != nil:
				held -= amount
			}
			if eb != bal || eh != held {
				return fmt.Errorf("account %s: ledger entry %d says balance %d held %d, the entries before it %d and %d", id, seq, eb, eh, bal, held)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if held != 0 {
			return fmt.Errorf("account %s: %d credits held by validations in flight: export a stopped box", id, held)
		}
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = $2, held = 0, next_seq = $3 WHERE id = $1`, id, bal, n+1); err != nil {
			return err
		}
	}
	// History ids go on after the highest imported.
	var top *int64
	if err := tx.QueryRow(ctx, `SELECT max(history_id) FROM results`).Scan(&top); err != nil {
		return err
	}
	if top != nil {
		if _, err := tx.Exec(ctx, `SELECT setval('history_ids', $1)`, *top); err != nil {
			return err
		}
	}
	// The slices of the jobs still to do, with what they have done.
	now := time.Now()
	for _, j := range im.jobs {
		if _, err := tx.Exec(ctx, `INSERT INTO job_slices (job_id, slice, account, size, processed, created_at)
			SELECT a.job_id, a.slice, $2, count(*), count(r.id), $3 FROM job_addrs a
			LEFT JOIN results r ON r.job_id = a.job_id AND r.job_index = a.idx
			WHERE a.job_id = $1 GROUP BY a.job_id, a.slice`, j.ID, j.Account, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM job_slices WHERE job_id = $1 AND processed >= size`, j.ID); err != nil {
			return err
		}
	}
	return nil
}
