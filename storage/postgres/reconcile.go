package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconciliation after a failover. With asynchronous replication a
// standby promoted in a failover lacks the commits the old primary had
// not yet sent it: a charge the box answered 200 (its flush reached the
// old primary's disk) can be gone from the new primary, its receipt in
// the client's hands and its ledger entry, result and history row
// nowhere. A ledger must not lose such a charge silently. Each box keeps
// the charges it answered in the last journalWindow (the journal, in
// memory); when the watch finds the database writable again after an
// outage, or another primary or timeline than before, the box looks for
// those answered in the journalWindow before the outage began on the
// database and reports those it does not find: an
// error line each (account, result, ledger entry, idempotency key, when
// answered), a summary line, and verifyd_storage_pg_lost_charges_total.
// With synchronous replication (docs/fleet.md, "High availability") it
// finds none: a flush waits for the standby too.
//
// A lost charge was answered: the client holds its signed receipt, and
// the validation was not paid for (the balance is one credit higher than
// it should be); its history row is gone. A retry of its Idempotency-Key
// is processed again (the key's record went with it).

// journalWindow is how far before the database went away a
// reconciliation looks: asynchronous replication lags by milliseconds on
// a healthy link, by seconds under load; a charge answered longer before
// is taken to have reached the standby. The window is counted from the
// outage's start, however long the outage was. journalMax bounds the
// journal (about 10 MB); a variable, for tests.
var journalWindow = 2 * time.Minute

const journalMax = 1 << 17

// answeredCharge is a charge the box answered.
type answeredCharge struct {
	at      time.Time // when answered (monotonic)
	account string
	result  string
	seq     uint64 // its ledger entry's
	key     string // its Idempotency-Key, "" none
}

// journal is a ring of the charges answered last.
type journal struct {
	mu   sync.Mutex
	ring []answeredCharge
	next int
}

func (j *journal) add(c answeredCharge) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.ring) < journalMax {
		j.ring = append(j.ring, c)
		return
	}
	j.ring[j.next] = c
	j.next = (j.next + 1) % journalMax
}

// since returns the charges answered at or after t.
func (j *journal) since(t time.Time) []answeredCharge {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []answeredCharge
	for _, c := range j.ring {
		if !c.at.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// reconcile looks for the charges of the journal answered after after
// on the database and reports those it does not find; it returns how
// many it checked and how many are lost.
func (db *DB) reconcile(ctx context.Context, after time.Time) (checked, lost int, err error) {
	cs := db.journal.since(after)
	if len(cs) == 0 {
		reconciliations.Inc()
		return 0, 0, nil
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.result
	}
	rows, err := db.pool.Query(ctx, `SELECT id FROM results WHERE id = ANY($1)`, ids)
	if err != nil {
		return len(cs), 0, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return len(cs), 0, err
	}
	there := make(map[string]bool, len(found))
	for _, id := range found {
		there[id] = true
	}
	for _, c := range cs {
		if there[c.result] {
			continue
		}
		lost++
		lostCharges.Inc()
		db.log.Error("a charge answered 200 is not on the database: lost in a failover (asynchronous replication); the client holds its receipt, the credit was not taken",
			"account", c.account, "result", c.result, "ledger_seq", c.seq, "idempotency_key", c.key,
			"answered_ago", time.Since(c.at).Round(time.Millisecond))
	}
	reconciliations.Inc()
	if lost > 0 {
		db.log.Error("reconciliation after the database came back: charges answered and lost", "checked", len(cs), "lost", lost)
	} else {
		db.log.Info("reconciliation after the database came back: every charge answered is there", "checked", len(cs))
	}
	return len(cs), lost, nil
}
