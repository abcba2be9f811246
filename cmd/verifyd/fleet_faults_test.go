package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/internal/faultproxy"
	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/postgres"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// Fleet mode on a flaky link: each box reaches the one PostgreSQL through
// its own faultproxy (internal/faultproxy), which the test switches
// between faults (latency, resets, a black hole) while the boxes answer
// keyed validations and run a batch job. The test's own database handle
// goes straight to the server. storage.lease is fleetLease (3 s) and
// storage.call_timeout a few seconds, so that requests end quickly.

// failOpenLog is what a box logs when it processes a request without its
// Idempotency-Key recorded (fail-open: its charge then records it).
const failOpenLog = "idempotency store unavailable; processing without it"

// faultFleet is a fleet whose boxes reach the database through proxies.
type faultFleet struct {
	dsn     string       // straight to the server
	db      *postgres.DB // the test's handle, on dsn
	proxies []*faultproxy.Proxy
	boxes   []*instance
	key     string
	acct    adminapi.Account
	ac      *adminapi.Client
	addrs   []string // the world's addresses, one a key
	http    *http.Client
}

// startFaultFleet starts PostgreSQL and n boxes with cfg, box i's
// storage.dsn on proxies[i], storage.lease fleetLease and
// storage.call_timeout callTimeout.
func startFaultFleet(t *testing.T, n int, cfg string, addrs []string, callTimeout time.Duration) *faultFleet {
	return startFaultFleetLease(t, n, cfg, addrs, callTimeout, fleetLease)
}

