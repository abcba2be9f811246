package pebble

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/verifyd/verifyd/storage"
)

// CreateJob writes a queued job: its record, its addresses and the
// reservation of one credit per address, in one synced batch, or fails
// with an *InsufficientCreditsError (Needed = the address count) when the
// account has fewer credits available. ErrExists when the id is taken.
func (db *DB) CreateJob(ctx context.Context, spec storage.JobSpec) (storage.Job, error) {
	if err := db.check(); err != nil {
		return storage.Job{}, err
	}
	if err := storage.CheckJobSpec(&spec); err != nil {
		return storage.Job{}, err
	}
	if !db.accountExists(spec.Account) {
		return storage.Job{}, fmt.Errorf("%w: account %q", storage.ErrNotFound, spec.Account)
	}
	if err := storage.CheckJobAddresses(spec.Addresses); err != nil {
		return storage.Job{}, err
	}

	// The addresses go into the batch before any lock is taken: for
	// 100,000 of them this is most of the work.
	size := 0
	for _, a := range spec.Addresses {
		size += len(prefixJobAddr) + len(spec.ID) + 1 + 4 + len(a) + 8
	}
	b := db.pdb.NewBatchWithSize(size + 1024)
	key := jobAddrPrefix(spec.ID)
	pl := len(key)
	for i, a := range spec.Addresses {
		key = appendU32(key[:pl], uint32(i))
		op := b.SetDeferred(len(key), len(a))
		copy(op.Key, key)
		copy(op.Value, a)
		op.Finish()
	}

	now := db.now().Truncate(time.Millisecond)
	n := int64(len(spec.Addresses))
	j := storage.Job{
		ID: spec.ID, Account: spec.Account, Status: storage.JobQueued, ListName: spec.ListName,
		WebhookURL: spec.WebhookURL, Total: len(spec.Addresses), Reserved: n, CreatedAt: now,
	}
	st, err := db.lockAccount(spec.Account)
	if err != nil {
		b.Close()
		return storage.Job{}, err
	}
	fail := func(err error) (storage.Job, error) {
		st.mu.Unlock()
		b.Close()
		return storage.Job{}, err
	}
	// The id check runs under the account's lock and the jobs lock, so
	// two creations of one id cannot both pass it.
	db.jobsMu.Lock()
	_, taken := db.jobs[spec.ID]
	if !taken {
		taken, err = db.has(jobKey(spec.ID))
	}
	if err == nil && !taken {
		db.jobs[spec.ID] = &storage.Job{ID: spec.ID} // a placeholder until the batch is applied
	}
	db.jobsMu.Unlock()
	if err != nil {
		return fail(err)
	}
	if taken {
		return fail(fmt.Errorf("%w: job %s", storage.ErrExists, spec.ID))
	}
	dropPlaceholder := func() {
		db.jobsMu.Lock()
		delete(db.jobs, spec.ID)
		db.jobsMu.Unlock()
	}
	if avail := st.balance - st.held; avail < n {
		e := &storage.InsufficientCreditsError{Current: st.balance, Held: st.held, Needed: n}
		dropPlaceholder()
		insufficientCredits.Inc()
		return fail(e)
	}
	tx := st.begin(spec.Account, b, now)
	tx.add(storage.EntryReserve, n, -n, 0, 0, spec.ID, "")
	if err := stageJob(b, &j); err != nil {
		dropPlaceholder()
		return fail(err)
	}
	b.Set(accountJobKey(j.Account, toMs(j.CreatedAt), j.ID), nil, nil)
	b.Set(jobActiveKey(j.ID), nil, nil)
	if spec.Idem != nil {
		resp, err := spec.Respond(j.Clone())
		if err != nil {
			dropPlaceholder()
			return fail(err)
		}
		mu := db.idemLock(*spec.Idem)
		mu.Lock()
		err = db.stageIdemDone(b, *spec.Idem, spec.IdemHash, resp, now)
		mu.Unlock()
		if err != nil {
			dropPlaceholder()
			return fail(err)
		}
	}
	wait, err := db.applyOrdered(b)
	if err != nil {
		dropPlaceholder()
		st.mu.Unlock()
		return storage.Job{}, err
	}
	tx.apply()
	db.setJob(&j)
	st.mu.Unlock()
	if err := wait(); err != nil {
		return storage.Job{}, err
	}
	return j.Clone(), nil
}

