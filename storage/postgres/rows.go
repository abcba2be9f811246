package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/storage"
)

// manyRows gathers the rows a combined transaction writes, table by
// table, and queues one statement for all of them (an INSERT … SELECT
// FROM unnest of one array per column for each table): a transaction of
// k charges sends one statement, not several per charge, and the
// database parses, plans and runs it once.
type manyRows struct {
	ledger ledgerRows
	holds  struct {
		account, ref, boot []string
		seq, amount        []int64
		at                 []time.Time
	}
	results struct {
		id, account, kind, email, status, cachedFrom []string
		pos, historyID, latencyMs                    []int64
		score                                        []int32
		jobID                                        []*string
		jobIndex                                     []*int32
		probedAt                                     []time.Time
		receipt                                      [][]byte
	}
	// cache is by lower-cased address: a second result of an address in
	// the same transaction replaces the first (ON CONFLICT cannot change
	// a row twice in one statement).
	cache      map[[2]string]int
	cacheOrder []cacheRow
}

type cacheRow struct {
	account, email, resultID string
	probedAt                 time.Time
}

type ledgerRows struct {
	account, kind, ref, note      []string
	seq, amount, delta, bal, held []int64
	holdSeq                       []*int64
	at                            []time.Time
}

// entry adds a ledger entry, of insertEntry's arguments.
func (l *ledgerRows) entry(args []any) {
	l.account = append(l.account, args[0].(string))
	l.seq = append(l.seq, args[1].(int64))
	l.at = append(l.at, args[2].(time.Time))
	l.kind = append(l.kind, args[3].(string))
	l.amount = append(l.amount, args[4].(int64))
	l.delta = append(l.delta, args[5].(int64))
	l.bal = append(l.bal, args[6].(int64))
	l.held = append(l.held, args[7].(int64))
	l.holdSeq = append(l.holdSeq, args[8].(*int64))
	l.ref = append(l.ref, args[9].(string))
	l.note = append(l.note, args[10].(string))
}

func (m *manyRows) hold(account string, seq, amount int64, ref, boot string, at time.Time) {
	h := &m.holds
	h.account, h.seq, h.amount = append(h.account, account), append(h.seq, seq), append(h.amount, amount)
	h.ref, h.boot, h.at = append(h.ref, ref), append(h.boot, boot), append(h.at, at)
}

// result adds a prepared result with its history id and position, and
// its cache entry unless it was served from the cache.
func (m *manyRows) result(r *storage.Result, pos int64) {
	x := &m.results
	var job *string
	var index *int32
	if r.Kind == storage.KindBatch {
		j, i := r.JobID, int32(r.JobIndex)
		job, index = &j, &i
	}
	x.id, x.account, x.kind, x.email = append(x.id, r.ID), append(x.account, r.Account), append(x.kind, r.Kind), append(x.email, r.Email)
	x.status, x.cachedFrom = append(x.status, r.Status), append(x.cachedFrom, r.CachedFrom)
	x.pos, x.historyID, x.latencyMs = append(x.pos, pos), append(x.historyID, int64(r.HistoryID)), append(x.latencyMs, r.LatencyMs)
	x.score, x.jobID, x.jobIndex = append(x.score, int32(r.Score)), append(x.jobID, job), append(x.jobIndex, index)
	x.probedAt, x.receipt = append(x.probedAt, r.ProbedAt), append(x.receipt, r.Receipt)
	if r.CachedFrom != "" || r.SkipCache {
		return
	}
	c := cacheRow{account: r.Account, email: storage.CacheEmail(r.Email), resultID: r.ID, probedAt: r.ProbedAt}
	k := [2]string{c.account, c.email}
	if m.cache == nil {
		m.cache = map[[2]string]int{}
	}
	if i, ok := m.cache[k]; ok {
		m.cacheOrder[i] = c
		return
	}
	m.cache[k] = len(m.cacheOrder)
	m.cacheOrder = append(m.cacheOrder, c)
}

// writeAllSQL writes every row of a charge transaction and its account's
// new credits in one statement: each table's rows from one array per
// column (none: empty arrays insert nothing), then the account's row.
// One statement, not five: each costs the server its own round of work.
const writeAllSQL = `WITH l AS (INSERT INTO ledger (account, seq, at, kind, amount, delta, balance, held, hold_seq, ref, note)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[], $4::text[], $5::bigint[], $6::bigint[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::text[])),
	h AS (INSERT INTO holds (account, seq, amount, ref, boot, at)
		SELECT * FROM unnest($12::text[], $13::bigint[], $14::bigint[], $15::text[], $16::text[], $17::timestamptz[])),
	r AS (INSERT INTO results (` + resultCols + `)
		SELECT * FROM unnest($18::text[], $19::text[], $20::bigint[], $21::bigint[], $22::text[], $23::text[], $24::text[],
			$25::int[], $26::text[], $27::int[], $28::bigint[], $29::timestamptz[], $30::text[], $31::bytea[])),
	c AS (INSERT INTO cache (account, email, result_id, probed_at)
		SELECT * FROM unnest($32::text[], $33::text[], $34::text[], $35::timestamptz[])
		ON CONFLICT (account, email) DO UPDATE SET result_id = excluded.result_id, probed_at = excluded.probed_at)
	UPDATE accounts SET balance = $37, held = $38, next_seq = $39 WHERE id = $36`

// queueAll queues the rows gathered and the account's new credits into
// b as one statement (writeAllSQL).
func (m *manyRows) queueAll(b *pgx.Batch, account string, r acctRow) {
	l, h, x := &m.ledger, &m.holds, &m.results
	n := len(m.cacheOrder)
	cAccount, cEmail, cID, cAt := make([]string, n), make([]string, n), make([]string, n), make([]time.Time, n)
	for i, c := range m.cacheOrder {
		cAccount[i], cEmail[i], cID[i], cAt[i] = c.account, c.email, c.resultID, c.probedAt
	}
	b.Queue(writeAllSQL,
		l.account, l.seq, l.at, l.kind, l.amount, l.delta, l.bal, l.held, l.holdSeq, l.ref, l.note,
		h.account, h.seq, h.amount, h.ref, h.boot, h.at,
		x.id, x.account, x.pos, x.historyID, x.kind, x.email, x.status, x.score, x.jobID, x.jobIndex, x.latencyMs,
		x.probedAt, x.cachedFrom, x.receipt,
		cAccount, cEmail, cID, cAt,
		account, r.balance, r.held, int64(r.seq))
}
