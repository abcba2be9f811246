package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/storage"
)

// Charges of one account are combined. Every change of an account's
// credits holds its row's lock until it commits, so one account's charges
// run one after the other, however many boxes and connections there are:
// one charge a transaction would cap an account at about one charge a
// round trip or three (measured: ~1,000 cache:true hits a second here,
// against ~24,000 on one Pebble box). So the charges of an account that
// arrive on a box while one of them is in its transaction wait, and the
// next transaction takes up to maxCombined of them at once: one lock, the
// holds ended and the history ids and positions read in one batch, each
// charge's entry, result and idempotent response written in one batch, one
// commit, one flush. Each charge keeps its own outcome: one whose hold is
// no longer active, or which the credits do not cover, or whose receipt
// cannot be sealed, fails alone (the last voided by an entry, as on
// Pebble); the others commit. Ledger entries, history positions and
// receipts are what they would be one at a time, in the order the
// charges were taken. While an account's charges come faster than one
// per Options.ChargeGather, each of its transactions first waits that
// long, so that it takes more of them (combiner.gather).

// maxCombined bounds the charges of one transaction.
const maxCombined = 128

// testHookCommitted, set by a test, runs between a charge transaction's
// commit and its flush.
var testHookCommitted func()

// pendingCharge is one Charge, ChargeDirect or Hold (hold set) waiting
// for its transaction.
type pendingCharge struct {
	hold bool
	// lease: the hold takes a block of credits instead, when the account
	// has enough (leases.go)
	lease bool
	ref   string // a hold's
	h     *storage.Hold
	n     int64
	req   storage.ChargeRequest
	r0    storage.Result
	now   time.Time
	done  chan chargeOutcome
	// abandoned is set when the caller's context ended while it was
	// queued: a transaction that has not taken it yet leaves it out.
	abandoned atomic.Bool
	// blockGone: the charge of a lease's part found its block gone or
	// short (set by its transaction).
	blockGone bool
}

type chargeOutcome struct {
	out  storage.Charged
	held storage.Hold
	err  error
	// leased: held is a block of credits (a hold's with lease set).
	leased bool
	// blockGone: a part's block was gone or short; the part was charged
	// from the available credits, or not at all (leases.go).
	blockGone bool
}

// combiner queues the charges of each account on this box.
type combiner struct {
	mu      sync.Mutex
	pending map[string][]*pendingCharge // by account; present while a leader runs
	most    int                         // the most charges one transaction took (tests)

	// gather is Options.ChargeGather (0: none). While an account's
	// charges arrive on this box more often than once per gather, a
	// transaction of its waits that long before it takes the queue, so
	// that it combines more of them: fewer transactions, and so less of
	// the database's CPU, a charge (PostgreSQL's commit_delay, which
	// waits only while commit_siblings other transactions are active;
	// here the account's own rate of charges decides). An account that
	// charges now and then waits for nothing.
	gather time.Duration
	rates  map[string]*arrivals // by account
	swept  time.Time            // rates' last sweep
}

// arrivals is the pace of an account's charges on this box.
type arrivals struct {
	last time.Time
	gap  time.Duration // moving average of the time between two; <0: one seen
}

// ratesIdle: an account's pace is forgotten after this long without a
// charge (swept when another account's is first recorded).
const ratesIdle = time.Minute

// arrived records a charge of account at now and reports whether the
// account's charges come more often than once per gather. c.mu is held.
func (c *combiner) arrived(account string, now time.Time) bool {
	if c.gather == 0 {
		return false
	}
	r := c.rates[account]
	if r == nil {
		if c.rates == nil {
			c.rates = map[string]*arrivals{}
		}
		if now.Sub(c.swept) > ratesIdle {
			c.swept = now
			for a, r := range c.rates {
				if now.Sub(r.last) > ratesIdle {
					delete(c.rates, a)
				}
			}
		}
		c.rates[account] = &arrivals{last: now, gap: -1}
		return false
	}
	d := now.Sub(r.last)
	r.last = now
	if r.gap < 0 {
		r.gap = d
	} else {
		r.gap += (d - r.gap) / 8
	}
	return c.busy(account)
}

// busy reports whether the account's charges come more often than once
// per gather (c.mu is held).
func (c *combiner) busy(account string) bool {
	r := c.rates[account]
	return c.gather > 0 && r != nil && r.gap >= 0 && r.gap < c.gather
}

