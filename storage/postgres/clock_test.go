package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// TestClockSteps: one box's wall clock jumps 25 hours forward, then 25
// hours back (an NTP step, a VM resumed), while two boxes share keys,
// holds and job slices. The fleet's times stay on the database's clock:
// the stepped box neither sees the other's idempotency records as
// expired (it would replay nothing and purge them), nor writes records
// that expire a day early or late, nor loses its leases (its holds are
// not released, its job slices not taken), nor takes the other's; it
// reports the skew. With the box's wall clock as the store's clock, the
// first step would purge the other box's records.
func TestClockSteps(t *testing.T) {
	ctx := context.Background()
	const lease = 3 * time.Second
	_, _, open := fleetOf(t, lease)
	a, b := open("a"), open("b")
	acct, err := b.CreateAccount(t.Context(), "clock", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCredits(t.Context(), acct.ID, 100, ""); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, 3*storage.JobSliceSize)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("u%d@d%d.test", i, i%300)
	}
	if _, err := b.AddCredits(t.Context(), acct.ID, int64(len(addrs)), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateJob(t.Context(), storage.JobSpec{Account: acct.ID, Addresses: addrs}); err != nil {
		t.Fatal(err)
	}
	leased, err := a.LeaseSlices(t.Context(), 1)
	if err != nil || len(leased) != 1 {
		t.Fatalf("a leases: %v %v", leased, err)
	}
	hold, err := a.Hold(t.Context(), acct.ID, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	resp := storage.IdemResponse{Status: 200, Body: []byte("{}")}
	seq := 0
	for _, step := range []time.Duration{25 * time.Hour, -25 * time.Hour} {
		a.wall.set(func() time.Time { return time.Now().Add(step) })
		if err := a.syncClock(ctx); err != nil { // as its next heartbeat does
			t.Fatal(err)
		}
		if d := a.now().Sub(b.now()); d < -time.Second || d > time.Second {
			t.Fatalf("step %v: the boxes' times differ by %v", step, d)
		}
		if s := clockSkew.Get(); s < step.Seconds()-5 || s > step.Seconds()+5 {
			t.Fatalf("step %v: skew reported %v s", step, s)
		}
		// A key b answered replays on a, and a's purge leaves it.
		seq++
		ref := storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: fmt.Sprintf("clock-b-%d", seq)}
		if out, _, err := b.BeginIdem(t.Context(), ref, []byte("h")); err != nil || out != storage.IdemNew {
			t.Fatalf("b begins: %v %v", out, err)
		}
		if err := b.CompleteIdem(t.Context(), ref, resp); err != nil {
			t.Fatal(err)
		}
		if n, err := a.PurgeIdem(t.Context()); err != nil || n != 0 {
			t.Fatalf("step %v: the stepped box purged %d live records (%v)", step, n, err)
		}
		if out, _, err := a.BeginIdem(t.Context(), ref, []byte("h")); err != nil || out != storage.IdemReplay {
			t.Fatalf("step %v: b's answered key on a: %v %v", step, out, err)
		}
		// A key a answers expires a day from the database's now.
		mine := storage.IdemRef{Account: acct.ID, Endpoint: "POST /v1/validate", Key: fmt.Sprintf("clock-a-%d", seq)}
		if out, _, err := a.BeginIdem(t.Context(), mine, []byte("h")); err != nil || out != storage.IdemNew {
			t.Fatalf("a begins: %v %v", out, err)
		}
		if err := a.CompleteIdem(t.Context(), mine, resp); err != nil {
			t.Fatal(err)
		}
		rec, err := b.GetIdem(t.Context(), mine)
		if err != nil {
			t.Fatal(err)
		}
		if d := rec.ExpiresAt.Sub(b.now()); d < 23*time.Hour || d > 25*time.Hour {
			t.Fatalf("step %v: a's record expires in %v", step, d)
		}
		// A lease later, a still holds what it held.
		time.Sleep(lease + lease/2)
		if n, err := b.Reap(); err != nil || n != 0 {
			t.Fatalf("step %v: b released %d holds of the stepped box (%v)", step, n, err)
		}
		got, err := b.LeaseSlices(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, js := range got {
			if js.Job.ID == leased[0].Job.ID && js.Slice == leased[0].Slice {
				t.Fatalf("step %v: b took the stepped box's slice", step)
			}
		}
		for _, js := range got {
			if err := b.ReturnSlice(t.Context(), js.Job.ID, js.Slice); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := a.Charge(t.Context(), hold, storage.ChargeRequest{Result: storage.Result{Email: "a@x.test", Status: "valid"}}); err != nil {
		t.Fatalf("the stepped box's hold, after both steps: %v", err)
	}
}