func stageJob(b *pebble.Batch, j *storage.Job) error {
	v, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return b.Set(jobKey(j.ID), v, nil)
}

// Job returns the job, or ErrNotFound. The scheduler's call: it does not
// check the account (see AccountJob).
func (db *DB) Job(ctx context.Context, id string) (storage.Job, error) {
	if err := db.check(); err != nil {
		return storage.Job{}, err
	}
	db.jobsMu.Lock()
	p, ok := db.jobs[id]
	var j storage.Job
	if ok {
		j = p.Clone()
	}
	db.jobsMu.Unlock()
	if ok {
		if j.Status == "" { // a placeholder: not created yet
			return storage.Job{}, fmt.Errorf("%w: job %s", storage.ErrNotFound, id)
		}
		return j, nil
	}
	return db.readJob(id)
}

// AccountJob returns the job if the account owns it, else ErrNotFound
// (spec §5.7: other accounts get 404).
func (db *DB) AccountJob(ctx context.Context, account, id string) (storage.Job, error) {
	j, err := db.Job(ctx, id)
	if err != nil {
		return storage.Job{}, err
	}
	if j.Account != account {
		return storage.Job{}, fmt.Errorf("%w: job %s", storage.ErrNotFound, id)
	}
	return j, nil
}

func (db *DB) readJob(id string) (storage.Job, error) {
	if err := storage.CheckJobID(id); err != nil {
		return storage.Job{}, err
	}
	v, err := db.get(jobKey(id))
	if err != nil {
		return storage.Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	var j storage.Job
	if err := json.Unmarshal(v, &j); err != nil {
		return storage.Job{}, fmt.Errorf("%w: job %s: %v", errCorrupt, id, err)
	}
	return j, nil
}

// lockJob returns the job's current record with its account's lock held;
// the caller unlocks st.mu. Only lock holders put jobs into db.jobs, so
// the map never holds a stale record.
func (db *DB) lockJob(id string) (*acctState, *storage.Job, error) {
	j, err := db.Job(context.Background(), id)
	if err != nil {
		return nil, nil, err
	}
	st, err := db.lockAccount(j.Account)
	if err != nil {
		return nil, nil, err
	}
	db.jobsMu.Lock()
	p, ok := db.jobs[id]
	db.jobsMu.Unlock()
	if ok {
		j = p.Clone()
	} else if j, err = db.readJob(id); err != nil {
		st.mu.Unlock()
		return nil, nil, err
	}
	return st, &j, nil
}

// setJob publishes the job's new record after its batch is applied; the
// caller holds the account's lock.
func (db *DB) setJob(j *storage.Job) {
	db.jobsMu.Lock()
	if j.Active() {
		db.jobs[j.ID] = j
	} else {
		delete(db.jobs, j.ID)
	}
	db.jobsMu.Unlock()
}

// writeJob stages the job record (and what stage adds) into a new batch,
// applies it synced, calls applied and publishes the record; it unlocks
// st.
func (db *DB) writeJob(st *acctState, j *storage.Job, stage func(*pebble.Batch) error, applied func()) (storage.Job, error) {
	b := db.pdb.NewBatch()
	err := stageJob(b, j)
	if err == nil && stage != nil {
		err = stage(b)
	}
	if err != nil {
		st.mu.Unlock()
		b.Close()
		return storage.Job{}, err
	}
	wait, err := db.applyOrdered(b)
	if err != nil {
		st.mu.Unlock()
		return storage.Job{}, err
	}
	if applied != nil {
		applied()
	}
	db.setJob(j)
	st.mu.Unlock()
	if err := wait(); err != nil {
		return storage.Job{}, err
	}
	return j.Clone(), nil
}

// StartJob moves a queued job to running and sets StartedAt. Starting a
// running job (a resume after a restart) returns it unchanged.
func (db *DB) StartJob(ctx context.Context, id string) (storage.Job, error) {
	st, j, err := db.lockJob(id)
	if err != nil {
		return storage.Job{}, err
	}
	switch j.Status {
	case storage.JobRunning:
		st.mu.Unlock()
		return j.Clone(), nil
	case storage.JobQueued:
	default:
		st.mu.Unlock()
		return storage.Job{}, fmt.Errorf("%w: job %s is %s", storage.ErrJobState, id, j.Status)
	}
	j.Status = storage.JobRunning
	j.StartedAt = db.now().Truncate(time.Millisecond)
	return db.writeJob(st, j, nil, nil)
}

// PutJobResults stores results of a running job and its progress in one
// synced batch: for each, the result (jobres/), a pointer to it under its
// id (res/), its history row (kind batch) and its cache entry. An index
// that already has a result keeps it and is not counted twice (a resumed
// job may redo an address). Result fields Account, Kind, JobID and
// JobIndex are set from the job.
func (db *DB) PutJobResults(ctx context.Context, id string, results []storage.JobResult) (storage.Job, error) {
	st, j, err := db.lockJob(id)
	if err != nil {
		return storage.Job{}, err
	}
	if j.Status != storage.JobRunning {
		st.mu.Unlock()
		return storage.Job{}, fmt.Errorf("%w: job %s is %s, not running", storage.ErrJobState, id, j.Status)
	}
	now := db.now()
	b := db.pdb.NewBatch()
	fail := func(err error) (storage.Job, error) {
		st.mu.Unlock()
		b.Close()
		return storage.Job{}, err
	}
	pa := posAlloc{db: db, st: st, account: j.Account}
	var cacheKeys [][]byte // cache entries the batch replaces (cacheMemo)
	done := make(map[int]bool, len(results))
	// One iterator over the job's results answers "has this index a
	// result?" for the whole call: a seek is several times cheaper than a
	// Get, which opens every level's table anew.
	rp := jobResultPrefix(id)
	seen, err := db.iter(&pebble.IterOptions{LowerBound: rp, UpperBound: prefixEnd(rp)})
	if err != nil {
		return fail(err)
	}
	defer seen.Close()
	for _, jr := range results {
		if err := storage.CheckJobIndex(id, jr.Index, j.Total); err != nil {
			return fail(err)
		}
		if done[jr.Index] {
			continue
		}
		done[jr.Index] = true
		k := jobResultKey(id, uint32(jr.Index))
		if seen.SeekGE(k) && bytes.Equal(seen.Key(), k) {
			continue
		}
		if err := seen.Error(); err != nil {
			return fail(err)
		}
		r := jr.Result
		r.Account, r.Kind, r.JobID, r.JobIndex = j.Account, storage.KindBatch, id, jr.Index
		if err := db.prepareResult(&r, now); err != nil {
			return fail(err)
		}
		if err := db.stageResult(b, &pa, &r); err != nil {
			return fail(err)
		}
		if r.CachedFrom == "" && !r.SkipCache {
			cacheKeys = append(cacheKeys, cacheKey(r.Account, r.Email))
		}
		j.CountResult(&r)
	}
	if err := stageJob(b, j); err != nil {
		return fail(err)
	}
	wait, err := db.applyOrdered(b)
	if err != nil {
		st.mu.Unlock()
		return storage.Job{}, err
	}
	db.memo.forget(cacheKeys)
	pa.apply()
	db.setJob(j)
	st.mu.Unlock()
	if err := wait(); err != nil {
		return storage.Job{}, err
	}
	return j.Clone(), nil
}

// FinishJob ends a job and settles its credits, in one synced batch with
// the job's new record and the event f.Event returns: Used = Processed
// credits of the reservation are spent (an EntryUse), and the rest,
// Reserved − Used, is refunded (an EntryRefund, when not 0). A job can be
// completed only once every address has a result; failed at any time
// before it ends.
func (db *DB) FinishJob(ctx context.Context, id string, f storage.JobFinish) (storage.Job, error) {
	if err := storage.CheckJobFinish(f); err != nil {
		return storage.Job{}, err
	}
	st, j, err := db.lockJob(id)
	if err != nil {
		return storage.Job{}, err
	}
	if !j.Active() {
		st.mu.Unlock()
		return storage.Job{}, fmt.Errorf("%w: job %s already %s", storage.ErrJobState, id, j.Status)
	}
	if f.Status == storage.JobCompleted && j.Processed != j.Total {
		st.mu.Unlock()
		return storage.Job{}, fmt.Errorf("%w: job %s has %d of %d results", storage.ErrJobState, id, j.Processed, j.Total)
	}
	now := db.now().Truncate(time.Millisecond)
	j.Status = f.Status
	j.Error = f.Error
	j.CompletedAt = now
	j.Used = int64(j.Processed)
	j.Refunded = j.Reserved - j.Used
	var ev *storage.Event
	if f.Event != nil {
		if ev, err = f.Event(j.Clone()); err != nil {
			st.mu.Unlock()
			return storage.Job{}, err
		}
	}
	var tx *ledgerTx
	return db.writeJob(st, j, func(b *pebble.Batch) error {
		tx = st.begin(j.Account, b, now)
		tx.add(storage.EntryUse, j.Used, 0, 0, 0, id, "")
		if j.Refunded > 0 {
			tx.add(storage.EntryRefund, j.Refunded, j.Refunded, 0, 0, id, "")
		}
		b.Delete(jobActiveKey(id), nil)
		if ev != nil {
			return db.stageEvent(b, ev, now)
		}
		return nil
	}, func() { tx.apply() })
}

// ListJobs returns the jobs with that status. Queued and running jobs
// (which the scheduler resumes after a restart) come from an index of
// active jobs; completed and failed ones from a scan of every job.
func (db *DB) ListJobs(ctx context.Context, status storage.JobStatus) ([]storage.Job, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	var out []storage.Job
	if status == storage.JobQueued || status == storage.JobRunning {
		var ids []string
		err := db.scanPrefix([]byte(prefixJobActive), func(k, _ []byte) (bool, error) {
			ids = append(ids, string(k[len(prefixJobActive):]))
			return true, nil
		})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			j, err := db.Job(ctx, id)
			if err != nil {
				return nil, err
			}
			if j.Status == status {
				out = append(out, j)
			}
		}
		return out, nil
	}
	err := db.scanPrefix([]byte(prefixJob), func(k, v []byte) (bool, error) {
		var j storage.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return false, fmt.Errorf("%w: %s: %v", errCorrupt, k, err)
		}
		if j.Status == status {
			out = append(out, j)
		}
		return true, nil
	})
	return out, err
}