// submit runs p in the next transaction of its account's charges: the
// caller either joins the queue of a transaction under way, or runs a
// transaction with its own request and, when others queued meanwhile,
// leaves them to a goroutine that runs their transactions until the queue
// is empty: a caller never waits for more than its own transaction.
//
// ctx bounds the caller's wait: its own transaction runs under it, and a
// caller whose ctx ends while queued returns ctx's error at once and is
// left out of the transactions to come. One already taken by a
// transaction may still commit after its caller has gone: a hold so lost
// is released by the heartbeat (sweepHolds), a charge is recorded with its
// Idempotency-Key as any other.
func (db *DB) submit(ctx context.Context, account string, p *pendingCharge) chargeOutcome {
	c := &db.charges
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[string][]*pendingCharge{}
	}
	busy := c.arrived(account, time.Now())
	q, running := c.pending[account]
	if running || busy {
		// Queued behind a transaction under way, or, while the account
		// is busy, first in a queue that gathers for c.gather.
		c.pending[account] = append(q, p)
		c.mu.Unlock()
		if !running {
			go db.drain(account, true)
		}
		select {
		case o := <-p.done:
			return o
		case <-ctx.Done():
			p.abandoned.Store(true)
			return chargeOutcome{err: ctx.Err()}
		}
	}
	c.pending[account] = nil
	c.mu.Unlock()
	if db.runBatch(ctx, account, []*pendingCharge{p}) {
		go db.drain(account, false)
	}
	return <-p.done
}

// drain runs the transactions of the account's queued requests until the
// queue is empty; each first waits for the gather while the account is
// busy (gather: the first does).
func (db *DB) drain(account string, gather bool) {
	c := &db.charges
	for {
		if gather {
			chargeGathers.Inc()
			time.Sleep(c.gather)
		}
		if !db.runBatch(context.Background(), account, nil) {
			return
		}
		c.mu.Lock()
		gather = c.busy(account) && len(c.pending[account]) < maxCombined
		c.mu.Unlock()
	}
}

