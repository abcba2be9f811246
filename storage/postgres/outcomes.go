package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Delivery outcomes (storage.Outcomes): the outcomes table, keyed by
// account and event id, so a second report of an event is a no-op
// (ON CONFLICT DO NOTHING); outcome_evidence points at each address's
// latest delivery or hard bounce. Matching reads results through the
// results_verdicts index (migrations/0008_outcomes.sql).

// verdictChunk is how many addresses one matching query asks for.
const verdictChunk = 1000

// LatestVerdicts answers each query with the account's latest result for
// its address probed at or before its time.
func (db *DB) LatestVerdicts(ctx context.Context, account string, qs []storage.VerdictQuery) ([]storage.Verdict, []bool, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.mustExist(ctx, account); err != nil {
		return nil, nil, err
	}
	out := make([]storage.Verdict, len(qs))
	ok := make([]bool, len(qs))
	for lo := 0; lo < len(qs); lo += verdictChunk {
		hi := min(lo+verdictChunk, len(qs))
		emails := make([]string, 0, hi-lo)
		before := make([]time.Time, 0, hi-lo)
		for _, q := range qs[lo:hi] {
			emails = append(emails, storage.CacheEmail(q.Email))
			before = append(before, q.Before.UTC())
		}
		rows, err := db.pool.Query(ctx, `SELECT q.i, `+prefixed("r.", resultCols)+`
			FROM unnest($2::text[], $3::timestamptz[]) WITH ORDINALITY AS q(email, before, i)
			CROSS JOIN LATERAL (SELECT `+resultCols+` FROM results
				WHERE account = $1 AND lower(email) = q.email AND probed_at <= q.before
				ORDER BY probed_at DESC LIMIT 1) r`, account, emails, before)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var i int64
			r, _, err := scanResultWith(rows, &i)
			if err != nil {
				rows.Close()
				return nil, nil, err
			}
			k := lo + int(i) - 1
			out[k], ok[k] = storage.VerdictOf(r), true
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return out, ok, nil
}

const outcomeCols = `account, event_id, email, event, at, source, smtp_code, enhanced, diagnostic, received_at,
	result_id, v_status, v_score, v_reason, v_catch_all, v_mx_host, v_probed_at`

func scanOutcome(row scanner) (storage.Outcome, error) {
	var o storage.Outcome
	v := &o.Verdict
	var probed *time.Time
	err := row.Scan(&o.Account, &o.EventID, &o.Email, &o.Event, &o.At, &o.Source, &o.SMTPCode, &o.Enhanced, &o.Diagnostic,
		&o.ReceivedAt, &v.ResultID, &v.Status, &v.Score, &v.Reason, &v.CatchAll, &v.MXHost, &probed)
	o.At, o.ReceivedAt, v.ProbedAt = o.At.UTC(), o.ReceivedAt.UTC(), fromOpt(probed)
	return o, err
}

// PutOutcomes stores the account's new outcomes in one transaction.
func (db *DB) PutOutcomes(ctx context.Context, account string, outs []storage.Outcome) ([]bool, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	now := db.now().Truncate(time.Millisecond)
	for i := range outs {
		outs[i].Account, outs[i].ReceivedAt = account, now
		if err := storage.CheckOutcome(&outs[i]); err != nil {
			return nil, err
		}
	}
	if err := db.mustExist(ctx, account); err != nil {
		return nil, err
	}
	var fresh []bool
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		fresh = make([]bool, len(outs))
		byID := make(map[string]int, len(outs))
		for lo := 0; lo < len(outs); lo += verdictChunk {
			hi := min(lo+verdictChunk, len(outs))
			b := &pgx.Batch{}
			for i := lo; i < hi; i++ {
				o := &outs[i]
				v := &o.Verdict
				b.Queue(`INSERT INTO outcomes (`+outcomeCols+`, email_key)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
					ON CONFLICT (account, event_id) DO NOTHING`,
					account, o.EventID, o.Email, o.Event, o.At, o.Source, o.SMTPCode, o.Enhanced, o.Diagnostic, o.ReceivedAt,
					v.ResultID, v.Status, v.Score, v.Reason, v.CatchAll, v.MXHost, optTime(v.ProbedAt), storage.CacheEmail(o.Email))
			}
			br := tx.SendBatch(ctx, b)
			for i := lo; i < hi; i++ {
				tag, err := br.Exec()
				if err != nil {
					br.Close()
					return err
				}
				if tag.RowsAffected() == 1 {
					fresh[i] = true
					byID[outs[i].EventID] = i
				}
			}
			if err := br.Close(); err != nil {
				return err
			}
		}
		latest := map[string]*storage.Outcome{}
		for _, i := range byID {
			o := &outs[i]
			if !storage.IsAddressEvidence(*o) {
				continue
			}
			k := storage.CacheEmail(o.Email)
			if p := latest[k]; p == nil || o.At.After(p.At) {
				latest[k] = o
			}
		}
		b := &pgx.Batch{}
		for k, o := range latest {
			b.Queue(`INSERT INTO outcome_evidence (account, email_key, event_id, at) VALUES ($1, $2, $3, $4)
				ON CONFLICT (account, email_key) DO UPDATE SET event_id = excluded.event_id, at = excluded.at
				WHERE outcome_evidence.at < excluded.at`, account, k, o.EventID, o.At)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return fresh, err
}

// ScanOutcomes calls fn with the outcomes at or after since, of the
// account or of every account ("").
func (db *DB) ScanOutcomes(ctx context.Context, account string, since time.Time, fn func(storage.Outcome) error) error {
	var rows pgx.Rows
	var err error
	if account == "" {
		rows, err = db.pool.Query(ctx, `SELECT `+outcomeCols+` FROM outcomes WHERE at >= $1 ORDER BY account, at`, since.UTC())
	} else {
		if err := db.mustExist(ctx, account); err != nil {
			return err
		}
		rows, err = db.pool.Query(ctx, `SELECT `+outcomeCols+` FROM outcomes WHERE account = $1 AND at >= $2 ORDER BY at`, account, since.UTC())
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		o, err := scanOutcome(rows)
		if err != nil {
			return err
		}
		if err := fn(o); err != nil {
			if errors.Is(err, storage.ErrStop) {
				return nil
			}
			return err
		}
	}
	return rows.Err()
}

// AddressEvidence returns the address's latest delivery or hard bounce.
func (db *DB) AddressEvidence(ctx context.Context, account, email string) (storage.Outcome, bool, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	o, err := scanOutcome(db.pool.QueryRow(ctx, `SELECT `+prefixed("o.", outcomeCols)+` FROM outcome_evidence e
		JOIN outcomes o ON o.account = e.account AND o.event_id = e.event_id
		WHERE e.account = $1 AND e.email_key = $2`, account, storage.CacheEmail(email)))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Outcome{}, false, nil
	}
	return o, err == nil, err
}

// EvidenceAccounts returns the accounts with address evidence: one probe
// of outcome_evidence's primary key per account.
func (db *DB) EvidenceAccounts(ctx context.Context) ([]string, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT a.id FROM accounts a
		WHERE EXISTS (SELECT 1 FROM outcome_evidence e WHERE e.account = a.id)`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// DeleteOutcomes deletes every outcome of the account.
func (db *DB) DeleteOutcomes(ctx context.Context, account string) (int, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.mustExist(ctx, account); err != nil {
		return 0, err
	}
	var n int
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM outcome_evidence WHERE account = $1`, account); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM outcomes WHERE account = $1`, account)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// PurgeOutcomes deletes the outcomes that happened before the time.
func (db *DB) PurgeOutcomes(ctx context.Context, before time.Time) (int, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var n int
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM outcome_evidence WHERE at < $1`, before.UTC()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM outcomes WHERE at < $1`, before.UTC())
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// OutcomeSettings returns the account's settings.
func (db *DB) OutcomeSettings(ctx context.Context, account string) (storage.OutcomeSettings, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var v string
	err := db.pool.QueryRow(ctx, `SELECT value FROM outcome_settings WHERE account = $1`, account).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.OutcomeSettings{}, db.mustExist(ctx, account)
	}
	if err != nil {
		return storage.OutcomeSettings{}, err
	}
	var s storage.OutcomeSettings
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return storage.OutcomeSettings{}, fmt.Errorf("postgres: outcome settings of %s: %w", account, err)
	}
	return s, nil
}

// SetOutcomeSettings replaces the account's settings.
func (db *DB) SetOutcomeSettings(ctx context.Context, account string, s storage.OutcomeSettings) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	if err := db.mustExist(ctx, account); err != nil {
		return err
	}
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = db.pool.Exec(ctx, `INSERT INTO outcome_settings (account, value) VALUES ($1, $2)
		ON CONFLICT (account) DO UPDATE SET value = excluded.value`, account, string(v))
	return err
}