// ListAccountJobs returns up to limit (≤ 0: all) of the account's jobs,
// newest first.
func (db *DB) ListAccountJobs(ctx context.Context, account string, limit int) ([]storage.Job, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	var ids []string
	err := db.scanPrefix(accountJobPrefix(account), func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(accountJobPrefix(account))+8:]))
		return limit <= 0 || len(ids) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]storage.Job, 0, len(ids))
	for _, id := range ids {
		j, err := db.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// jobAddresses calls fn with the job's addresses from index from on, in
// index order, until fn returns an error (ErrStop: stop quietly).
func (db *DB) jobAddresses(id string, from int, fn func(index int, addr string) error) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := storage.CheckJobID(id); err != nil {
		return err
	}
	p := jobAddrPrefix(id)
	err := db.scan(jobAddrKey(id, uint32(max(from, 0))), prefixEnd(p), func(k, v []byte) (bool, error) {
		return true, fn(int(jobIndex(k)), string(v))
	})
	if errors.Is(err, storage.ErrStop) {
		return nil
	}
	return err
}

// PendingAddresses calls fn, in index order, with the job's addresses that
// have no result yet: what a resumed job still has to do.
func (db *DB) PendingAddresses(ctx context.Context, id string, fn func(index int, addr string) error) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := storage.CheckJobID(id); err != nil {
		return err
	}
	rp := jobResultPrefix(id)
	res, err := db.iter(&pebble.IterOptions{LowerBound: rp, UpperBound: prefixEnd(rp)})
	if err != nil {
		return err
	}
	defer res.Close()
	res.First()
	ap := jobAddrPrefix(id)
	err = db.scanPrefix(ap, func(k, v []byte) (bool, error) {
		i := jobIndex(k)
		for res.Valid() && jobIndex(res.Key()) < i {
			res.Next()
		}
		if res.Valid() && jobIndex(res.Key()) == i {
			return true, nil
		}
		return true, fn(int(i), string(v))
	})
	if errors.Is(err, storage.ErrStop) {
		err = nil
	}
	return errors.Join(err, res.Error())
}

// JobResults calls fn with the job's results in index order (the rows of
// results.csv), until fn returns an error (ErrStop: stop quietly).
func (db *DB) JobResults(ctx context.Context, id string, fn func(storage.Result) error) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := storage.CheckJobID(id); err != nil {
		return err
	}
	err := db.scanPrefix(jobResultPrefix(id), func(_, v []byte) (bool, error) {
		r, _, _, err := decodeResult(v)
		if err != nil {
			return false, err
		}
		return true, fn(r)
	})
	if errors.Is(err, storage.ErrStop) {
		return nil
	}
	return err
}
