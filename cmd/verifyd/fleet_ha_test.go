package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/internal/faultproxy"
	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/postgres"
)

// The fleet on a PostgreSQL primary with a streaming standby, set up as
// docs/fleet.md "High availability" says: pg_basebackup of the primary,
// a DSN naming both servers with target_session_attrs=read-write. Under
// keyed validations on three boxes and a running batch job the primary
// is stopped at once (pg_ctl stop -m immediate), the standby promoted
// (pg_promote), and the old primary made a standby of the new one
// (pg_rewind). What each box answered is then checked against the new
// primary.

// haCluster is the two servers and the fleet on them.
type haCluster struct {
	primary, standby *pgtest.Server
	f                *faultFleet
}

// startHA starts a primary, a standby streaming from it (synchronous
// when sync: synchronous_standby_names = '*', synchronous_commit on, the
// default) and n boxes whose DSN names both.
func startHA(t *testing.T, n int, cfg string, addrs []string, sync bool) *haCluster {
	return startHAVia(t, n, cfg, addrs, sync, nil)
}

// startHAVia is startHA with the standby's replication link through a
// proxy of the test's (when link is not nil, it is set to it), which
// the test may cut.
func startHAVia(t *testing.T, n int, cfg string, addrs []string, sync bool, link **faultproxy.Proxy) *haCluster {
	t.Helper()
	t.Setenv("VERIFYD_PG_DSN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := pgtest.StartWith(t)
	if err := primary.CreateDatabase(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.MigrateDSN(ctx, primary.DSN("fleet")); err != nil {
		t.Fatal(err)
	}
	source := primary.Addr()
	if link != nil {
		p, err := faultproxy.New(primary.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		*link, source = p, p.Addr()
	}
	standby := pgtest.StartStandby(t, source)
	if sync {
		if err := primary.Set(ctx, "synchronous_standby_names", "*"); err != nil {
			t.Fatal(err)
		}
	}
	if err := primary.WaitStreaming(ctx, 1, sync); err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://%s@%s,%s/fleet?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		pgtest.Superuser, primary.Addr(), standby.Addr())
	db, err := postgres.Open(ctx, dsn, postgres.Options{Box: "test", Lease: fleetLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &faultFleet{dsn: dsn, db: db, addrs: addrs, http: &http.Client{Timeout: 2 * time.Minute}}
	for i := range n {
		demo := "demo_account = false\n"
		if i == 0 {
			demo = "demo_account = true\n"
		}
		c := demo + cfg + fmt.Sprintf("\n[storage]\nbackend = \"postgres\"\ndsn = %q\nbox = \"box%d\"\nlease = %q\ncall_timeout = \"5s\"\n",
			dsn+fmt.Sprintf("&application_name=box%d", i), i, fleetLease.String())
		f.boxes = append(f.boxes, startIn(t, t.TempDir(), c))
	}
	f.key = f.boxes[0].key
	f.ac = adminClient(t, f.boxes[0])
	f.acct = demoAccount(t, f.ac)
	return &haCluster{primary: primary, standby: standby, f: f}
}

// chargeLatency measures what the replication costs a charge: n holds
// and charges one after another on the test's own handle (what a box
// does for a validation), the time of each pair; it logs and returns the
// median and the 99th percentile.
func (h *haCluster) chargeLatency(t *testing.T, n int) (p50, p99 time.Duration) {
	t.Helper()
	ctx := context.Background()
	ds := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		hold, err := h.f.db.Hold(ctx, h.f.acct.ID, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.f.db.Charge(ctx, hold, storage.ChargeRequest{Result: storage.Result{Email: fmt.Sprintf("lat%d@catch.test", i), Status: "valid"}}); err != nil {
			t.Fatal(err)
		}
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2], ds[n*99/100]
}

// failover stops the primary at once, promotes the standby and makes the
// old primary a standby of the new one; it returns when the standby was
// stopped and when the new primary took writes.
func (h *haCluster) failover(t *testing.T) (stopped, promoted time.Time) {
	t.Helper()
	stopped = h.stop()
	promoted = h.promote(t)
	h.rewind(t)
	return stopped, promoted
}

// stop stops the primary at once (pg_ctl stop -m immediate).
func (h *haCluster) stop() time.Time {
	h.primary.StopImmediate()
	return time.Now()
}

// promote makes the standby the primary.
func (h *haCluster) promote(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// rewind makes the stopped primary a standby of the promoted one, and
// swaps their names.
func (h *haCluster) rewind(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.primary.Rewind(h.standby.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := h.standby.WaitStreaming(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	h.primary, h.standby = h.standby, h.primary
}

// readiness polls GET /readyz on every box until each answers want
// (status and body), and returns how long each took; /healthz must answer
// 200 all along.
func (f *faultFleet) readiness(t *testing.T, status int, body string, within time.Duration) []time.Duration {
	t.Helper()
	start := time.Now()
	took := make([]time.Duration, len(f.boxes))
	for i, b := range f.boxes {
		c := &client{t: t, base: b.base}
		for {
			r := c.do("GET", "/readyz", "", "")
			if r.status == status && strings.TrimSpace(string(r.body)) == body {
				took[i] = time.Since(start)
				break
			}
			if h := c.do("GET", "/healthz", "", ""); h.status != 200 {
				t.Errorf("box%d: /healthz %d %s while its database is away: liveness must not depend on it", i, h.status, h.body)
			}
			if time.Since(start) > within {
				t.Fatalf("box%d: /readyz is %d %s after %v, want %d %s", i, r.status, r.body, within, status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return took
}

// waitJob polls the job on box until it ends, answers 500 included (a
// box without its database), for up to within.
func (f *faultFleet) waitJob(t *testing.T, box int, id string, within time.Duration) map[string]any {
	t.Helper()
	c := f.client(t, box)
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		r := c.do("GET", "/v1/jobs/"+id, f.key, "")
		if r.status == 200 {
			m := r.json(t)
			if st := m["status"]; st == "completed" || st == "failed" {
				return m
			}
		} else if r.status != 500 {
			t.Fatalf("GET job: %d %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s has not ended within %v", id, within)
		}
	}
}

// firstWrites is, per box, how long after promoted its first 200 of the
// run came (an answer that ended after stopped: its charge was written
// to the new primary); -1 for a box that answered none.
func (kr *keyedRun) firstWrites(boxes int, stopped, promoted time.Time) []time.Duration {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	first := make([]time.Duration, boxes)
	for i := range first {
		first[i] = -1
	}
	for _, a := range kr.all {
		end := a.at.Add(a.took)
		if a.status != 200 || !end.After(stopped) {
			continue
		}
		if d := end.Sub(promoted); first[a.box] < 0 || d < first[a.box] {
			first[a.box] = d
		}
	}
	return first
}

// settled is how long after promoted the last key answered 500 (or 409)
// got its 200.
func (kr *keyedRun) settled(promoted time.Time) time.Duration {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	failed := map[int]bool{}
	for _, a := range kr.all {
		if a.status != 200 {
			failed[a.i] = true
		}
	}
	var last time.Duration
	for _, a := range kr.all {
		if a.status == 200 && failed[a.i] {
			last = max(last, a.at.Add(a.took).Sub(promoted))
		}
	}
	return last
}

// TestFleetFailoverSync: synchronous replication
// (synchronous_standby_names = '*', synchronous_commit = on). The
// primary is stopped at once under 600 keyed validations on three boxes
// and a 1,000-address batch job; the standby is promoted; the old
// primary is rewound to follow it. Nothing is lost and nothing charged
// twice: every key reaches a 200 (retried with its key after a 500),
// each receipt answered is on the new primary with exactly one charge,
// recorded, and replayed when its key is sent again; the job completes
// with every result; no credit stays held. Each box finds the new
// primary by itself, in a time the test reports.
func TestFleetFailoverSync(t *testing.T) {
	run, addrs := fleetWorld(t, 40, 25, 20*time.Millisecond)
	h := startHA(t, 3, batchConfig(run, "", "concurrency = 16\n"), addrs, true)
	f := h.f
	defer f.dumpLogs(t)
	const keyFmt = "ha-sync-%03d"
	job, kr := h.startLoad(t, addrs, keyFmt, "synchronous")

	// The primary is gone; the standby is promoted only once every box
	// has told its balancer so (/readyz 503), as a failover manager
	// that waits out a few seconds would leave it.
	stopped := h.stop()
	for b, d := range f.readiness(t, 503, `{"status":"unavailable","reason":"database"}`, 30*time.Second) {
		t.Logf("box%d: /readyz 503 database %v after the stop", b, d.Round(time.Millisecond))
	}
	promoted := h.promote(t)
	for b, d := range f.readiness(t, 200, `{"status":"ready"}`, 30*time.Second) {
		t.Logf("box%d: /readyz 200 %v after the promotion", b, d.Round(time.Millisecond))
	}
	h.rewind(t)
	t.Logf("primary stopped; standby promoted %v later; old primary rewound and streaming %v after the stop",
		promoted.Sub(stopped).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))

	bodies := kr.wait(t)
	f.checkFirstWrites(t, kr, stopped, promoted)
	// Every key answered 500 gets its answer when retried with its key
	// within a lease of the promotion (docs/fleet.md, "High
	// availability": a request cut off in the failover may leave its key
	// pending on the new primary, which the box's heartbeat ends).
	settled := kr.settled(promoted)
	t.Logf("the last key answered 500 got its 200 %v after the promotion (lease %v)", settled.Round(time.Millisecond), fleetLease)
	if settled > 2*fleetLease+5*time.Second {
		t.Errorf("a key answered 500 got its 200 only %v after the promotion", settled)
	}
	if kr.statuses[500] == 0 {
		t.Error("no request answered 500: the failover came at no request")
	}
	f.checkKeys(t, keyFmt, bodies, haKeys+latencyCharges) // and the ones chargeLatency made

	f.checkJobComplete(t, job, len(addrs))
	for i, b := range f.boxes {
		if !b.logged("the database's primary changed") && !b.logged("the database is writable again") {
			t.Errorf("box%d logged nothing of the failover", i)
		}
	}
}

// latencyCharges is how many charges chargeLatency times; haKeys how
// many keyed validations the failover tests send.
const latencyCharges, haKeys = 400, 600

// startLoad is the load both failover tests put on the fleet: credits,
// the timed charges (logged as the cost of replication, named by mode),
// a batch job of every address, and haKeys keyed validations of keyFmt,
// 12 at a time. It returns once a third of them are answered.
func (h *haCluster) startLoad(t *testing.T, addrs []string, keyFmt, mode string) (job string, kr *keyedRun) {
	t.Helper()
	f := h.f
	f.addCredits(t, 10_000)
	p50, p99 := h.chargeLatency(t, latencyCharges)
	t.Logf("a hold and a charge, one after another, %s replication: p50 %v, p99 %v", mode, p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	r := f.client(t, 1).do("POST", "/v1/batch", f.key, batchBody(t, addrs, nil))
	if r.status != 202 {
		t.Fatalf("POST /v1/batch: %d %s", r.status, r.body)
	}
	job = r.json(t)["job_id"].(string)
	kr = f.startKeyed(keyFmt, haKeys, 12)
	waitFor(t, func() bool { return int(kr.answered.Load()) >= haKeys/3 })
	return job, kr
}

// checkFirstWrites logs when each box answered its first 200 after the
// promotion, and fails t for a box that answered none.
func (f *faultFleet) checkFirstWrites(t *testing.T, kr *keyedRun, stopped, promoted time.Time) {
	t.Helper()
	for b, d := range kr.firstWrites(len(f.boxes), stopped, promoted) {
		t.Logf("box%d: first 200 %v after the promotion", b, d.Round(time.Millisecond))
		if d < 0 {
			t.Errorf("box%d answered no 200 after the failover", b)
		}
	}
	t.Logf("first answers %v; every answer %v", kr.firstStatuses(), kr.statuses)
}

// checkJobComplete waits for the job, which must complete with all its n
// addresses processed and n results on the new primary.
func (f *faultFleet) checkJobComplete(t *testing.T, job string, n int) {
	t.Helper()
	m := f.waitJob(t, 0, job, 3*time.Minute)
	if m["status"] != "completed" || m["progress"].(map[string]any)["processed"] != float64(n) {
		t.Fatalf("the job after the failover: %v", m)
	}
	results := 0
	if err := f.db.JobResults(t.Context(), job, func(storage.Result) error { results++; return nil }); err != nil || results != n {
		t.Errorf("the job has %d results on the new primary for %d addresses (%v)", results, n, err)
	}
}

// lostLog is what a box logs for each charge it answered that a
// reconciliation did not find (storage/postgres reconcile.go).
const lostLog = "a charge answered 200 is not on the database"

// TestFleetFailoverAsync: asynchronous replication, the standby's link
// cut for a second and a half before the primary is stopped at once, so
// that charges answered 200 in that time exist on the old primary only;
// then the standby is promoted and the old primary rewound. What is lost
// is measured from the client's side (keys answered 200 whose receipt
// has no result on the new primary), and every box reports exactly the
// lost charges it answered, naming their keys
// (verifyd_storage_pg_lost_charges_total, an error line each). Nothing
// is charged twice; every receipt still there is charged once and
// replays; the job completes with every result.
func TestFleetFailoverAsync(t *testing.T) {
	run, addrs := fleetWorld(t, 40, 25, 20*time.Millisecond)
	var link *faultproxy.Proxy
	h := startHAVia(t, 3, batchConfig(run, "", "concurrency = 16\n"), addrs, false, &link)
	f := h.f
	defer f.dumpLogs(t)
	const keyFmt = "ha-async-%03d"
	job, kr := h.startLoad(t, addrs, keyFmt, "asynchronous")
	link.BlackHole()
	cut := time.Now()
	time.Sleep(1500 * time.Millisecond)
	stopped, promoted := h.failover(t)
	t.Logf("replication cut %v before the primary's stop; standby promoted %v after it",
		stopped.Sub(cut).Round(time.Millisecond), promoted.Sub(stopped).Round(time.Millisecond))

	bodies := kr.wait(t)
	f.checkFirstWrites(t, kr, stopped, promoted)

	// What the clients hold and the new primary lacks.
	ctx := context.Background()
	conn := f.conn(t)
	lost := map[string]bool{}
	kept := map[int][]byte{}
	for i, body := range bodies {
		var id string
		err := conn.QueryRow(ctx, `SELECT id FROM results WHERE receipt = $1`, body).Scan(&id)
		switch {
		case err == nil:
			kept[i] = body
		case errors.Is(err, pgx.ErrNoRows):
			lost[fmt.Sprintf(keyFmt, i)] = true
		default:
			t.Fatal(err)
		}
	}
	t.Logf("%d keys answered 200; %d of them lost in the failover (answered in the %v the standby did not receive)",
		len(bodies), len(lost), stopped.Sub(cut).Round(time.Millisecond))
	if len(lost) == 0 {
		t.Error("nothing lost with the replication cut: the test did not make the case it is about")
	}

	// Each box reports the lost charges it answered, by key, once.
	reported := map[string]int{}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		clear(reported)
		for _, b := range f.boxes {
			for _, l := range b.lines(lostLog) {
				var e struct {
					Key string `json:"idempotency_key"`
				}
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("%v: %s", err, l)
				}
				reported[e.Key]++
			}
		}
		if len(reported) >= len(lost) || time.Now().After(deadline) {
			break
		}
	}
	for k := range lost {
		if reported[k] != 1 {
			t.Errorf("lost key %s reported %d times, want once", k, reported[k])
		}
	}
	for k, c := range reported {
		if !lost[k] {
			t.Errorf("key %s reported lost (%d times) though its receipt is on the new primary", k, c)
		}
	}
	t.Logf("reported lost by the boxes: %d", len(reported))

	// What is left is whole: no double charge, every receipt kept is
	// charged once and replays, nothing held, the job complete.
	f.checkKeys(t, keyFmt, kept, haKeys-len(lost)+latencyCharges)
	f.checkJobComplete(t, job, len(addrs))
}
