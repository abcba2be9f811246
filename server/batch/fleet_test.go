package batch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
	"github.com/verifyd/verifyd/storage/postgres"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// fleetDSN starts PostgreSQL with a migrated database for t and returns
// its DSN, and a function that opens a box's DB on it with lease.
func fleetDSN(t *testing.T, lease time.Duration) (string, func(box string) *postgres.DB) {
	t.Helper()
	srv := pgtest.Start(t)
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("fleet")
	if _, err := postgres.MigrateDSN(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	return dsn, func(box string) *postgres.DB {
		db, err := postgres.Open(ctx, dsn, postgres.Options{Box: box, Lease: lease, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

// TestFleetJob: two boxes (two Services, each on its own connection to
// one PostgreSQL) split a 6,000-address job by leasing its slices; box A
// dies in the middle (its connections drop, its boot row stays, as after
// kill -9). Box B takes A's slices once A's lease has run out and ends the
// job: every address has exactly one result, the reservation is settled
// once (6,000 used, 0 refunded), and the webhook is posted once.
func TestFleetJob(t *testing.T) {
	ctx := context.Background()
	_, open := fleetDSN(t, 2*time.Second)
	dbA, dbB := open("a"), open("b")

	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer hook.Close()

	tweak := func(o *Options) { o.Concurrency = 16; o.GroupSize = 1 }
	va, vb := newFake(), newFake()
	va.delay, vb.delay = 20*time.Millisecond, 20*time.Millisecond
	ha, hb := startHooks(t, dbA), startHooks(t, dbB)
	sa := startService(t, dbA, va, func(o *Options) { tweak(o); o.Hooks = ha })
	sb := startService(t, dbB, vb, func(o *Options) { tweak(o); o.Hooks = hb })

	acct := pebbletest.Account(t, dbA, 6000)
	j := submit(t, sa, acct, addresses("f", 6000, 600), hook.URL)
	waitUntil(t, time.Minute, "both boxes at work", func() bool {
		cur, _ := dbB.Job(t.Context(), j.ID)
		va.mu.Lock()
		vb.mu.Lock()
		both := va.calls > 0 && vb.calls > 0
		vb.mu.Unlock()
		va.mu.Unlock()
		return both && cur.Processed >= 1500
	})
	// Box A dies: nothing it has not written survives it.
	dbA.Abandon()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sa.Close(cctx)
	ha.Close(cctx)

	done := waitJob(t, dbB, j.ID, 2*time.Minute)
	if done.Status != storage.JobCompleted || done.Processed != 6000 || done.Used != 6000 || done.Refunded != 0 {
		t.Fatalf("job %+v", done)
	}
	n := 0
	seen := map[int]bool{}
	if err := dbB.JobResults(t.Context(), j.ID, func(r storage.Result) error {
		if seen[r.JobIndex] {
			t.Errorf("index %d has two results", r.JobIndex)
		}
		seen[r.JobIndex] = true
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 6000 {
		t.Fatalf("%d results, want 6,000", n)
	}
	c, _ := dbB.Credits(t.Context(), acct)
	es := storagetest.CheckLedger(t, dbB, acct)
	var reserve, use int64
	for _, e := range es {
		switch e.Kind {
		case storage.EntryReserve:
			reserve += e.Amount
		case storage.EntryUse:
			use += e.Amount
		case storage.EntryRefund:
			t.Errorf("a refund of a completed job: %+v", e)
		}
	}
	if c.Balance != 0 || reserve != 6000 || use != 6000 {
		t.Fatalf("credits %+v, reserved %d, used %d", c, reserve, use)
	}
	waitUntil(t, time.Minute, "the webhook", func() bool { return posts.Load() >= 1 })
	time.Sleep(300 * time.Millisecond) // a second post would come now
	if p := posts.Load(); p != 1 {
		t.Fatalf("the webhook was posted %d times", p)
	}
	t.Logf("box a probed %d groups, box b %d", va.calls, vb.calls)
	_ = sb
}

// TestFleetStraySlice: a slice the database says a live box holds, but
// which that box's scheduler never took (its lease's answer was lost), is
// given back by that box, leased again and processed: the job completes,
// where on b4dd917 it stood still for as long as the box lived. The
// lease is long (a minute), so the job cannot be rescued by it running
// out.
func TestFleetStraySlice(t *testing.T) {
	ctx := context.Background()
	dsn, open := fleetDSN(t, time.Minute)
	db := open("a")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	acct := pebbletest.Account(t, db, 3000)
	addrs := addresses("s", 3000, 300)
	j, err := db.CreateJob(t.Context(), storage.JobSpec{Account: acct, Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	// The box holds one slice before its scheduler runs: a lease whose
	// answer never reached it.
	tag, err := conn.Exec(ctx, `UPDATE job_slices SET owner = $1, leased_at = now() WHERE job_id = $2 AND slice = 0`, db.Boot(), j.ID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("marking slice 0 held: %v %v", tag, err)
	}
	before := slicesGivenBack.Get()
	startService(t, db, newFake(), func(o *Options) { o.Concurrency = 16 })
	done := waitJob(t, db, j.ID, 2*time.Minute)
	if done.Status != storage.JobCompleted || done.Processed != 3000 {
		t.Fatalf("job %+v", done)
	}
	if n := slicesGivenBack.Get() - before; n != 1 {
		t.Fatalf("%d slices given back, want 1", n)
	}
}
