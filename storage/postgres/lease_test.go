package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
)

// TestLeaseExactly: LeaseSlices leases exactly the slices it returns,
// whatever plan PostgreSQL picks. The boxes here run with hash and merge
// joins and materialisation off, so the planner re-runs a LIMIT 1 … FOR
// UPDATE SKIP LOCKED subquery once per outer row (a plan it may pick by
// itself on real data): the statement of b4dd917 then leased one slice
// per row scanned and returned only the first, and the others stayed
// owned by a live box that never worked on them. Three boxes lease a
// 20-slice job one slice at a time, and every slice is leased to exactly
// the box whose call returned it.
func TestLeaseExactly(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	pool := newPool(t, srv, "fleet")
	if _, err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("fleet") + "&options=" + strings.ReplaceAll(url.QueryEscape("-c jit=off"), "+", "%20")
	boxes := make([]*DB, 3)
	for i := range boxes {
		db, err := Open(ctx, dsn, Options{Box: fmt.Sprintf("box%d", i), Lease: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		boxes[i] = db
	}
	acct, err := boxes[0].CreateAccount("lease", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20 * storage.JobSliceSize
	if _, err := boxes[0].AddCredits(acct.ID, n, ""); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("u%d@d%d.test", i, i%400)
	}
	job, err := boxes[0].CreateJob(storage.JobSpec{Account: acct.ID, Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	var slices int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM job_slices WHERE job_id = $1`, job.ID).Scan(&slices); err != nil || slices < 15 {
		t.Fatalf("%d slices (%v)", slices, err)
	}
	// The three boxes lease at once, one slice a call, from several
	// goroutines each, as their lease loops and a restart's would.
	var mu sync.Mutex
	got := map[string]int{} // slices returned to each boot
	var wg sync.WaitGroup
	for i := range 3 * len(boxes) {
		db := boxes[i%len(boxes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				js, err := db.LeaseSlices(1)
				if err != nil {
					t.Error(err)
					return
				}
				if len(js) > 1 {
					t.Errorf("LeaseSlices(1) returned %d slices", len(js))
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				got[db.boot] += len(js)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, b := range boxes {
		var owned int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM job_slices WHERE owner = $1`, b.boot).Scan(&owned); err != nil {
			t.Fatal(err)
		}
		if owned != got[b.boot] {
			t.Errorf("box %s owns %d slices and was given %d", b.box, owned, got[b.boot])
		}
	}
	total := 0
	for _, n := range got {
		total += n
	}
	if total != slices {
		t.Fatalf("%d slices leased of %d", total, slices)
	}
}