// runBatch runs one transaction for batch (nil: up to maxCombined of the
// queue, those abandoned left out) under ctx, and reports whether
// requests are queued for another. When none
// are, the account has no transaction under way any more. A panic (a
// Seal's: a bug) fails the batch and everything queued, so no caller
// waits for ever, and is logged.
func (db *DB) runBatch(ctx context.Context, account string, batch []*pendingCharge) (more bool) {
	c := &db.charges
	if batch == nil {
		c.mu.Lock()
		q := c.pending[account]
		k := min(len(q), maxCombined)
		batch = make([]*pendingCharge, 0, k)
		for _, p := range q[:k] {
			if !p.abandoned.Load() {
				batch = append(batch, p)
			}
		}
		c.pending[account] = q[k:]
		c.mu.Unlock()
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		c.mu.Lock()
		failed := append(batch, c.pending[account]...)
		delete(c.pending, account)
		c.mu.Unlock()
		err := fmt.Errorf("postgres: a charge of %s panicked: %v", account, v)
		for _, p := range failed {
			select {
			case p.done <- chargeOutcome{err: err}:
			default: // answered already
			}
		}
		more = false
		db.log.Error("a charge panicked; its transaction and the requests queued behind it failed", "account", account, "panic", v,
			"stack", string(debug.Stack()))
	}()
	if len(batch) > 0 {
		db.chargeBatch(ctx, account, batch)
		chargesPerTx.Update(float64(len(batch)))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.most = max(c.most, len(batch))
	if len(c.pending[account]) == 0 {
		delete(c.pending, account)
		return false
	}
	return true
}

// chargeBatch runs one transaction for the charges and holds of account
// in ps and gives each its outcome: a hold's once committed, a charge's
// once flushed too.
//
// The transaction is pipelined: its BEGIN goes with its reads and its
// COMMIT with its writes, and the flush that makes its charges durable
// follows the COMMIT in the same exchange (a statement of its own, which
// waits for the WAL flush after the commit that did not), so a
// transaction takes two round trips where BEGIN, the reads, the writes,
// COMMIT and the flush took five. PostgreSQL runs a pipeline's
// statements in order and skips the rest of it at the first error: the
// flush runs only after the commit succeeded, and on its connection.
func (db *DB) chargeBatch(ctx context.Context, account string, ps []*pendingCharge) {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	outs := make([]chargeOutcome, len(ps))
	// One connection for the transaction and the flush after it (flush).
	// It goes back to the pool on every way out, a panic of Seal's too
	// (runBatch recovers it): the pool closes a connection left in the
	// middle of a transaction, which ends the transaction and its lock.
	conn, err := db.pool.Acquire(ctx)
	release := func() {
		if conn != nil {
			conn.Release()
			conn = nil
		}
	}
	defer release()
	charges := false
	for _, p := range ps {
		charges = charges || !p.hold
	}
	// The flush goes in the commit's exchange, unless a test looks
	// between the two.
	flushWith := charges && db.asyncCommit && testHookCommitted == nil
	var flushErr error
	if err == nil {
		flushErr, err = db.pipelineTx(ctx, conn, flushWith, func() (*pgx.Batch, error) {
			return db.chargeTx(ctx, conn, account, ps, outs)
		})
		if err != nil {
			release() // not held while the requests run one by one
		}
	}
	if err != nil && len(ps) > 1 && ctx.Err() == nil && !isConnErr(err) {
		// One request may be what the database refused (a result id
		// taken): each runs alone, with its own outcome.
		for _, p := range ps {
			db.chargeBatch(context.Background(), account, []*pendingCharge{p})
		}
		return
	}
	for i, p := range ps {
		if !p.hold {
			continue
		}
		o := outs[i]
		if err != nil {
			o = chargeOutcome{err: err}
		}
		p.done <- o
	}
	if err == nil && testHookCommitted != nil {
		testHookCommitted()
	}
	if err == nil && charges && db.asyncCommit {
		// Durable before any of them is answered (see charge).
		err = flushErr
		if !flushWith {
			err = db.flush(ctx, conn)
		}
	}
	for i, p := range ps {
		if p.hold {
			continue
		}
		o := outs[i]
		if err != nil {
			o = chargeOutcome{err: err}
		}
		o.blockGone = p.blockGone
		if o.err == nil && o.out.Result.ID != "" {
			// Answered 200 from here: what a reconciliation after a
			// failover looks for (reconcile.go).
			c := answeredCharge{at: time.Now(), account: account, result: o.out.Result.ID, seq: o.out.Entry.Seq}
			if p.req.Idem != nil {
				c.key = p.req.Idem.Key
			}
			db.journal.add(c)
		}
		p.done <- o
	}
}

// pipelineTx runs a transaction on conn whose fn sends its BEGIN with its
// first statements and returns the batch of its writes; the writes go
// with the COMMIT (and, with flush, the flush after it) in one exchange.
// It is run again from the start on a serialization failure or a
// deadlock, as inRowTx does. err is the transaction's failure; flushErr
// the flush's, when the transaction committed.
func (db *DB) pipelineTx(ctx context.Context, conn *pgxpool.Conn, flush bool, fn func() (*pgx.Batch, error)) (flushErr, err error) {
	for attempt := range maxTxAttempts {
		var w *pgx.Batch
		if w, err = fn(); err == nil {
			commit := w.Len()
			w.Queue(`COMMIT`)
			if flush {
				slot := db.flushSlot.Add(1) % flushSlots
				w.Queue(flushSQL, db.boot, int32(slot))
			}
			br := conn.SendBatch(ctx, w)
			committed := false
			for i := range w.Len() {
				if _, e := br.Exec(); e != nil {
					if i > commit {
						flushErr = e
					} else {
						err = e
					}
					break
				}
				committed = committed || i == commit
			}
			if cerr := br.Close(); err == nil && flushErr == nil && cerr != nil {
				if committed && flush {
					// The flush's own commit, at the pipeline's end,
					// failed: the transaction is committed.
					flushErr = cerr
				} else {
					err = cerr
				}
			}
		}
		if err == nil {
			return flushErr, nil
		}
		// A transaction left open (a statement before COMMIT failed)
		// ends here, so the connection can run it again; one that
		// cannot is closed by the pool.
		if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
			_, _ = conn.Exec(ctx, `ROLLBACK`)
		}
		if !retryable(err) {
			return nil, err
		}
		txRetries.Inc()
		d := time.Duration(1<<min(attempt, 6)) * time.Millisecond
		d += rand.N(d)
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(d):
		}
	}
	return nil, err
}