// startFaultFleetLease is startFaultFleet with storage.lease lease.
func startFaultFleetLease(t *testing.T, n int, cfg string, addrs []string, callTimeout, lease time.Duration) *faultFleet {
	t.Helper()
	// VERIFYD_PG_DSN would replace the proxies' DSNs.
	t.Setenv("VERIFYD_PG_DSN", "")
	dsn, db, srv := fleetServer(t)
	if lease != fleetLease {
		// The test's own handle reaps with its lease too.
		db.Close()
		var err error
		if db, err = postgres.Open(context.Background(), dsn, postgres.Options{Box: "test", Lease: lease}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
	}
	f := &faultFleet{dsn: dsn, db: db, addrs: addrs, http: &http.Client{Timeout: 2 * time.Minute}}
	for i := range n {
		p, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", srv.Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		f.proxies = append(f.proxies, p)
		demo := "demo_account = false\n"
		if i == 0 {
			demo = "demo_account = true\n"
		}
		// application_name names the box's sessions in pg_stat_activity.
		pdsn := fmt.Sprintf("postgres://%s@%s/fleet?sslmode=disable&application_name=box%d", pgtest.Superuser, p.Addr(), i)
		c := demo + cfg + fmt.Sprintf("\n[storage]\nbackend = \"postgres\"\ndsn = %q\nbox = \"box%d\"\nlease = %q\ncall_timeout = %q\n",
			pdsn, i, lease.String(), callTimeout.String())
		f.boxes = append(f.boxes, startIn(t, t.TempDir(), c))
	}
	f.key = f.boxes[0].key
	f.ac = adminClient(t, f.boxes[0])
	f.acct = demoAccount(t, f.ac)
	return f
}

func (f *faultFleet) client(t *testing.T, box int) *client {
	return &client{t: t, base: f.boxes[box].base, key: f.key}
}

func (f *faultFleet) addCredits(t *testing.T, n int64) {
	t.Helper()
	if _, err := f.ac.AdjustCredits(context.Background(), f.acct.ID, adminapi.AdjustCredits{Add: &n}); err != nil {
		t.Fatal(err)
	}
}

// attempt is one POST /v1/validate with an Idempotency-Key.
type attempt struct {
	box, i int
	at     time.Time
	took   time.Duration
	status int
	body   []byte
	replay bool
	err    error // no answer
}

// validate sends the validation of key i of keyFmt (its address is
// f.addrs[i]) to box.
func (f *faultFleet) validate(box int, keyFmt string, i int) attempt {
	a := attempt{box: box, i: i, at: time.Now()}
	body := fmt.Sprintf(`{"email":%q}`, f.addrs[i%len(f.addrs)])
	req, err := http.NewRequest("POST", f.boxes[box].base+"/v1/validate", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf(keyFmt, i))
	resp, err := f.http.Do(req)
	if err != nil {
		a.err, a.took = err, time.Since(a.at)
		return a
	}
	a.body, a.err = io.ReadAll(resp.Body)
	resp.Body.Close()
	a.took, a.status, a.replay = time.Since(a.at), resp.StatusCode, resp.Header.Get("Idempotent-Replay") == "true"
	return a
}

// keyedRun is keyed validations under way (startKeyed).
type keyedRun struct {
	answered atomic.Int32 // first answers so far
	wg       sync.WaitGroup
	mu       sync.Mutex
	first    []attempt      // each key's first answer
	all      []attempt      // every attempt
	bodies   map[int][]byte // each key's 200
	errs     []string       // unexpected answers
	worst    time.Duration  // the longest attempt
	statuses map[int]int    // every answer's status, counted
}

// startKeyed sends n validations with the Idempotency-Keys keyFmt of i,
// at most conc at once, key i first to box i%boxes; a key answered 500,
// or 409 in progress, is retried with its key on the next box after a
// pause, until 200, for up to three minutes.
func (f *faultFleet) startKeyed(keyFmt string, n, conc int) *keyedRun {
	r := &keyedRun{first: make([]attempt, n), bodies: map[int][]byte{}, statuses: map[int]int{}}
	sem := make(chan struct{}, conc)
	for i := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			for try := 0; ; try++ {
				a := f.validate((i+try)%len(f.boxes), keyFmt, i)
				r.mu.Lock()
				if try == 0 {
					r.first[i] = a
					r.answered.Add(1)
				}
				r.worst = max(r.worst, a.took)
				r.statuses[a.status]++
				r.all = append(r.all, a)
				r.mu.Unlock()
				switch {
				case a.err == nil && a.status == 200:
					r.mu.Lock()
					r.bodies[i] = a.body
					r.mu.Unlock()
					return
				case a.err != nil || (a.status != 500 && a.status != 409):
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("key %d, try %d on box%d: %d %s %v", i, try, a.box, a.status, a.body, a.err))
					r.mu.Unlock()
					return
				case time.Since(start) > 3*time.Minute:
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("key %d: still %d %s after three minutes of retries", i, a.status, a.body))
					r.mu.Unlock()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	return r
}

// wait waits for every key's end and fails t for any key that did not
// reach a 200; it returns the 200s by key.
func (r *keyedRun) wait(t *testing.T) map[int][]byte {
	t.Helper()
	r.wg.Wait()
	for _, e := range r.errs {
		t.Error(e)
	}
	return r.bodies
}

// conn is a connection of the test's own, straight to the server, closed
// when the test ends.
func (f *faultFleet) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// checkKeys is what a client sees of the keys of keyFmt answered 200
// (bodies): each one's answer is recorded, so that the key sent again,
// as a client that lost its answer would, replays the receipt and is not
// charged again; the ledger adds up, with one charge per key (keys in
// all, this test's earlier ones included) and exactly one charge for
// each receipt answered; no credit stays held (checkHolds); every key
// answered 200 is recorded, also those processed while BeginIdem failed
// (their charge records them).
func (f *faultFleet) checkKeys(t *testing.T, keyFmt string, bodies map[int][]byte, keys int) {
	t.Helper()
	ctx := context.Background()
	conn := f.conn(t)
	rows, err := conn.Query(ctx, `SELECT key FROM idem WHERE account = $1 AND endpoint = 'POST /v1/validate' AND done`, f.acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i := range bodies {
		if !slices.Contains(recorded, fmt.Sprintf(keyFmt, i)) {
			t.Errorf("key %d answered 200 with nothing recorded: sent again, it would be charged again", i)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			a := f.validate(i%len(f.boxes), keyFmt, i)
			switch {
			case a.err != nil || a.status != 200:
				t.Errorf("key %d sent again: %d %s %v", i, a.status, a.body, a.err)
			case !a.replay:
				t.Errorf("key %d sent again after its 200: processed again, not replayed (charged twice)", i)
			case !bytes.Equal(a.body, body):
				t.Errorf("key %d sent again: its replay differs from the receipt answered", i)
			}
		}()
	}
	wg.Wait()
	f.checkHolds(t)
	es := storagetest.CheckLedger(t, f.db, f.acct.ID)
	charged := map[string]int{}
	n := 0
	for _, e := range es {
		if e.Kind == storage.EntryCharge {
			charged[e.Ref]++
			n++
		}
	}
	if n != keys {
		t.Errorf("%d charge entries in the ledger for %d keys", n, keys)
	}
	for i, body := range bodies {
		var id string
		if err := conn.QueryRow(ctx, `SELECT id FROM results WHERE receipt = $1`, body).Scan(&id); err != nil {
			t.Errorf("key %d: the receipt answered has no result row: %v", i, err)
			continue
		}
		if charged[id] != 1 {
			t.Errorf("key %d: result %s has %d charge entries", i, id, charged[id])
		}
	}
}

// checkHolds waits, a minute at most, until the account holds no credit
// for a validation (every request has ended): a hold whose Hold failed
// after its commit is released by its box's heartbeat.
func (f *faultFleet) checkHolds(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		hs, err := f.db.Holds(t.Context(), f.acct.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("credits still held a minute after the last answer: %+v", hs)
		}
	}
}

// bootWatch polls the boots table (straight to the server) every 100 ms
// and keeps, for each box, the oldest seen_at it saw (how close the box
// came to being taken as stopped) and how often its boot was gone or
// registered again (reaped).
type bootWatch struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	maxAge  map[string]time.Duration
	started map[string]time.Time // box → its boot's started_at
	reaped  map[string]int       // polls that found the box's boot gone or registered again
}

