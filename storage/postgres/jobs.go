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

// Batch jobs. A job is a row of jobs, its addresses rows of job_addrs,
// each in the slice of its domain, and its results rows of results (with
// job_id and job_index): one result per address, whatever box writes it,
// since PutJobResults inserts only the indexes without one, under the
// account's row lock. Credits are reserved by CreateJob and settled once
// by FinishJob, a conditional update of an active job: a second FinishJob
// (another box) gets ErrJobState, so the job's webhook event, written in
// that transaction, is enqueued once.
//
// The boxes split a job by leasing its slices (LeaseSlices, the
// storage.JobLeases interface): see the job_slices table in
// migrations/0003_jobs.sql.

const jobCols = `id, account, status, list_name, webhook_url, total, processed, counts, reasons, reserved, used, refunded,
	created_at, started_at, completed_at, error`

func scanJob(row scanner) (storage.Job, error) {
	var j storage.Job
	var status, counts, reasons string
	var started, completed *time.Time
	err := row.Scan(&j.ID, &j.Account, &status, &j.ListName, &j.WebhookURL, &j.Total, &j.Processed, &counts, &reasons,
		&j.Reserved, &j.Used, &j.Refunded, &j.CreatedAt, &started, &completed, &j.Error)
	if err != nil {
		return storage.Job{}, err
	}
	j.Status = storage.JobStatus(status)
	j.CreatedAt, j.StartedAt, j.CompletedAt = j.CreatedAt.UTC(), fromOpt(started), fromOpt(completed)
	if counts != "{}" {
		if err := json.Unmarshal([]byte(counts), &j.Counts); err != nil {
			return storage.Job{}, fmt.Errorf("postgres: job %s counts: %w", j.ID, err)
		}
	}
	if reasons != "{}" {
		if err := json.Unmarshal([]byte(reasons), &j.Reasons); err != nil {
			return storage.Job{}, fmt.Errorf("postgres: job %s reasons: %w", j.ID, err)
		}
	}
	return j, nil
}

// countsJSON writes a job's counts as the JSON object its column holds
// ('{}' for none).
func countsJSON(m map[string]int) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // a map[string]int always encodes
	return string(b)
}

func jobNotFound(id string) error { return notFound("job", id) }