// lockAccountSQL reads an account's credits and locks its row for the
// rest of the transaction; it also sets the transaction's settings: with
// generic, the generic plan of each of its statements is kept instead of
// planning again a statement whose plan depends on an array's length (a
// tenth of the database's CPU); with async, its commit does not wait for
// the WAL flush (chargeBatch flushes after it). In the same statement, as
// each statement costs the server its own round of work. The settings
// are evaluated with the row, before the statements that follow are
// planned.
// settings counts the columns of the settings, after the account's.
func lockAccountSQL(generic, async bool) (q string, settings int) {
	q = `SELECT balance, held, next_seq`
	if generic {
		q += `, set_config('plan_cache_mode', 'force_generic_plan', true)`
		settings++
	}
	if async {
		q += `, set_config('synchronous_commit', 'off', true)`
		settings++
	}
	return q + ` FROM accounts WHERE id = $1 FOR UPDATE`, settings
}

// afterLock is the statement a charge transaction reads with once it has
// its account's lock, its snapshot taken after the transaction before
// it committed: with del, it ends the plain holds charged (and returns
// their seqs and amounts); with blocks, it takes the credits of lease
// parts from their blocks, each only when it has them all (and returns
// the blocks that gave); then the history ids of the charges and the top
// position of each of their milliseconds (NULL: none), each found by one
// step down the account's index, where topsSQL reads every row between
// the first and the last.
type afterLock struct{ del, blocks bool }

func (a afterLock) sql() string {
	var with, cols []string
	n := 1 // $1 is the account
	param := func() string { n++; return "$" + strconv.Itoa(n) }
	if a.del {
		with = append(with, `d AS (DELETE FROM holds WHERE account = $1 AND seq = ANY(`+param()+`::bigint[]) RETURNING seq, amount)`)
		cols = append(cols, `ARRAY(SELECT seq FROM d)`, `ARRAY(SELECT amount FROM d)`)
	}
	if a.blocks {
		seqs, ns := param(), param()
		with = append(with, `b AS (UPDATE holds AS h SET amount = h.amount - x.n
			FROM unnest(`+seqs+`::bigint[], `+ns+`::bigint[]) AS x (seq, n)
			WHERE h.account = $1 AND h.seq = x.seq AND h.amount >= x.n RETURNING h.seq)`)
		cols = append(cols, `ARRAY(SELECT seq FROM b)`)
	}
	count, ms, per := param(), param(), param()
	cols = append(cols, `ARRAY(SELECT nextval('history_ids') FROM generate_series(1, `+count+`))`,
		`ARRAY(SELECT (SELECT max(pos) FROM results WHERE account = $1 AND pos >= m * `+per+` AND pos < (m + 1) * `+per+`)
			FROM unnest(`+ms+`::bigint[]) AS m)`)
	q := `SELECT ` + strings.Join(cols, ", ")
	if len(with) > 0 {
		q = `WITH ` + strings.Join(with, ", ") + " " + q
	}
	return q
}

// args are sql's arguments: the account, the plain holds' seqs, the
// blocks' seqs and the credits each gives, the number of charges and
// their milliseconds.
func (a afterLock) args(account string, holdSeqs, blockSeqs, blockNs []int64, charges int, mss []int64) []any {
	args := []any{account}
	if a.del {
		args = append(args, holdSeqs)
	}
	if a.blocks {
		args = append(args, blockSeqs, blockNs)
	}
	return append(args, charges, mss, int64(posPerMs))
}