func watchBoots(t *testing.T, dsn string) *bootWatch {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	w := &bootWatch{stop: make(chan struct{}), done: make(chan struct{}),
		maxAge: map[string]time.Duration{}, started: map[string]time.Time{}, reaped: map[string]int{}}
	go func() {
		defer close(w.done)
		defer conn.Close(ctx)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			rows, err := conn.Query(qctx, `SELECT box, started_at, now() - seen_at FROM boots WHERE box LIKE 'box%'`)
			seen := map[string]bool{}
			if err == nil {
				var box string
				var started time.Time
				var age time.Duration
				_, err = pgx.ForEachRow(rows, []any{&box, &started, &age}, func() error {
					w.mu.Lock()
					defer w.mu.Unlock()
					seen[box] = true
					w.maxAge[box] = max(w.maxAge[box], age)
					if s, ok := w.started[box]; ok && !s.Equal(started) {
						w.reaped[box]++
					}
					w.started[box] = started
					return nil
				})
			}
			cancel()
			if err != nil {
				continue
			}
			w.mu.Lock()
			for box := range w.started {
				if !seen[box] {
					w.reaped[box]++
				}
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.end)
	return w
}

// end stops the watch.
func (w *bootWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// state returns box's oldest seen_at seen and its reaps.
func (w *bootWatch) state(box string) (time.Duration, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxAge[box], w.reaped[box]
}

// stopReleases returns the ledger's entries that released a hold because
// its box was taken as stopped.
func stopReleases(t *testing.T, db *postgres.DB, account string) []storage.Entry {
	t.Helper()
	es, err := db.Ledger(t.Context(), account, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []storage.Entry
	for _, e := range es {
		if e.Kind == storage.EntryRelease && strings.Contains(e.Note, "its verifyd stopped") {
			out = append(out, e)
		}
	}
	return out
}

// logged reports whether the instance logged a line containing sub.
func (in *instance) logged(sub string) bool { return in.loggedAll(sub) }

// loggedAll reports whether the instance logged a line containing every
// one of subs.
func (in *instance) loggedAll(subs ...string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.ContainsFunc(in.stderr, func(l string) bool {
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				return false
			}
		}
		return true
	})
}

// lines returns the lines the instance logged that contain sub.
func (in *instance) lines(sub string) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var ls []string
	for _, l := range in.stderr {
		if strings.Contains(l, sub) {
			ls = append(ls, l)
		}
	}
	return ls
}