// CreateJob writes a queued job: its row, its addresses and slices and
// the reservation of one credit per address, in one transaction, or fails
// with an *InsufficientCreditsError; ErrExists when the id is taken.
func (db *DB) CreateJob(ctx context.Context, spec storage.JobSpec) (storage.Job, error) {
	if err := storage.CheckJobSpec(&spec); err != nil {
		return storage.Job{}, err
	}
	if err := storage.CheckJobAddresses(spec.Addresses); err != nil {
		return storage.Job{}, err
	}
	now := db.now().Truncate(time.Millisecond)
	n := len(spec.Addresses)
	j := storage.Job{
		ID: spec.ID, Account: spec.Account, Status: storage.JobQueued, ListName: spec.ListName,
		WebhookURL: spec.WebhookURL, Total: n, Reserved: int64(n), CreatedAt: now,
	}
	slices := storage.JobSliceCount(n)
	addrRows := make([][]any, n)
	sizes := make([]int, slices)
	for i, a := range spec.Addresses {
		s := storage.JobSliceOf(a, slices)
		sizes[s]++
		addrRows[i] = []any{j.ID, i, s, a}
	}
	var sliceRows [][]any
	for s, size := range sizes {
		if size > 0 {
			sliceRows = append(sliceRows, []any{j.ID, s, j.Account, size, now})
		}
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	err := inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		acct, err := lockAccount(ctx, tx, spec.Account)
		if err != nil {
			return err
		}
		if acct.balance-acct.held < int64(n) {
			return &storage.InsufficientCreditsError{Current: acct.balance, Held: acct.held, Needed: int64(n)}
		}
		_, err = tx.Exec(ctx, `INSERT INTO jobs (id, account, status, list_name, webhook_url, total, reserved, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, j.ID, j.Account, string(j.Status), j.ListName, j.WebhookURL, n, int64(n), now)
		if isUnique(err) {
			return fmt.Errorf("%w: job %s", storage.ErrExists, j.ID)
		}
		if err != nil {
			return err
		}
		if _, err := acct.entry(ctx, tx, j.Account, now, storage.EntryReserve, int64(n), -int64(n), 0, 0, j.ID, ""); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"job_addrs"}, []string{"job_id", "idx", "slice", "addr"}, pgx.CopyFromRows(addrRows)); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"job_slices"}, []string{"job_id", "slice", "account", "size", "created_at"}, pgx.CopyFromRows(sliceRows)); err != nil {
			return err
		}
		if spec.Idem != nil {
			resp, err := spec.Respond(j)
			if err != nil {
				return err
			}
			if spec.IdemHash != nil {
				// The key BeginIdem could not record (storage.JobSpec.IdemHash).
				if _, err := tx.Exec(ctx, recordIdemSQL, recordIdemArgs(*spec.Idem, spec.IdemHash, resp, now, db.idemTTL)...); err != nil {
					return err
				}
			} else if err := completeIdem(ctx, tx, *spec.Idem, resp, now); err != nil {
				return err
			}
		}
		return saveAccount(ctx, tx, j.Account, acct)
	})
	if err != nil {
		return storage.Job{}, err
	}
	db.charged(spec.Idem, nil)
	return j, nil
}

// Job returns the job, or ErrNotFound.
func (db *DB) Job(ctx context.Context, id string) (storage.Job, error) {
	if err := storage.CheckJobID(id); err != nil {
		return storage.Job{}, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	j, err := scanJob(db.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Job{}, jobNotFound(id)
	}
	return j, err
}

// AccountJob returns the job if the account owns it, else ErrNotFound.
func (db *DB) AccountJob(ctx context.Context, account, id string) (storage.Job, error) {
	j, err := db.Job(ctx, id)
	if err == nil && j.Account != account {
		return storage.Job{}, jobNotFound(id)
	}
	return j, err
}

// jobTx runs fn in a transaction holding the job's account's row lock,
// with the job's row as it is under it.
func (db *DB) jobTx(ctx context.Context, id string, fn func(ctx context.Context, tx pgx.Tx, acct *acctRow, j *storage.Job) error) error {
	j0, err := db.Job(ctx, id)
	if err != nil {
		return err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	return inRowTx(ctx, db.pool, func(tx pgx.Tx) error {
		acct, err := lockAccount(ctx, tx, j0.Account)
		if err != nil {
			return err
		}
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return jobNotFound(id)
		}
		if err != nil {
			return err
		}
		if err := fn(ctx, tx, &acct, &j); err != nil {
			return err
		}
		return saveAccount(ctx, tx, j.Account, acct)
	})
}

// StartJob moves a queued job to running; a running job is returned
// unchanged (another box started it).
func (db *DB) StartJob(ctx context.Context, id string) (storage.Job, error) {
	var out storage.Job
	err := db.jobTx(ctx, id, func(ctx context.Context, tx pgx.Tx, _ *acctRow, j *storage.Job) error {
		switch j.Status {
		case storage.JobRunning:
		case storage.JobQueued:
			j.Status, j.StartedAt = storage.JobRunning, db.now().Truncate(time.Millisecond)
			if _, err := tx.Exec(ctx, `UPDATE jobs SET status = $2, started_at = $3 WHERE id = $1`, id, string(j.Status), j.StartedAt); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: job %s is %s", storage.ErrJobState, id, j.Status)
		}
		out = *j
		return nil
	})
	return out, err
}

// PutJobResults stores results of a running job and its progress in one
// transaction: each result (its history row, kind batch) and cache
// entry. An index that already has a result keeps it and is not counted
// twice, whichever box wrote it.
func (db *DB) PutJobResults(ctx context.Context, id string, results []storage.JobResult) (storage.Job, error) {
	var out storage.Job
	err := db.jobTx(ctx, id, func(ctx context.Context, tx pgx.Tx, _ *acctRow, j *storage.Job) error {
		if j.Status != storage.JobRunning {
			return fmt.Errorf("%w: job %s is %s, not running", storage.ErrJobState, id, j.Status)
		}
		idx := make([]int32, 0, len(results))
		byIndex := make(map[int]storage.Result, len(results))
		for _, jr := range results {
			if err := storage.CheckJobIndex(id, jr.Index, j.Total); err != nil {
				return err
			}
			if _, dup := byIndex[jr.Index]; !dup {
				byIndex[jr.Index] = jr.Result
				idx = append(idx, int32(jr.Index))
			}
		}
		rows, err := tx.Query(ctx, `SELECT job_index FROM results WHERE job_id = $1 AND job_index = ANY($2)`, id, idx)
		if err != nil {
			return err
		}
		have, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		for _, i := range have {
			delete(byIndex, int(i))
		}
		now := db.now()
		rs := make([]storage.Result, 0, len(byIndex))
		for _, i := range idx {
			r, ok := byIndex[int(i)]
			if !ok {
				continue
			}
			r.Account, r.Kind, r.JobID, r.JobIndex = j.Account, storage.KindBatch, id, int(i)
			if err := storage.PrepareResult(&r, now); err != nil {
				return err
			}
			rs = append(rs, r)
		}
		if err := insertResults(ctx, tx, j.Account, rs); err != nil {
			return err
		}
		perSlice := map[int32]int32{}
		sliceOf, err := slicesOf(ctx, tx, id, rs)
		if err != nil {
			return err
		}
		for i := range rs {
			j.CountResult(&rs[i])
			perSlice[sliceOf[rs[i].JobIndex]]++
		}
		for s, k := range perSlice {
			if _, err := tx.Exec(ctx, `UPDATE job_slices SET processed = processed + $3 WHERE job_id = $1 AND slice = $2`, id, s, k); err != nil {
				return err
			}
		}
		if len(perSlice) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM job_slices WHERE job_id = $1 AND processed >= size`, id); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET processed = $2, counts = $3, reasons = $4 WHERE id = $1`,
			id, j.Processed, countsJSON(j.Counts), countsJSON(j.Reasons)); err != nil {
			return err
		}
		out = j.Clone()
		return nil
	})
	return out, err
}

// slicesOf returns the slice of each result's address.
func slicesOf(ctx context.Context, tx pgx.Tx, id string, rs []storage.Result) (map[int]int32, error) {
	idx := make([]int32, len(rs))
	for i, r := range rs {
		idx[i] = int32(r.JobIndex)
	}
	out := make(map[int]int32, len(rs))
	if len(rs) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT idx, slice FROM job_addrs WHERE job_id = $1 AND idx = ANY($2)`, id, idx)
	if err != nil {
		return nil, err
	}
	var i, s int32
	_, err = pgx.ForEachRow(rows, []any{&i, &s}, func() error {
		out[int(i)] = s
		return nil
	})
	return out, err
}