// chargeTx is one transaction of chargeBatch on tx, a connection outside
// of one: it begins it, reads, and returns the writes for pipelineTx to
// send with the COMMIT. outs gets each charge's outcome (a retried
// transaction writes them again).
func (db *DB) chargeTx(ctx context.Context, tx *pgxpool.Conn, account string, ps []*pendingCharge, outs []chargeOutcome) (*pgx.Batch, error) {
	// Two statements read: the account's row, locked (with the
	// transaction's settings), and, after the lock, what the charges take
	// (afterLockSQL). Each statement costs the server its own round of
	// work (protocol, snapshot, executor), so the reads are as few
	// statements as they can be.
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	lockSQL, settings := lockAccountSQL(db.genericPlans, db.asyncCommit)
	b.Queue(lockSQL, account)
	var holdSeqs []int64
	blocks := map[int64]int64{} // the credits charged to each block of the parts
	nCharges := 0
	for _, p := range ps {
		switch {
		case p.h != nil && p.h.Part != 0:
			blocks[int64(p.h.Seq)] += p.h.N
		case p.h != nil:
			holdSeqs = append(holdSeqs, int64(p.h.Seq))
		}
		if !p.hold {
			nCharges++
		}
	}
	// Each block gives its parts' credits only when it still has them
	// all: otherwise they are charged as ChargeDirect's.
	seqs, ns := make([]int64, 0, len(blocks)), make([]int64, 0, len(blocks))
	for seq, n := range blocks {
		seqs, ns = append(seqs, seq), append(ns, n)
	}
	var mss []int64
	for _, p := range ps {
		if ms := p.r0.ProbedAt.UnixMilli(); !p.hold && !slices.Contains(mss, ms) {
			mss = append(mss, ms)
		}
	}
	// One statement does not change the holds table twice (CockroachDB
	// refuses it): ending plain holds and drawing on blocks in the same
	// transaction, rare, takes a statement more.
	delAlone := len(holdSeqs) > 0 && len(blocks) > 0
	if delAlone {
		b.Queue(`DELETE FROM holds WHERE account = $1 AND seq = ANY($2) RETURNING seq, amount`, account, holdSeqs)
	}
	after := afterLock{del: len(holdSeqs) > 0 && !delAlone, blocks: len(blocks) > 0}
	// A transaction of holds alone (takes of blocks, lone holds) reads
	// nothing after the lock.
	afterRead := after.del || after.blocks || nCharges > 0
	if afterRead {
		b.Queue(after.sql(), after.args(account, holdSeqs, seqs, ns, nCharges, mss)...)
	}
	// A charge whose request went on without its key (BeginIdem failed)
	// is not made when the key was answered meanwhile: the request is a
	// try again of one charged already, whose answer was lost.
	var unkeyed []int
	for i, p := range ps {
		if !p.hold && p.req.Idem != nil && p.req.IdemHash != nil {
			unkeyed = append(unkeyed, i)
			r := p.req.Idem
			b.Queue(`SELECT EXISTS (SELECT 1 FROM idem WHERE account = $1 AND endpoint = $2 AND key = $3 AND done AND expires_at > $4)`,
				r.Account, r.Endpoint, r.Key, p.now)
		}
	}
	answered := map[int]bool{}
	keysCharged := map[storage.IdemRef]bool{}
	br := tx.SendBatch(ctx, b)
	var acct acctRow
	var seq int64
	_, err := br.Exec() // BEGIN
	if err == nil {
		dest := []any{&acct.balance, &acct.held, &seq}
		for range settings {
			dest = append(dest, nil) // set_config's answers
		}
		err = br.QueryRow().Scan(dest...)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = notFound("account", account)
	}
	held := map[int64]int64{}
	var ids []int64
	places := newPositionsAt(mss)
	if err == nil && delAlone {
		var s, amount int64
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			_, err = pgx.ForEachRow(rows, []any{&s, &amount}, func() error { held[s] = amount; return nil })
		}
	}
	covered := map[int64]bool{} // the blocks that gave their parts' credits
	if err == nil && afterRead {
		var delSeqs, delAmounts, gave []int64
		var tops []*int64
		dest := []any{}
		if after.del {
			dest = append(dest, &delSeqs, &delAmounts)
		}
		if after.blocks {
			dest = append(dest, &gave)
		}
		dest = append(dest, &ids, &tops)
		err = br.QueryRow().Scan(dest...)
		if err == nil && len(delSeqs) != len(delAmounts) {
			err = errors.New("postgres: holds ended and their amounts differ in number")
		}
		for i, s := range delSeqs {
			held[s] = delAmounts[i]
		}
		for _, s := range gave {
			covered[s] = true
		}
		for _, m := range tops {
			if m != nil {
				places.addTop(*m)
			}
		}
	}
	for _, i := range unkeyed {
		if err != nil {
			break
		}
		var done bool
		if err = br.QueryRow().Scan(&done); done {
			answered[i] = true
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The account is unknown, or the database failed: every charge
		// gets it.
		return nil, err
	}
	if len(ids) != nCharges {
		return nil, errors.New("postgres: fewer history ids than charges")
	}
	acct.seq = uint64(seq)
	w := &pgx.Batch{}
	var rows manyRows
	next := 0 // the next history id
	for i, p := range ps {
		if p.hold {
			avail := acct.balance - acct.held
			n, ref, leased := p.n, p.ref, false
			if l := db.leases; p.lease && l != nil && l.size(avail) >= p.n {
				n, ref, leased = l.size(avail), leaseRef, true
			}
			if avail < n {
				outs[i] = chargeOutcome{err: &storage.InsufficientCreditsError{Current: acct.balance, Held: acct.held, Needed: p.n}}
				continue
			}
			e, args := acct.next(account, p.now, storage.EntryHold, n, 0, n, 0, ref, "")
			rows.ledger.entry(args)
			rows.hold(account, int64(e.Seq), n, ref, db.boot, e.Time)
			outs[i] = chargeOutcome{held: storage.Hold{Account: account, Seq: e.Seq, N: n, Ref: ref, At: e.Time}, leased: leased}
			continue
		}
		p.blockGone = false
		r, amount := p.r0, p.n
		r.HistoryID = uint64(ids[next])
		next++
		var holdSeq uint64
		heldDelta := int64(0)
		switch {
		case p.h != nil && p.h.Part != 0:
			// A lease's part: charged against its block, or, when the
			// block is gone or short, from the available credits.
			amount = p.h.N
			if covered[int64(p.h.Seq)] {
				holdSeq, heldDelta = p.h.Seq, -amount
				break
			}
			p.blockGone = true
			if acct.balance-acct.held < amount && !answered[i] {
				outs[i] = chargeOutcome{err: &storage.InsufficientCreditsError{Current: acct.balance, Held: acct.held, Needed: amount}}
				continue
			}
		case p.h != nil:
			var ok bool
			if amount, ok = held[int64(p.h.Seq)]; !ok {
				outs[i] = chargeOutcome{err: holdNotActive(*p.h)}
				continue
			}
			delete(held, int64(p.h.Seq)) // a second charge of it in this batch finds it gone
			holdSeq, heldDelta = p.h.Seq, -amount
		case acct.balance-acct.held < amount && !answered[i]:
			outs[i] = chargeOutcome{err: &storage.InsufficientCreditsError{Current: acct.balance, Held: acct.held, Needed: amount}}
			continue
		}
		if p.req.Idem != nil && p.req.IdemHash != nil && keysCharged[*p.req.Idem] {
			// A lost key a charge before it in this transaction
			// answers.
			answered[i] = true
		}
		if p.req.Idem != nil && !answered[i] {
			keysCharged[*p.req.Idem] = true
		}
		if answered[i] {
			// Not charged; its hold, ended by the reads above, is
			// released.
			if holdSeq != 0 {
				_, args := acct.next(account, p.now, storage.EntryRelease, amount, 0, -amount, holdSeq, p.h.Ref, "idempotency key answered meanwhile")
				rows.ledger.entry(args)
			}
			outs[i] = chargeOutcome{err: storage.ErrIdemAnswered}
			continue
		}
		pos, err := places.next(ctx, tx, account, r.ProbedAt.UnixMilli())
		if err != nil {
			return nil, err
		}
		e, args := acct.next(account, p.now, storage.EntryCharge, amount, -amount, heldDelta, holdSeq, r.ID, "")
		rows.ledger.entry(args)
		var sealed storage.Sealed
		var sealErr error
		if p.req.Seal != nil {
			sealed, sealErr = p.req.Seal(r, e.Balance)
		}
		if sealErr != nil {
			_, void := acct.next(account, p.now, storage.EntryAdd, amount, amount, 0, 0, "", storage.VoidNote(e.Seq))
			rows.ledger.entry(void)
			outs[i] = chargeOutcome{err: errors.Join(errors.New("storage: seal receipt"), sealErr)}
			continue
		}
		if p.req.Seal != nil {
			r.Receipt = sealed.Receipt
		}
		rows.result(&r, pos)
		if p.req.Idem != nil && p.req.IdemHash != nil {
			// The key BeginIdem could not record (storage.ChargeRequest.IdemHash).
			w.Queue(recordIdemSQL, recordIdemArgs(*p.req.Idem, p.req.IdemHash, sealed.Response, p.now, db.idemTTL)...)
		} else if p.req.Idem != nil {
			w.Queue(completeIdemSQL, completeIdemArgs(*p.req.Idem, sealed.Response, p.now)...)
		}
		outs[i] = chargeOutcome{out: storage.Charged{Balance: e.Balance, Entry: e, Result: r}}
	}
	rows.queueAll(w, account, acct)
	return w, nil
}
