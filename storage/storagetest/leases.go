package storagetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/verifyd/verifyd/storage"
)

// testJobLeases: the boxes of a fleet split a job by leasing its slices
// (storage.JobLeases). A slice is leased to one box at a time, holds the
// job's addresses of its domains, lists those without a result, is free
// again as soon as it is given back or its box stops; a running job with
// every result written but not ended is handed out as Slice −1; the
// accounts with the fewest slices leased go first. Skipped on a backend
// that does not implement storage.JobLeases (Pebble: one box runs every
// job).
func testJobLeases(t *testing.T, b backend) {
	s := b.Open(t, NewClock())
	l := leases(t, s)
	ctx := t.Context()
	if got, err := l.LeasedSlices(ctx); err != nil || len(got) != 0 {
		t.Fatalf("LeasedSlices of a new store: %+v, %v", got, err)
	}
	if got, err := l.LeaseSlices(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("LeaseSlices without a job: %+v, %v", got, err)
	}

	// 2,500 addresses of 40 domains: each slice holds the addresses of
	// its domains (storage.JobSliceOf).
	const n = 2500
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("u%d@d%d.test", i, i%40)
	}
	want := map[int][]int{} // slice → its address indexes
	for i, a := range addrs {
		sl := storage.JobSliceOf(a, storage.JobSliceCount(n))
		want[sl] = append(want[sl], i)
	}
	if len(want) < 2 {
		t.Fatalf("%d slices: the test needs several", len(want))
	}
	acct := account(t, s, 3*n)
	j, err := s.CreateJob(ctx, storage.JobSpec{Account: acct, Addresses: addrs})
	noErr(t, err, "CreateJob")

	// Leased one call at a time, each slice once.
	first, err := l.LeaseSlices(ctx, 1)
	if err != nil || len(first) != 1 || first[0].Job.ID != j.ID || first[0].Job.Account != acct || first[0].Job.Total != n ||
		want[first[0].Slice] == nil {
		t.Fatalf("LeaseSlices(1): %+v, %v", first, err)
	}
	sl := first[0].Slice
	if held, err := l.LeasedSlices(ctx); err != nil || len(held) != 1 || held[0].Job.ID != j.ID || held[0].Slice != sl {
		t.Fatalf("LeasedSlices after leasing slice %d: %+v, %v", sl, held, err)
	}
	rest, err := l.LeaseSlices(ctx, 10)
	noErr(t, err, "LeaseSlices(10)")
	leased := map[int]bool{sl: true}
	for _, js := range rest {
		if js.Job.ID != j.ID || want[js.Slice] == nil || leased[js.Slice] {
			t.Fatalf("LeaseSlices(10) after slice %d: %+v", sl, rest)
		}
		leased[js.Slice] = true
	}
	if len(leased) != len(want) {
		t.Fatalf("slices %v leased, want %v", slices.Sorted(maps.Keys(leased)), slices.Sorted(maps.Keys(want)))
	}
	if more, err := l.LeaseSlices(ctx, 10); err != nil || len(more) != 0 {
		t.Fatalf("LeaseSlices with every slice leased: %+v, %v", more, err)
	}
	checkLeased(t, l, j.ID, slices.Sorted(maps.Keys(want)))

	// A slice's addresses without a result, in index order.
	sliceAddrs := func(slice int) []int {
		t.Helper()
		var got []int
		err := l.SliceAddresses(ctx, j.ID, slice, func(i int, a string) error {
			if i < 0 || i >= n || a != addrs[i] {
				t.Fatalf("slice %d: address %d is %q", slice, i, a)
			}
			got = append(got, i)
			return nil
		})
		noErr(t, err, "SliceAddresses(%d)", slice)
		return got
	}
	if got := sliceAddrs(sl); !slices.Equal(got, want[sl]) {
		t.Fatalf("SliceAddresses(%d): %d addresses %v…, want %d %v…", sl, len(got), got[:min(5, len(got))], len(want[sl]), want[sl][:5])
	}
	_, err = s.StartJob(ctx, j.ID)
	noErr(t, err, "StartJob")
	putResults(t, s, j.ID, addrs, want[sl][:3])
	if got := sliceAddrs(sl); !slices.Equal(got, want[sl][3:]) {
		t.Fatalf("SliceAddresses(%d) after 3 results: %d addresses, want %d", sl, len(got), len(want[sl])-3)
	}
	err = l.SliceAddresses(ctx, "not-a-job", sl, func(int, string) error { return nil })
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("SliceAddresses of a malformed job id: %v", err)
	}

	// A slice given back is free at once.
	noErr(t, l.ReturnSlice(ctx, j.ID, sl), "ReturnSlice")
	var others []int
	for k := range want {
		if k != sl {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	checkLeased(t, l, j.ID, others)
	if again, err := l.LeaseSlices(ctx, 10); err != nil || len(again) != 1 || again[0].Job.ID != j.ID || again[0].Slice != sl {
		t.Fatalf("LeaseSlices after ReturnSlice(%d): %+v, %v", sl, again, err)
	}

	// The slices of a box that stopped go to the others: after a restart
	// (on PostgreSQL another box, the first one closed) every slice is
	// free.
	s = b.Reopen(t, s)
	l = leases(t, s)
	checkLeased(t, l, j.ID, nil)
	all, err := l.LeaseSlices(ctx, 10)
	if err != nil || len(all) != len(want) {
		t.Fatalf("LeaseSlices after the restart: %+v, %v; want the %d slices", all, err, len(want))
	}
	checkLeased(t, l, j.ID, slices.Sorted(maps.Keys(want)))

	// Every result written, the job not ended (its box stopped between
	// the last result and FinishJob): it is handed out as Slice −1 for
	// the caller to end.
	var pending []int
	noErr(t, s.PendingAddresses(ctx, j.ID, func(i int, _ string) error { pending = append(pending, i); return nil }), "PendingAddresses")
	if len(pending) != n-3 {
		t.Fatalf("%d addresses pending, want %d", len(pending), n-3)
	}
	putResults(t, s, j.ID, addrs, pending)
	stuck, err := l.LeaseSlices(ctx, 10)
	if err != nil || len(stuck) != 1 || stuck[0].Slice != -1 || stuck[0].Job.ID != j.ID ||
		stuck[0].Job.Processed != n || stuck[0].Job.Status != storage.JobRunning {
		t.Fatalf("LeaseSlices with a job done but not ended: %+v, %v", stuck, err)
	}
	_, err = s.FinishJob(ctx, j.ID, storage.JobFinish{Status: storage.JobCompleted})
	noErr(t, err, "FinishJob")
	if got, err := l.LeaseSlices(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("LeaseSlices with the job ended: %+v, %v", got, err)
	}

	// Two accounts' jobs: one call leasing two slices takes one of each.
	x, y := account(t, s, n), account(t, s, n)
	jx, err := s.CreateJob(ctx, storage.JobSpec{Account: x, Addresses: addrs})
	noErr(t, err, "CreateJob")
	jy, err := s.CreateJob(ctx, storage.JobSpec{Account: y, Addresses: addrs})
	noErr(t, err, "CreateJob")
	two, err := l.LeaseSlices(ctx, 2)
	if err != nil || len(two) != 2 || two[0].Job.Account == two[1].Job.Account {
		t.Fatalf("LeaseSlices(2) over two accounts: %+v, %v", two, err)
	}
	for _, js := range two {
		if js.Job.ID != jx.ID && js.Job.ID != jy.ID {
			t.Fatalf("leased a slice of job %s", js.Job.ID)
		}
	}
}

// checkLeased fails unless the box holds exactly the slices of the job.
func checkLeased(t *testing.T, l storage.JobLeases, job string, want []int) {
	t.Helper()
	held, err := l.LeasedSlices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, js := range held {
		if js.Job.ID != job {
			t.Fatalf("LeasedSlices: a slice of job %s", js.Job.ID)
		}
		got = append(got, js.Slice)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("LeasedSlices: slices %v, want %v", got, want)
	}
}

// putResults writes a valid result for each of the job's indexes.
func putResults(t *testing.T, s storage.Store, job string, addrs []string, indexes []int) {
	t.Helper()
	rs := make([]storage.JobResult, len(indexes))
	for k, i := range indexes {
		rs[k] = storage.JobResult{Index: i, Result: result(addrs[i], "valid")}
	}
	_, err := s.PutJobResults(t.Context(), job, rs)
	noErr(t, err, "PutJobResults")
}