// insertResults writes prepared results of one account, with their
// history ids, positions and cache entries; tx holds the account's row
// lock (positions: one query for the whole write).
func insertResults(ctx context.Context, tx pgx.Tx, account string, rs []storage.Result) error {
	if len(rs) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT nextval('history_ids') FROM generate_series(1, $1)`, len(rs))
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	if len(ids) != len(rs) {
		return fmt.Errorf("postgres: %d history ids for %d results", len(ids), len(rs))
	}
	lo, hi := rs[0].ProbedAt.UnixMilli(), rs[0].ProbedAt.UnixMilli()
	for _, r := range rs {
		lo, hi = min(lo, r.ProbedAt.UnixMilli()), max(hi, r.ProbedAt.UnixMilli())
	}
	// The highest position taken in each millisecond of the write's span.
	ps := newPositions(lo, hi)
	rows, err = tx.Query(ctx, topsSQL, topsArgs(account, lo, hi)...)
	if err != nil {
		return err
	}
	var m int64
	if _, err := pgx.ForEachRow(rows, []any{&m}, func() error {
		ps.addTop(m)
		return nil
	}); err != nil {
		return err
	}
	copyRows := make([][]any, len(rs))
	emails := make([]string, 0, len(rs))
	rids := make([]string, 0, len(rs))
	probed := make([]time.Time, 0, len(rs))
	for i := range rs {
		r := &rs[i]
		r.HistoryID = uint64(ids[i])
		pos, err := ps.next(ctx, tx, account, r.ProbedAt.UnixMilli())
		if err != nil {
			return err
		}
		var job *string
		var index *int
		if r.Kind == storage.KindBatch {
			job, index = &r.JobID, &r.JobIndex
		}
		copyRows[i] = []any{r.ID, r.Account, pos, int64(r.HistoryID), r.Kind, r.Email, r.Status, r.Score, job, index,
			r.LatencyMs, r.ProbedAt, r.CachedFrom, r.Receipt}
		if r.CachedFrom == "" && !r.SkipCache {
			emails = append(emails, storage.CacheEmail(r.Email))
			rids = append(rids, r.ID)
			probed = append(probed, r.ProbedAt)
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"results"}, []string{"id", "account", "pos", "history_id", "kind", "email",
		"status", "score", "job_id", "job_index", "latency_ms", "probed_at", "cached_from", "receipt"}, pgx.CopyFromRows(copyRows)); err != nil {
		return err
	}
	if len(emails) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, `INSERT INTO cache (account, email, result_id, probed_at)
		SELECT $1, e, r, p FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS t (e, r, p)
		ON CONFLICT (account, email) DO UPDATE SET result_id = excluded.result_id, probed_at = excluded.probed_at`,
		account, emails, rids, probed)
	return err
}

// FinishJob ends an active job and settles its credits, in one
// transaction with the job's new row and the event f.Event returns (see
// storage.Jobs): exactly one FinishJob of a job succeeds, on any box.
func (db *DB) FinishJob(ctx context.Context, id string, f storage.JobFinish) (storage.Job, error) {
	if err := storage.CheckJobFinish(f); err != nil {
		return storage.Job{}, err
	}
	var out storage.Job
	err := db.jobTx(ctx, id, func(ctx context.Context, tx pgx.Tx, acct *acctRow, j *storage.Job) error {
		if !j.Active() {
			return fmt.Errorf("%w: job %s already %s", storage.ErrJobState, id, j.Status)
		}
		if f.Status == storage.JobCompleted && j.Processed != j.Total {
			return fmt.Errorf("%w: job %s has %d of %d results", storage.ErrJobState, id, j.Processed, j.Total)
		}
		now := db.now().Truncate(time.Millisecond)
		j.Status, j.Error, j.CompletedAt = f.Status, f.Error, now
		j.Used = int64(j.Processed)
		j.Refunded = j.Reserved - j.Used
		if _, err := acct.entry(ctx, tx, j.Account, now, storage.EntryUse, j.Used, 0, 0, 0, id, ""); err != nil {
			return err
		}
		if j.Refunded > 0 {
			if _, err := acct.entry(ctx, tx, j.Account, now, storage.EntryRefund, j.Refunded, j.Refunded, 0, 0, id, ""); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET status = $2, error = $3, completed_at = $4, used = $5, refunded = $6 WHERE id = $1`,
			id, string(j.Status), j.Error, now, j.Used, j.Refunded); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM job_slices WHERE job_id = $1`, id); err != nil {
			return err
		}
		if f.Event != nil {
			ev, err := f.Event(*j)
			if err != nil {
				return err
			}
			if ev != nil {
				if err := db.stageEvent(ctx, tx, ev, now); err != nil {
					return err
				}
			}
		}
		out = *j
		return nil
	})
	return out, err
}

// ListJobs returns the jobs with that status, oldest first.
func (db *DB) ListJobs(ctx context.Context, status storage.JobStatus) ([]storage.Job, error) {
	return db.jobs(ctx, `WHERE status = $1 ORDER BY created_at, id`, string(status))
}

// ListAccountJobs returns up to limit (≤ 0: all) of the account's jobs,
// newest first (those of one millisecond by id, as on Pebble).
func (db *DB) ListAccountJobs(ctx context.Context, account string, limit int) ([]storage.Job, error) {
	if limit <= 0 {
		return db.jobs(ctx, `WHERE account = $1 ORDER BY created_at DESC, id`, account)
	}
	return db.jobs(ctx, `WHERE account = $1 ORDER BY created_at DESC, id LIMIT $2`, account, limit)
}

func (db *DB) jobs(ctx context.Context, where string, args ...any) ([]storage.Job, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs `+where, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Job, error) { return scanJob(row) })
}

