package harness

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Where a fleet's database time goes: the harness starts PostgreSQL with
// pg_stat_statements, empties it before each fleet load and reads it
// after, and reads each box's verifyd_storage_pg_round_trips_total from
// its /metrics before and after.

// pgStatSettings are the server settings of the fleet's PostgreSQL that
// pg_stat_statements needs. It costs the server a little CPU of its own,
// in every figure of scenario 8.
var pgStatSettings = []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_utility=on",
	"pg_stat_statements.track_planning=on"}

// PGStatement is one statement's share of a load, per request (or per
// address of a batch) of that load.
type PGStatement struct {
	// Query is the statement as pg_stat_statements normalizes it,
	// white space folded, cut at 160 characters.
	Query string `json:"query"`
	// Calls and Rows are per request; ExecMs is the statement's
	// execution time per request (the server's wall time running it:
	// a COMMIT's includes its WAL flush), Share its part of the
	// load's total execution time.
	Calls  float64 `json:"calls"`
	Rows   float64 `json:"rows"`
	ExecMs float64 `json:"exec_ms"`
	Share  float64 `json:"share"`
	// Plans is how many times it was planned per request (a prepared
	// statement whose plan is kept is planned once), PlanMs the
	// planning time per request.
	Plans  float64 `json:"plans"`
	PlanMs float64 `json:"plan_ms"`
}

// pgStats reads and resets the fleet database's pg_stat_statements.
type pgStats struct {
	conn *pgx.Conn
}

func openPGStats(ctx context.Context, dsn string) (*pgStats, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return &pgStats{conn: conn}, nil
}

func (s *pgStats) close() {
	if s != nil {
		s.conn.Close(context.Background())
	}
}

// reset empties the statistics (a nil s does nothing).
func (s *pgStats) reset(ctx context.Context) {
	if s == nil {
		return
	}
	_, _ = s.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
}

// read returns the statements of the fleet database since the last
// reset, per request of n, the most time first; the harness's own
// (this connection's) are left out.
func (s *pgStats) read(ctx context.Context, n int) []PGStatement {
	if s == nil || n <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := s.conn.Query(ctx, `SELECT query, calls, rows, total_exec_time, plans, total_plan_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND query NOT LIKE '%pg_stat_statements%'
		ORDER BY total_exec_time DESC`)
	if err != nil {
		return nil
	}
	var out []PGStatement
	var total float64
	var q string
	var calls, nrows, plans int64
	var ms, planMs float64
	_, err = pgx.ForEachRow(rows, []any{&q, &calls, &nrows, &ms, &plans, &planMs}, func() error {
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 160 {
			q = q[:157] + "…"
		}
		out = append(out, PGStatement{Query: q, Calls: float64(calls), Rows: float64(nrows), ExecMs: ms, Plans: float64(plans), PlanMs: planMs})
		total += ms
		return nil
	})
	if err != nil {
		return nil
	}
	for i := range out {
		st := &out[i]
		if total > 0 {
			st.Share = round3(st.ExecMs / total)
		}
		st.Calls, st.Rows, st.ExecMs = round3(st.Calls/float64(n)), round3(st.Rows/float64(n)), round3(st.ExecMs/float64(n))
		st.Plans, st.PlanMs = round3(st.Plans/float64(n)), round3(st.PlanMs/float64(n))
	}
	return out
}

// roundTrips is the boxes' round trips to the database so far
// (verifyd_storage_pg_round_trips_total), or -1 when a box does not
// count them (an older binary).
func roundTrips(boxes []*Verifyd) float64 {
	var sum float64
	for _, b := range boxes {
		m, err := scrapeMetrics(b.Config.Metrics)
		if err != nil {
			return -1
		}
		v, ok := m["verifyd_storage_pg_round_trips_total"]
		if !ok {
			return -1
		}
		sum += v
	}
	return sum
}
