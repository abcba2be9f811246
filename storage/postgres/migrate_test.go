package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifyd/verifyd/internal/pgtest"
)

func newPool(t testing.TB, srv *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, srv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrate: an empty database is refused by Check, migrated once (by
// three Migrates at the same time, as three boxes starting together
// would), then accepted; a second Migrate does nothing; a version this
// binary does not know, or a missing one, is refused with ErrSchema.
func TestMigrate(t *testing.T) {
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t, srv, "migrate")
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations %v, %v", ms, err)
	}

	if err := Check(ctx, pool); !errors.Is(err, ErrSchema) {
		t.Fatalf("Check of an empty database: %v", err)
	}
	var wg sync.WaitGroup
	applied := make([][]int, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	total := 0
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("Migrate %d: %v", i, errs[i])
		}
		total += len(applied[i])
	}
	if total != len(ms) {
		t.Fatalf("three concurrent Migrates applied %v: want each of the %d versions once", applied, len(ms))
	}
	if err := Check(ctx, pool); err != nil {
		t.Fatalf("Check after Migrate: %v", err)
	}
	if again, err := Migrate(ctx, pool); err != nil || len(again) != 0 {
		t.Fatalf("second Migrate applied %v, %v", again, err)
	}
	// The schema is there: the tables of 0001 take a row.
	if _, err := pool.Exec(ctx, `INSERT INTO accounts (id, name, plan, webhook_secret, created_at) VALUES ('acct_x', 'x', 'free', 's', now())`); err != nil {
		t.Fatal(err)
	}
	// An overdraft is refused by the table itself.
	if _, err := pool.Exec(ctx, `UPDATE accounts SET held = 5 WHERE id = 'acct_x'`); err == nil {
		t.Fatal("held above the balance was accepted")
	}

	// A newer verifyd migrated the database further.
	if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, 'future', now())`, len(ms)+1); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, pool); !errors.Is(err, ErrSchema) {
		t.Fatalf("Check of a newer schema: %v", err)
	}
	if _, err := Migrate(ctx, pool); !errors.Is(err, ErrSchema) {
		t.Fatalf("Migrate of a newer schema: %v", err)
	}
	// A version missing in the middle.
	if _, err := pool.Exec(ctx, `DELETE FROM schema_migrations WHERE version > 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations VALUES (3, 'gap', now())`); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, pool); !errors.Is(err, ErrSchema) {
		t.Fatalf("Check with a gap or an unknown version: %v", err)
	}
}

// TestMigrateRecordsDeletedRows: a row of schema_migrations deleted by
// hand (its objects still there) makes Check name the missing versions,
// and migrate write the rows again without running their SQL, which would
// fail on their objects ("relation ... already exists"). A version whose
// objects are really missing still runs.
func TestMigrateRecordsDeletedRows(t *testing.T) {
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t, srv, "repair")
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	n := len(ms)
	if _, err := pool.Exec(ctx, `DELETE FROM schema_migrations WHERE version IN (2, $1)`, n); err != nil {
		t.Fatal(err)
	}
	err = Check(ctx, pool)
	want := fmt.Sprintf("lacks versions 2, %d of 1..%d", n, n)
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check: %v; want it to say %q", err, want)
	}
	r, err := MigrateReport(ctx, pool)
	if err != nil {
		t.Fatalf("migrate after rows were deleted: %v", err)
	}
	if len(r.Applied) != 0 || !slices.Equal(r.Recorded, []int{2, n}) {
		t.Fatalf("applied %v, recorded %v; want only [2 %d] recorded", r.Applied, r.Recorded, n)
	}
	if err := Check(ctx, pool); err != nil {
		t.Fatalf("Check after the repair: %v", err)
	}
	// Versions missing with their objects (a database at version 1):
	// they run.
	fresh := newPool(t, srv, "repairfresh")
	if _, err := migrate(ctx, fresh, ms, 1); err != nil {
		t.Fatal(err)
	}
	r, err = MigrateReport(ctx, fresh)
	if err != nil || len(r.Recorded) != 0 || len(r.Applied) != n-1 {
		t.Fatalf("a database at version 1: applied %v, recorded %v, %v; want 2..%d applied", r.Applied, r.Recorded, err, n)
	}
}

// TestMigrateJobReasons: a database at version 5 (before jobs counted
// their reasons) holds a job whose results carry receipts; migrations 6
// and 7 count them, and the job reads back with its breakdown. A result
// without a receipt, or whose receipt has no reason, counts in Counts
// only.
func TestMigrateJobReasons(t *testing.T) {
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t, srv, "reasons")
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(ctx, pool, ms, 5); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO accounts (id, name, plan, webhook_secret, created_at) VALUES ('acct_r', 'r', 'free', 's', now())`)
	const job = "0193a6f2-5c1e-7b3a-9f4e-2d8c1a7e4b10"
	exec(`INSERT INTO jobs (id, account, status, total, processed, counts, reserved, used, created_at, started_at, completed_at)
		VALUES ($1, 'acct_r', 'completed', 5, 5, '{"valid":2,"invalid":2,"unknown":1}', 5, 5, now(), now(), now())`, job)
	for i, r := range []struct{ status, receipt string }{
		{"valid", `{"status":"valid","checks":{"reason":"ok","mx":true}}`},
		{"valid", `{"status":"valid","checks":{"reason":"ok"}}`},
		{"invalid", `{"status":"invalid","checks":{"reason":"mailbox_not_found"}}`},
		{"invalid", `{"status":"invalid","checks":{}}`},
		{"unknown", ""},
	} {
		var receipt []byte
		if r.receipt != "" {
			receipt = []byte(r.receipt)
		}
		exec(`INSERT INTO results (id, account, pos, history_id, kind, email, status, score, job_id, job_index, latency_ms, probed_at, receipt)
			VALUES ($1, 'acct_r', $2, $2, 'batch', $3, $4, 50, $5, $7, 10, now(), $6)`,
			fmt.Sprintf("r%d", i), int64(i), fmt.Sprintf("a%d@x.test", i), r.status, job, receipt, int32(i))
	}
	done, err := migrate(ctx, pool, ms, 7)
	if err != nil || !slices.Equal(done.Applied, []int{6, 7}) || len(done.Recorded) != 0 {
		t.Fatalf("Migrate from version 5 applied %v, %v; want [6 7]", done, err)
	}
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, srv.DSN("reasons"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	j, err := db.Job(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"valid/ok": 2, "invalid/mailbox_not_found": 1}
	if !maps.Equal(j.Reasons, want) || j.Counts["valid"] != 2 || j.Counts["unknown"] != 1 {
		t.Fatalf("after migration: reasons %v, counts %v; want reasons %v", j.Reasons, j.Counts, want)
	}
}