// addresses calls fn for each (idx, addr) row of the query, until fn
// returns an error (storage.ErrStop: stop quietly).
func (db *DB) addresses(ctx context.Context, id string, fn func(int, string) error, q string, args ...any) error {
	if err := storage.CheckJobID(id); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var i int
	var addr string
	_, err = pgx.ForEachRow(rows, []any{&i, &addr}, func() error { return fn(i, addr) })
	if errors.Is(err, storage.ErrStop) {
		return nil
	}
	return err
}

// PendingAddresses calls fn, in index order, with the job's addresses
// that have no result yet.
func (db *DB) PendingAddresses(ctx context.Context, id string, fn func(index int, addr string) error) error {
	return db.addresses(ctx, id, fn, `SELECT a.idx, a.addr FROM job_addrs a WHERE a.job_id = $1
		AND NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = a.job_id AND r.job_index = a.idx) ORDER BY a.idx`, id)
}

// SliceAddresses calls fn, in index order, with the addresses of the
// job's slice that have no result yet.
func (db *DB) SliceAddresses(ctx context.Context, id string, slice int, fn func(index int, addr string) error) error {
	return db.addresses(ctx, id, fn, `SELECT a.idx, a.addr FROM job_addrs a WHERE a.job_id = $1 AND a.slice = $2
		AND NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = a.job_id AND r.job_index = a.idx) ORDER BY a.idx`, id, slice)
}

