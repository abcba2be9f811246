package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// Domain knowledge the boxes share (probe.Facts): a fact is a value of a
// kind for a key, until it expires. The newest write wins.
//
// The engine reads a fact on a miss of its own cache, in the middle of a
// validation, so reads are combined: the reads that arrive within
// factGather of one that found no query under way, or while one is under
// way, go in one query, which answers up to maxFactReads of them at once
// (one round trip for all). The engine
// writes facts in the background, many in one statement (PutFacts),
// committed without waiting for the WAL flush: a fact a database crash
// loses is learnt again, at the cost of a probe.

// maxFactReads bounds the reads of one query.
const maxFactReads = 256

// factGather is how long a read that finds no query under way waits for
// others to join its query. A fresh validation reads its domain's facts
// once, before a probe of tens of milliseconds at least; fleet-wide the
// wait turns several queries into one (verifybench -scenarios fleet).
const factGather = 3 * time.Millisecond

// factReads combines this box's fact reads.
type factReads struct {
	mu      sync.Mutex
	running bool
	queue   []*factRead
}

type factRead struct {
	kind, key string
	done      chan factAnswer
}

type factAnswer struct {
	value string
	exp   time.Time
	ok    bool
	err   error
}

// Fact returns the fact of kind for key; ok is false when there is none
// or it expired.
func (db *DB) Fact(kind, key string) (string, time.Time, bool, error) {
	r := &factRead{kind: kind, key: key, done: make(chan factAnswer, 1)}
	c := &db.factReads
	c.mu.Lock()
	c.queue = append(c.queue, r)
	if !c.running {
		c.running = true
		go func() {
			time.Sleep(factGather)
			for db.readFacts() {
			}
		}()
	}
	c.mu.Unlock()
	a := <-r.done
	return a.value, a.exp, a.ok, a.err
}

// readFacts answers up to maxFactReads reads of the queue in one query,
// and reports whether reads are queued for another; when none are, no
// query is under way any more.
func (db *DB) readFacts() (more bool) {
	c := &db.factReads
	c.mu.Lock()
	k := min(len(c.queue), maxFactReads)
	rs := append([]*factRead(nil), c.queue[:k]...)
	c.queue = c.queue[k:]
	c.mu.Unlock()
	found, err := db.queryFacts(rs)
	for _, r := range rs {
		a := found[[2]string{r.kind, r.key}]
		a.err = err
		r.done <- a
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.running = false
		return false
	}
	return true
}

func (db *DB) queryFacts(rs []*factRead) (map[[2]string]factAnswer, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	kinds, keys := make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		kinds[i], keys[i] = r.kind, r.key
	}
	// LATERAL: one step down the primary key per fact asked for (a join
	// would hash the whole table).
	rows, err := db.pool.Query(ctx, `SELECT u.kind, u.key, f.value, f.expires_at
		FROM unnest($1::text[], $2::text[]) AS u (kind, key),
		LATERAL (SELECT value, expires_at FROM domain_facts WHERE kind = u.kind AND key = u.key AND expires_at > $3) AS f`,
		kinds, keys, db.now())
	if err != nil {
		return nil, err
	}
	found := map[[2]string]factAnswer{}
	var kind, key, v string
	var exp time.Time
	_, err = pgx.ForEachRow(rows, []any{&kind, &key, &v, &exp}, func() error {
		found[[2]string{kind, key}] = factAnswer{value: v, exp: exp.UTC(), ok: true}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// PutFact records a fact until expires.
func (db *DB) PutFact(kind, key, value string, expires time.Time) error {
	return db.PutFacts([]storage.Fact{{Kind: kind, Key: key, Value: value, Expires: expires}})
}

// PutFacts records facts in one statement, the last of a kind and key
// winning, committed without waiting for the WAL flush (see above).
func (db *DB) PutFacts(fs []storage.Fact) error {
	if len(fs) == 0 {
		return nil
	}
	last := make(map[[2]string]int, len(fs))
	for i, f := range fs {
		last[[2]string{f.Kind, f.Key}] = i
	}
	var kinds, keys, values []string
	var exps []time.Time
	for i, f := range fs {
		if last[[2]string{f.Kind, f.Key}] != i {
			continue // ON CONFLICT cannot change a row twice in one statement
		}
		kinds, keys, values, exps = append(kinds, f.Kind), append(keys, f.Key), append(values, f.Value), append(exps, f.Expires)
	}
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	if db.asyncCommit {
		b.Queue(`SET LOCAL synchronous_commit TO off`)
	}
	b.Queue(`INSERT INTO domain_facts (kind, key, value, expires_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
		ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`, kinds, keys, values, exps)
	b.Queue(`COMMIT`)
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		_, _ = conn.Exec(ctx, `ROLLBACK`)
	}
	return err
}

// purgeFacts deletes the expired facts.
func (db *DB) purgeFacts() error {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	_, err := db.pool.Exec(ctx, `DELETE FROM domain_facts WHERE expires_at <= $1`, db.now())
	return err
}

// FactsOfKind returns the facts of a kind that have not expired, by key.
func (db *DB) FactsOfKind(kind string) (map[string]string, error) {
	ctx, cancel := db.ctx(context.Background())
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT key, value FROM domain_facts WHERE kind = $1 AND expires_at > $2`, kind, db.now())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	var k, v string
	for rows.Next() {
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}