// count returns how many lines the instance logged that contain sub.
func (in *instance) count(sub string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, l := range in.stderr {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// storeFailedLog is what a box logs when it could not store job results.
const storeFailedLog = "cannot store job results"

// reapedLog is what a box logs when it finds its boot reaped.
const reapedLog = "reaped by another box"

// TestFleetSlowLink: one box's link to PostgreSQL adds 100-200 ms to
// every chunk each way while both boxes answer 60 keyed validations and
// run a 6,000-address batch job. Every key reaches a 200 (a 500 retried
// with its key), none is charged twice, nothing stays held; the job,
// worked on by both boxes, completes with one result per address. The
// slow box is not taken as stopped: its boot's seen_at is never older
// than the lease, it is never reaped, none of its holds is released as a
// stopped box's. On 0cfa916 it was, in most runs (seen_at up to 9 s old
// for a 3 s lease): its heartbeat waited behind Reap and the purges,
// which take seconds on the slow link. With that fixed, the job stood
// still, since one result write of the slow box never fitted in
// call_timeout; a box that cannot store a job's results for 30 s now
// gives its slices back.
func TestFleetSlowLink(t *testing.T) {
	// Slow mail servers and few slots a box, so that the job lasts long
	// enough for the slow box to lease slices of it.
	run, addrs := fleetWorld(t, 150, 40, 50*time.Millisecond)
	f := startFaultFleet(t, 2, batchConfig(run, "", "concurrency = 4\n"), addrs, 5*time.Second)
	defer f.dumpLogs(t)
	f.addCredits(t, int64(len(addrs)))
	w := watchBoots(t, f.dsn)
	f.proxies[1].Latency(100*time.Millisecond, 200*time.Millisecond)
	start := time.Now()

	c := f.client(t, 0)
	r := c.do("POST", "/v1/batch", f.key, batchBody(t, addrs, nil))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	held := f.watchSlices(t, id)

	const n = 60
	kr := f.startKeyed("slow-%03d", n, 12)
	bodies := kr.wait(t)
	t.Logf("%d keys: first answers %v, every answer %v, the longest %v, all 200 in %v",
		n, kr.firstStatuses(), kr.statuses, kr.worst.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		j, err := f.db.Job(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == storage.JobCompleted && j.Processed == len(addrs) {
			break
		}
		if (j.Status != storage.JobRunning && j.Status != storage.JobQueued) || time.Now().After(deadline) {
			t.Fatalf("job %s %s, %d of %d addresses done; the slow box logged %q %d times", id, j.Status, j.Processed, j.Total,
				storeFailedLog, f.boxes[1].count(storeFailedLog))
		}
	}
	seen := map[int]bool{}
	if err := f.db.JobResults(t.Context(), id, func(r storage.Result) error {
		if seen[r.JobIndex] {
			t.Errorf("address %d has two results", r.JobIndex)
		}
		seen[r.JobIndex] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(addrs) {
		t.Errorf("%d results for %d addresses", len(seen), len(addrs))
	}
	boxes := held()
	t.Logf("the job completed in %v; slices leased by %v", time.Since(start).Round(time.Millisecond), boxes)
	if !slices.Contains(boxes, "box1") {
		t.Error("the slow box never leased a slice of the job: the job did not run across both boxes")
	}

	age, reaped := w.state("box1")
	var taken []string
	if age >= fleetLease {
		taken = append(taken, fmt.Sprintf("its boot's seen_at was %v old, past the lease (%v)", age.Round(time.Millisecond), fleetLease))
	}
	if reaped > 0 {
		taken = append(taken, fmt.Sprintf("its boot was reaped (%d polls of 100 ms found it gone or registered again)", reaped))
	}
	if f.boxes[1].logged(reapedLog) {
		taken = append(taken, "it logged that its boot was reaped")
	}
	if rs := stopReleases(t, f.db, f.acct.ID); len(rs) > 0 {
		taken = append(taken, fmt.Sprintf("%d holds were released as a stopped box's", len(rs)))
	}
	t.Logf("the slow box's boot: seen_at at most %v old (lease %v)", age.Round(time.Millisecond), fleetLease)
	for _, what := range taken {
		t.Errorf("the slow box was taken as stopped: %s", what)
	}
	f.proxies[1].Pass()
	f.checkKeys(t, "slow-%03d", bodies, n)
}

// watchSlices records the boxes that lease slices of job id (their boots
// alive or not: HeldSlices counts live ones only) until it ends; held
// returns them once it has.
func (f *faultFleet) watchSlices(t *testing.T, id string) (held func() []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var boxes []string
	go func() {
		defer close(done)
		defer conn.Close(ctx)
		for {
			var status string
			if err := conn.QueryRow(ctx, `SELECT status FROM jobs WHERE id = $1`, id).Scan(&status); err != nil {
				return
			}
			if status == string(storage.JobCompleted) || status == string(storage.JobFailed) {
				return
			}
			rows, _ := conn.Query(ctx, `SELECT DISTINCT b.box FROM job_slices s JOIN boots b ON b.id = s.owner WHERE s.job_id = $1`, id)
			now, _ := pgx.CollectRows(rows, pgx.RowTo[string])
			for _, b := range now {
				if !slices.Contains(boxes, b) {
					boxes = append(boxes, b)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		<-done
		slices.Sort(boxes)
		return boxes
	}
}

// dumpLogs shows, when t failed, what the boxes logged (but their
// requests' errors).
func (f *faultFleet) dumpLogs(t *testing.T) {
	if !t.Failed() {
		return
	}
	for b, in := range f.boxes {
		in.mu.Lock()
		for _, l := range in.stderr {
			if !strings.Contains(l, `"internal error"`) && !strings.Contains(l, `"release hold"`) {
				t.Logf("box%d: %s", b, l)
			}
		}
		in.mu.Unlock()
	}
}

func (kr *keyedRun) firstStatuses() map[int]int {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	m := map[int]int{}
	for _, a := range kr.first {
		m[a.status]++
	}
	return m
}

// TestFleetLinkResets: the connections of both boxes to PostgreSQL are
// reset (RST) five times while they answer 150 keyed validations. Every
// key reaches a 200, retried with its key after a 500; every receipt
// answered is charged exactly once in the ledger, and replays when its
// key is sent again; nothing stays held.
func TestFleetLinkResets(t *testing.T) {
	run, addrs := fleetWorld(t, 20, 40, 20*time.Millisecond)
	f := startFaultFleet(t, 2, worldConfig(run, "[rate_limits]\ndisabled = true\n"), addrs, 5*time.Second)
	defer f.dumpLogs(t)
	const n, resets = 150, 5
	kr := f.startKeyed("reset-%03d", n, 24)
	cut := 0
	for k := 1; k <= resets; k++ {
		waitFor(t, func() bool { return int(kr.answered.Load()) >= k*n/(resets+1) })
		for _, p := range f.proxies {
			cut += p.Reset()
		}
	}
	bodies := kr.wait(t)
	t.Logf("%d resets cut %d connections; first answers %v, every answer %v", resets, cut, kr.firstStatuses(), kr.statuses)
	if kr.statuses[500] == 0 {
		t.Error("no request answered 500: the resets came at no request")
	}
	f.checkKeys(t, "reset-%03d", bodies, n)
}

// streamRun is keyed validations sent one after another by workers until
// stopped (startStream).
type streamRun struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	all  []attempt
}

// startStream sends keyed validations to boxes, workers[b] of them one
// after the other to box b, each with a new key of keyFmt (next numbers
// them), until stop.
func (f *faultFleet) startStream(keyFmt string, workers []int, next *atomic.Int32) *streamRun {
	s := &streamRun{stop: make(chan struct{})}
	for b, n := range workers {
		for range n {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				for {
					select {
					case <-s.stop:
						return
					default:
					}
					a := f.validate(b, keyFmt, int(next.Add(1)-1))
					s.mu.Lock()
					s.all = append(s.all, a)
					s.mu.Unlock()
				}
			}()
		}
	}
	return s
}

// end stops the workers and returns every attempt once all have ended.
func (s *streamRun) end() []attempt {
	close(s.stop)
	s.wg.Wait()
	return s.all
}

func (s *streamRun) answered(cond func(attempt) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.all {
		if cond(a) {
			n++
		}
	}
	return n
}

// internalWords are words of a database error that an answer must not
// show a client.
var internalWords = []string{"postgres", "pgx", "dial", "timeout", "deadline", "context", "tcp", "127.0.0.1", "sql"}

// TestFleetSilentLink: one box's link to PostgreSQL goes silent (a
// black hole: connections stay open, nothing gets through either way)
// for two leases and more, past storage.call_timeout (2 s) and the
// lease (3 s), under keyed validations on both boxes. The silent box
// answers every request 500 INTERNAL in the envelope, without the
// database's error text, within four call_timeouts and 2 s (a
// validation under way makes three storage calls in a row after its
// probe, each of which may wait call_timeout while http.request_timeout,
// 30 s here, is not spent, and a combined Hold or Charge may wait for the
// one before it; TestFleetSilentBoxAnswersWithinRequestTimeout bounds a
// request by its own deadline); another box
// takes it as stopped and reaps its boot;
// once the link is back the silent box serves again by itself (and
// registers again); every key answered 500 reaches a 200 when retried
// with its key, within a lease or so of the link's return; the ledger
// adds up and no key is charged twice. The other box should go on
// serving meanwhile: PostgreSQL ends the silent box's open transaction,
// and its lock on the account, after idle_in_transaction_session_timeout
// (call_timeout + 1 s; TestFleetSilentBoxFreesItsAccount).
func TestFleetSilentLink(t *testing.T) {
	run, addrs := fleetWorld(t, 20, 40, 20*time.Millisecond)
	const callTimeout = 2 * time.Second
	f := startFaultFleet(t, 2, worldConfig(run, "[rate_limits]\ndisabled = true\n"), addrs, callTimeout)
	defer f.dumpLogs(t)
	w := watchBoots(t, f.dsn)
	const keyFmt = "silent-%04d"
	var next atomic.Int32
	s := f.startStream(keyFmt, []int{2, 4}, &next)
	waitFor(t, func() bool { return s.answered(func(a attempt) bool { return a.box == 1 && a.status == 200 }) >= 10 })

	silent := time.Now()
	f.proxies[1].BlackHole()
	// Silent for 8 s and more, until the box's boot is reaped; 15 s at
	// most.
	for time.Since(silent) < 15*time.Second {
		if _, reaped := w.state("box1"); reaped > 0 && time.Since(silent) > 8*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	back := time.Now()
	age, reaped := w.state("box1")
	f.proxies[1].Pass()
	t.Logf("silent for %v; the silent box's seen_at reached %v (lease %v), its boot reaped: %v",
		back.Sub(silent).Round(time.Millisecond), age.Round(time.Millisecond), fleetLease, reaped > 0)
	if age < fleetLease {
		t.Errorf("the silent box's boot was seen %v before, within the lease, after %v of silence", age, back.Sub(silent).Round(time.Millisecond))
	}

	// It serves again by itself, and registers again.
	waitFor(t, func() bool {
		return s.answered(func(a attempt) bool { return a.box == 1 && a.status == 200 && a.at.After(back) }) > 0
	})
	served := time.Now()
	all := s.end()
	t.Logf("the silent box answered a new request 200 %v after the link's return", served.Sub(back).Round(time.Millisecond))
	if reaped > 0 && !f.boxes[1].logged(reapedLog) {
		t.Error("the silent box's boot was reaped, and it did not log that it registers again")
	}

	// The answers during the silence: every one of the silent box's
	// within the bound, 500 in the envelope without internal text.
	const bound = 4*callTimeout + 2*time.Second
	worst := [2]time.Duration{}
	codes := [2]map[int]int{{}, {}}
	for _, a := range all {
		end := a.at.Add(a.took)
		if end.Before(silent) || !a.at.Before(back) {
			continue
		}
		codes[a.box][a.status]++
		took := a.took
		if a.at.Before(silent) {
			took = end.Sub(silent) // under way when the silence began
		}
		worst[a.box] = max(worst[a.box], took)
		if a.box != 1 || !end.Before(back) {
			continue
		}
		if took > bound {
			t.Errorf("the silent box answered after %v, past %v (call_timeout %v)", took.Round(time.Millisecond), bound, callTimeout)
		}
		if a.status == 200 && a.at.Before(silent) {
			continue // its last storage call ended before the silence
		}
		if a.err != nil || a.status != 500 {
			t.Errorf("the silent box: %d %s %v", a.status, a.body, a.err)
			continue
		}
		low := strings.ToLower(string(a.body))
		for _, word := range internalWords {
			if strings.Contains(low, word) {
				t.Errorf("the silent box's answer shows %q: %s", word, a.body)
			}
		}
		(reply{status: a.status, body: a.body}).wantError(t, 500, "INTERNAL")
	}
	t.Logf("during the silence: the silent box answered %v, the longest in %v (call_timeout %v); the other box %v, the longest in %v",
		codes[1], worst[1].Round(time.Millisecond), callTimeout, codes[0], worst[0].Round(time.Millisecond))
	if codes[1][500] == 0 {
		t.Error("the silent box answered no request during the silence")
	}
	switch {
	case codes[0][500] > 0:
		// Its Reap waited for the account's row too.
		t.Logf("the other box answered %d requests 500 during the silence, while the silent box's transaction held the account", codes[0][500])
	case reaped == 0:
		t.Errorf("the silent box's boot was not reaped in %v of silence", back.Sub(silent).Round(time.Millisecond))
	}

	// Every key not answered 200 is retried with its key, on the box that
	// answered first.
	bodies := map[int][]byte{}
	var retry []attempt
	for _, a := range all {
		if a.err == nil && a.status == 200 {
			bodies[a.i] = a.body
		} else {
			retry = append(retry, a)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var last time.Duration
	for _, a := range retry {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; ; try++ {
				r := f.validate((a.box+try)%2, keyFmt, a.i)
				if r.err == nil && r.status == 200 {
					mu.Lock()
					bodies[a.i] = r.body
					last = max(last, time.Since(back))
					mu.Unlock()
					return
				}
				if r.err != nil || (r.status != 500 && r.status != 409) {
					t.Errorf("key %d retried: %d %s %v", a.i, r.status, r.body, r.err)
					return
				}
				if time.Since(back) > 2*time.Minute {
					t.Errorf("key %d: still %d %s two minutes after the link's return", a.i, r.status, r.body)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d keys not answered 200 retried: the last reached 200 %v after the link's return (lease %v)", len(retry), last.Round(time.Millisecond), fleetLease)
	if len(retry) == 0 {
		t.Error("no key to retry: the silence came at no request")
	}
	if limit := 2*fleetLease + callTimeout; last > limit {
		t.Errorf("a key retried reached its 200 %v after the link's return, past %v", last.Round(time.Millisecond), limit)
	}
	t.Logf("%d holds released as a stopped box's", len(stopReleases(t, f.db, f.acct.ID)))
	f.checkKeys(t, keyFmt, bodies, int(next.Load()))
}

// TestFleetKeyNotRecordedNotCharged: a validation whose Idempotency-Key
// cannot be recorded in time is charged once, however often the key is
// sent again. Here the account's row is held by another transaction (as
// a silent box's holds it in TestFleetSilentLink) until the box has
// given up recording the key (BeginIdem's insert waits for the row past
// call_timeout), then freed. Fails on 0cfa916: the request goes on
// without its key, holds and charges once the row is free, answers 200
// with nothing recorded, and the key sent again is processed and charged
// again (two charges, two receipts).
func TestFleetKeyNotRecordedNotCharged(t *testing.T) {
	run, addrs := fleetWorld(t, 1, 10, 0)
	f := startFaultFleet(t, 1, worldConfig(run, "[rate_limits]\ndisabled = true\n"), addrs, time.Second)
	defer f.dumpLogs(t)
	ctx := context.Background()
	conn := f.conn(t)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, f.acct.ID); err != nil {
		t.Fatal(err)
	}
	first := make(chan attempt, 1)
	go func() { first <- f.validate(0, "open-key-%d", 0) }()
	f.boxes[0].waitLog(t, failOpenLog)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-first
	t.Logf("the key's first answer: %d", a.status)
	// Sent again until it answers 200, then once more, as a client that
	// lost its answers would.
	for try := 0; a.status != 200; try++ {
		if a.err != nil || (a.status != 500 && a.status != 409) || try == 100 {
			t.Fatalf("the key sent again: %d %s %v", a.status, a.body, a.err)
		}
		time.Sleep(100 * time.Millisecond)
		a = f.validate(0, "open-key-%d", 0)
	}
	again := f.validate(0, "open-key-%d", 0)
	if again.status != 200 || !again.replay {
		t.Errorf("the key sent after its 200: %d, Idempotent-Replay %v: processed again", again.status, again.replay)
	}
	var charges int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM ledger l JOIN results r ON r.id = l.ref WHERE l.kind = 'charge' AND r.email = $1`, addrs[0]).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 1 {
		t.Errorf("%d charges for one Idempotency-Key", charges)
	}
	storagetest.CheckLedger(t, f.db, f.acct.ID)
}

// TestFleetSilentBoxFreesItsAccount: box1's link goes silent while one
// of its transactions holds the account's row (caught in
// pg_stat_activity: a session of box1 idle in transaction, with a
// transaction id); box0, whose link is fine, must answer that account's
// validations 200 again within a few call_timeouts (here 4 of 2 s), and
// once the link is back no credit stays held. Fails on 0cfa916: the
// server keeps box1's transaction open for the whole silence, waiting
// for its next statement, so box0's BeginIdem (its insert checks the
// account's row), Hold and Charge wait for the row and every validation
// answers 500 after call_timeout, until the link returns — in a real
// partition, until the server's TCP gives the connection up (without
// tcp_keepalives_idle, two hours and more).
func TestFleetSilentBoxFreesItsAccount(t *testing.T) {
	run, addrs := fleetWorld(t, 5, 40, 0)
	const callTimeout = 2 * time.Second
	f := startFaultFleet(t, 2, worldConfig(run, "[rate_limits]\ndisabled = true\n"), addrs, callTimeout)
	defer f.dumpLogs(t)
	ctx := context.Background()
	conn := f.conn(t)

	// box1's transactions last: every chunk of its link takes 200 ms.
	f.proxies[1].Latency(200*time.Millisecond, 200*time.Millisecond)
	var next atomic.Int32
	s := f.startStream("busy-%04d", []int{0, 2}, &next)
	const holding = `SELECT pid FROM pg_stat_activity WHERE application_name = 'box1' AND state = 'idle in transaction' AND backend_xid IS NOT NULL`
	caught := false
	for deadline := time.Now().Add(time.Minute); !caught && time.Now().Before(deadline); {
		var pid int32
		if err := conn.QueryRow(ctx, holding+` LIMIT 1`).Scan(&pid); err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		f.proxies[1].BlackHole()
		// Still holding once what was on its way has had time to arrive.
		time.Sleep(500 * time.Millisecond)
		if err := conn.QueryRow(ctx, holding+` AND pid = $1`, pid).Scan(&pid); err == nil {
			caught = true
			break
		}
		f.proxies[1].Latency(200*time.Millisecond, 200*time.Millisecond)
	}
	if !caught {
		t.Fatal("box1 was never caught holding a transaction open")
	}
	silent := time.Now()
	codes := map[int]int{}
	served := time.Duration(-1)
	for i := 0; time.Since(silent) < 5*callTimeout; i++ {
		a := f.validate(0, "other-%04d", i)
		codes[a.status]++
		if a.err == nil && a.status == 200 {
			served = time.Since(silent)
			break
		}
	}
	var waiting int
	conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'box0' AND wait_event_type = 'Lock'`).Scan(&waiting)
	f.proxies[1].Pass()
	s.end()
	first := "none"
	if served >= 0 {
		first = served.Round(time.Millisecond).String()
	}
	t.Logf("box1 silent in a transaction: box0 answered %v, its first 200 after %s; box0 sessions waiting for a lock at the end: %d", codes, first, waiting)
	if served < 0 || served > 4*callTimeout {
		t.Errorf("box0 answered no 200 within %v of box1's silence (answers %v)", 4*callTimeout, codes)
	}
	f.checkHolds(t)
	storagetest.CheckLedger(t, f.db, f.acct.ID)
}

// TestFleetSilentBoxAnswersWithinRequestTimeout: a validation under way
// when its box's link to PostgreSQL goes silent (its credit held, its
// probe running) answers 500 within http.request_timeout (5 s here, with
// storage.call_timeout 2 s and a 300 ms world), plus a margin for a
// loaded machine. Failed before the storage calls took the request's
// context (0cfa916, d88e931): it answered after three call_timeouts and
// more once its probe had ended — Charge, then Release of its hold, then
// AbortIdem of its key, each waiting its own call_timeout — so with the
// default of 30 s a client waited a minute and a half for its 500. Now
// each waits at most what is left of the request's time, and what a
// request could not end is the store's to clean up (its heartbeat
// releases the hold and ends the key).
func TestFleetSilentBoxAnswersWithinRequestTimeout(t *testing.T) {
	run, addrs := fleetWorld(t, 1, 10, 300*time.Millisecond)
	const callTimeout, requestTimeout = 2 * time.Second, 5 * time.Second
	cfg := strings.Replace(worldConfig(run, "realtime_budget = \"4s\"\n[rate_limits]\ndisabled = true\n"), "[http]\n",
		fmt.Sprintf("[http]\nrequest_timeout = %q\n", requestTimeout.String()), 1)
	f := startFaultFleet(t, 1, cfg, addrs, callTimeout)
	defer f.dumpLogs(t)
	warm := f.validate(0, "warm-key-%d", 1)
	if warm.status != 200 {
		t.Fatalf("%d %s %v", warm.status, warm.body, warm.err)
	}
	done := make(chan attempt, 1)
	go func() { done <- f.validate(0, "silent-key-%d", 0) }()
	waitFor(t, func() bool { c, err := f.db.Credits(t.Context(), f.acct.ID); return err == nil && c.Held == 1 })
	f.proxies[0].BlackHole()
	a := <-done
	t.Logf("answered %d after %v; a validation took %v before the silence (call_timeout %v, request_timeout %v)",
		a.status, a.took.Round(time.Millisecond), warm.took.Round(time.Millisecond), callTimeout, requestTimeout)
	if a.err != nil || a.status != 500 {
		t.Fatalf("%d %s %v", a.status, a.body, a.err)
	}
	if bound := requestTimeout + 3*time.Second; a.took > bound {
		t.Errorf("a validation under way on the silent link answered 500 after %v, past %v", a.took.Round(time.Millisecond), bound)
	}
	// Once the link is back, the box ends what the request could not:
	// the hold is released, the key answers again.
	f.proxies[0].Pass()
	waitFor(t, func() bool { c, err := f.db.Credits(t.Context(), f.acct.ID); return err == nil && c.Held == 0 })
	if r := f.validate(0, "silent-key-%d", 0); r.status != 200 {
		t.Errorf("the key retried once the link is back: %d %s %v", r.status, r.body, r.err)
	}
}

// TestFleetLostHoldReleased: the reply to the COMMIT of a validation's
// hold is lost — the box's link delays every chunk by 150 ms, and mutes
// the server's replies as soon as the COMMIT has run (its session idle
// again), until the call gives up — so the validation answers 500; its
// credit, held by a transaction that did commit, is released within two
// leases (a lease of 6 s here, so that the slow box keeps it). Fails on
// 0cfa916: the hold stays for as long as the box lives.
func TestFleetLostHoldReleased(t *testing.T) {
	run, addrs := fleetWorld(t, 1, 10, 0)
	const callTimeout, lease = 3 * time.Second, 6 * time.Second
	f := startFaultFleetLease(t, 1, worldConfig(run, "[rate_limits]\ndisabled = true\n"), addrs, callTimeout, lease)
	defer f.dumpLogs(t)
	ctx := context.Background()
	conn := f.conn(t)
	f.proxies[0].Latency(150*time.Millisecond, 150*time.Millisecond)
	var start time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&start); err != nil {
		t.Fatal(err)
	}
	done := make(chan attempt, 1)
	go func() { done <- f.validate(0, "lost-key-%d", 0) }()
	// The hold's COMMIT is the validation's first pipelined one, sent as
	// "COMMIT" (storage/postgres pipelineTx); pgx's transactions (the
	// key's record, and whatever else the box commits meanwhile: leases,
	// reaping) send "commit". Counting every commit of the box took
	// another transaction's for the key's when one ran at the same
	// moment.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Millisecond) {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'box0' AND state = 'idle'
			AND query = 'COMMIT' AND state_change > $1`, start).Scan(&n)
		if err == nil && n > 0 {
			f.proxies[0].Mute()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no COMMIT of the validation's hold seen")
		}
	}
	a := <-done
	f.proxies[0].Pass()
	hs, err := f.db.Holds(t.Context(), f.acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answered %d; holds then: %+v", a.status, hs)
	if a.err != nil || a.status != 500 || len(hs) != 1 {
		t.Fatalf("the validation whose hold's reply was lost: %d %s %v; holds %+v", a.status, a.body, a.err, hs)
	}
	deadline := time.Now().Add(2 * lease)
	for {
		c, err := f.db.Credits(t.Context(), f.acct.ID)
		if err == nil && c.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			hs, _ := f.db.Holds(t.Context(), f.acct.ID)
			t.Fatalf("credits %+v (%v) still held two leases after the validation answered 500: %+v", c, err, hs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	storagetest.CheckLedger(t, f.db, f.acct.ID)
}