// JobResults calls fn with the job's results in index order.
func (db *DB) JobResults(ctx context.Context, id string, fn func(storage.Result) error) error {
	if err := storage.CheckJobID(id); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT `+resultCols+` FROM results WHERE job_id = $1 ORDER BY job_index`, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, _, err := scanResult(rows)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			if errors.Is(err, storage.ErrStop) {
				return nil
			}
			return err
		}
	}
	return rows.Err()
}

// LeaseSlices leases up to n free slices to this box (storage.JobLeases):
// a slice is free when no box holds it or its box stopped (its boot not
// seen for the lease; see freeSlice). The accounts with the fewest slices held go first,
// then round-robin, each account's oldest job first. Rows are taken with
// FOR UPDATE SKIP LOCKED, so boxes leasing at once take different slices.
func (db *DB) LeaseSlices(ctx context.Context, n int) ([]storage.JobSlice, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	var out []storage.JobSlice
	// Running jobs with every result written but not ended.
	stuck, err := db.jobs(ctx, `WHERE status = 'running' AND processed = total ORDER BY created_at LIMIT 16`)
	if err != nil {
		return nil, err
	}
	for _, j := range stuck {
		out = append(out, storage.JobSlice{Job: j, Slice: -1})
	}
	free := freeSlice
	rows, err := db.pool.Query(ctx, `SELECT account, sum(CASE WHEN `+free+` THEN 0 ELSE 1 END) AS held
		FROM job_slices s GROUP BY account HAVING sum(CASE WHEN `+free+` THEN 1 ELSE 0 END) > 0 ORDER BY held, account`, db.lease)
	if err != nil {
		return nil, err
	}
	var accounts []string
	var acct string
	var held int64
	if _, err := pgx.ForEachRow(rows, []any{&acct, &held}, func() error {
		accounts = append(accounts, acct)
		return nil
	}); err != nil {
		return nil, err
	}
	leased := 0
	for len(accounts) > 0 && leased < n {
		next := accounts[:0]
		for _, a := range accounts {
			if leased >= n {
				break
			}
			// The slice is picked and locked once, in a materialised
			// CTE, and the update joins that one row: an IN (SELECT …
			// LIMIT 1 FOR UPDATE SKIP LOCKED) may be re-evaluated (per
			// row scanned, or in a concurrent update's recheck) and
			// then leased slices it did not return, or returned one
			// another box leased (TestLeaseExactly). Every row
			// returned is read.
			rows, err := db.pool.Query(ctx, `WITH pick AS MATERIALIZED (
					SELECT s.job_id, s.slice FROM job_slices s WHERE s.account = $2 AND `+free+`
					ORDER BY s.created_at, s.job_id, s.slice LIMIT 1 FOR UPDATE SKIP LOCKED)
				UPDATE job_slices js SET owner = $3, leased_at = now() FROM pick
				WHERE js.job_id = pick.job_id AND js.slice = pick.slice
				RETURNING js.job_id, js.slice`, db.lease, a, db.boot)
			if err != nil {
				return out, err
			}
			type picked struct {
				id    string
				slice int
			}
			got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (picked, error) {
				var p picked
				return p, r.Scan(&p.id, &p.slice)
			})
			if err != nil {
				return out, err
			}
			if len(got) == 0 {
				continue // none left of this account
			}
			for _, p := range got {
				j, err := db.Job(ctx, p.id)
				if err != nil {
					// Leased but not returned: give it back.
					if rerr := db.ReturnSlice(ctx, p.id, p.slice); rerr != nil {
						db.log.Error("cannot give a slice back; it is free again when this box stops", "job", p.id, "slice", p.slice, "err", rerr)
					}
					return out, err
				}
				out = append(out, storage.JobSlice{Job: j, Slice: p.slice})
				leased++
				slicesLeased.Inc()
			}
			next = append(next, a)
		}
		accounts = next
	}
	return out, nil
}

// freeSlice is the SQL condition, on a row s of job_slices, that no live
// box holds it: nobody leased it, or its box stopped (its boot not seen
// for the lease $1) and the lease is older than that. The test of the
// row's own leased_at matters: when the row is locked after another box
// leased it (READ COMMITTED rechecks the condition on the new version),
// PostgreSQL does not run the NOT EXISTS again on that version, so only
// the row's own columns can say that it was just leased.
var freeSlice = `(s.owner = '' OR (s.leased_at < now() - $1::interval AND ` + fmt.Sprintf(deadBoot, "s.owner") + `))`

// HeldSlices returns how many slices of the job the live boxes named box
// hold (for operators and tests).
func (db *DB) HeldSlices(job, box string) (int, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	var n int
	err := db.pool.QueryRow(ctx, `SELECT count(*) FROM job_slices s JOIN boots b ON b.id = s.owner
		WHERE s.job_id = $1 AND b.box = $2 AND b.seen_at >= now() - $3::interval`, job, box, db.lease).Scan(&n)
	return n, err
}

// LeasedSlices returns the slices this box holds (storage.JobLeases).
func (db *DB) LeasedSlices(ctx context.Context) ([]storage.JobSlice, error) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT job_id, slice FROM job_slices WHERE owner = $1 ORDER BY job_id, slice`, db.boot)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.JobSlice, error) {
		var js storage.JobSlice
		return js, r.Scan(&js.Job.ID, &js.Slice)
	})
}

// ReturnSlice gives back a slice this box leased (storage.JobLeases).
func (db *DB) ReturnSlice(ctx context.Context, id string, slice int) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	_, err := db.pool.Exec(ctx, `UPDATE job_slices SET owner = '', leased_at = NULL WHERE job_id = $1 AND slice = $2 AND owner = $3`, id, slice, db.boot)
	return err
}
