package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/internal/pgtest"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/postgres"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// Fleet mode end to end: two and three verifyd processes on one
// PostgreSQL (started by the test from the Debian packages, on a loopback
// port, in a temporary directory), each with its own data_dir, API port
// and admin socket.

// fleetDB starts PostgreSQL with a migrated database and returns its DSN
// and a connection of the test's own, for looking at what the boxes
// wrote.
func fleetDB(t *testing.T) (string, *postgres.DB) {
	dsn, db, _ := fleetServer(t)
	return dsn, db
}

// fleetServer is fleetDB with the server, for tests that stop it.
func fleetServer(t *testing.T) (string, *postgres.DB, *pgtest.Server) {
	t.Helper()
	srv := pgtest.Start(t)
	dsn, db := fleetOn(t, srv)
	return dsn, db, srv
}

// fleetOn is fleetDB on a server the test started.
func fleetOn(t *testing.T, srv *pgtest.Server) (string, *postgres.DB) {
	t.Helper()
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("fleet")
	if _, err := postgres.MigrateDSN(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, dsn, postgres.Options{Box: "test", Lease: fleetLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// chargeEntries checks that the account's ledger adds up
// (storagetest.CheckLedger) and returns how many charge entries it has.
func chargeEntries(t *testing.T, db *postgres.DB, account string) int {
	t.Helper()
	n := 0
	for _, e := range storagetest.CheckLedger(t, db, account) {
		if e.Kind == storage.EntryCharge {
			n++
		}
	}
	return n
}

// fleetLease is the boxes' storage.lease in these tests: a dead box's
// work moves after it.
const fleetLease = 3 * time.Second

// startBoxes starts n boxes of a fleet on dsn with cfg; the first makes
// the demo account (its key in boxes[0].key), alone, before the others
// start.
func startBoxes(t *testing.T, n int, dsn, cfg string) []*instance {
	t.Helper()
	boxes := make([]*instance, n)
	for i := range n {
		demo := "demo_account = false\n"
		if i == 0 {
			demo = "demo_account = true\n"
		}
		c := demo + cfg + fmt.Sprintf("\n[storage]\nbackend = \"postgres\"\ndsn = %q\nbox = \"box%d\"\nlease = %q\n", dsn, i, fleetLease.String())
		boxes[i] = startIn(t, t.TempDir(), c)
	}
	return boxes
}

// TestFleetAPI: what a client sees of two (and of three) boxes behind a
// balancer is one service. No overdraft when both charge one account at once; an
// Idempotency-Key answered on one box replays on the other; history
// written by both pages without loss on either; one JWKS; a job posted on
// one box is read, and its CSV downloaded, on the other.
func TestFleetAPI(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d boxes", n), func(t *testing.T) { testFleetAPI(t, n) })
	}
}

func testFleetAPI(t *testing.T, n int) {
	run := testWorld(t, 20*time.Millisecond)
	dsn, db := fleetDB(t)
	boxes := startBoxes(t, n, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	key := boxes[0].key
	var cs []*client
	for _, b := range boxes {
		cs = append(cs, &client{t: t, base: b.base, key: key})
	}
	last := cs[n-1]
	ac := adminClient(t, boxes[0])
	acct := demoAccount(t, ac)
	twenty := int64(20)
	if _, err := ac.AdjustCredits(context.Background(), acct.ID, adminapi.AdjustCredits{Set: &twenty}); err != nil {
		t.Fatal(err)
	}

	// 40 validations at once, half on each box, on 20 credits.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := cs[i%n].do("POST", "/v1/validate", key, fmt.Sprintf(`{"email":"ann%d@catch.test"}`, i))
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[200] != 20 || codes[400] != 20 {
		t.Fatalf("answers %v: want 20 charged and 20 refused for want of credits", codes)
	}
	storagetest.CheckLedger(t, db, acct.ID)
	for i, c := range cs {
		if b := balance(t, c, key); b != 0 {
			t.Fatalf("box %d: balance %d", i, b)
		}
	}

	// An Idempotency-Key across boxes.
	hundred := int64(100)
	if _, err := ac.AdjustCredits(context.Background(), acct.ID, adminapi.AdjustCredits{Add: &hundred}); err != nil {
		t.Fatal(err)
	}
	first := cs[0].do("POST", "/v1/validate", key, `{"email":"info@shop.test"}`, "Idempotency-Key", "fleet-key-1")
	again := last.do("POST", "/v1/validate", key, `{"email":"info@shop.test"}`, "Idempotency-Key", "fleet-key-1")
	if first.status != 200 || again.status != 200 || again.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(first.body, again.body) {
		t.Fatalf("replay on the other box: %d, %d %q", first.status, again.status, again.header.Get("Idempotent-Replay"))
	}
	last.do("POST", "/v1/validate", key, `{"email":"ann@shop.test"}`, "Idempotency-Key", "fleet-key-1").wantError(t, 409, "CONFLICT")
	if b := balance(t, last, key); b != 99 {
		t.Fatalf("balance %d after one charge of 100: the replay charged", b)
	}

	// History written by both, paged on each.
	for _, c := range cs {
		var rows []string
		seen := map[string]bool{}
		cursor := ""
		for {
			path := "/v1/results?limit=7"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			m := c.do("GET", path, key, "").json(t)
			for _, r := range m["results"].([]any) {
				id := fmt.Sprint(r.(map[string]any)["id"])
				if seen[id] {
					t.Fatalf("row %s twice", id)
				}
				seen[id] = true
				rows = append(rows, id)
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(rows) != 21 {
			t.Fatalf("%d history rows on %s, want 21", len(rows), c.base)
		}
	}

	// One JWKS: a receipt signed on one box verifies with the other's.
	j0 := cs[0].do("GET", "/.well-known/jwks.json", "", "")
	j1 := last.do("GET", "/.well-known/jwks.json", "", "")
	if j0.status != 200 || !bytes.Equal(j0.body, j1.body) {
		t.Fatalf("two JWKS:\n%s\n%s", j0.body, j1.body)
	}
	verifyWithPython(t, last, again.body)

	// A job posted on one box, followed and downloaded on the other.
	r := cs[0].do("POST", "/v1/batch", key, batchBody(t, []string{"ann@shop.test", "info@shop.test", "x@gone.test"}, nil))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	job := waitDone(t, last, key, id, time.Minute)
	if job["status"] != "completed" {
		t.Fatalf("job %v", job)
	}
	rows, err := csv.NewReader(bytes.NewReader(last.do("GET", "/v1/jobs/"+id+"/results.csv", key, "").body)).ReadAll()
	if err != nil || len(rows) != 4 {
		t.Fatalf("CSV %d rows, %v", len(rows), err)
	}
	storagetest.CheckLedger(t, db, acct.ID)
}

// TestFleetCrashDuringValidations: kill -9 of one box of two while 50
// validations with Idempotency-Keys are in flight on both. Every key
// retried on the surviving box replays what was answered before the kill
// or is charged now, never twice; the dead box's held credits are
// released by the other once its lease has run out; the ledger adds up.
func TestFleetCrashDuringValidations(t *testing.T) {
	run := testWorld(t, 150*time.Millisecond)
	dsn, db := fleetDB(t)
	boxes := startBoxes(t, 2, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	key := boxes[0].key
	acct := demoAccount(t, adminClient(t, boxes[0]))
	const n = 50
	wait := keyedValidations(t, []string{boxes[0].base, boxes[1].base}, key, "fleet-crash-%03d", n)
	if err := boxes[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	boxes[0].cmd.Wait()
	answered := wait()
	t.Logf("%d of %d validations answered before the kill", len(answered), n)

	// The survivor releases the dead box's holds after its lease.
	waitFor(t, func() bool { c, err := db.Credits(t.Context(), acct.ID); return err == nil && c.Held == 0 })
	storagetest.CheckLedger(t, db, acct.ID)
	crBefore, _ := db.Credits(t.Context(), acct.ID)
	before := crBefore.Balance

	c := &client{t: t, base: boxes[1].base, key: key}
	replays := retryKeyed(t, c, "fleet-crash-%03d", n, answered)
	if before != int64(1000-replays) {
		t.Errorf("balance after the kill %d, want 1000 − %d charged before it", before, replays)
	}
	if cr, _ := db.Credits(t.Context(), acct.ID); cr.Balance != 1000-n {
		t.Errorf("balance cr.Balance every key is answered: %d, want %d", cr.Balance, 1000-n)
	}
	if replays < len(answered) {
		t.Errorf("%d replays, fewer than the %d receipts answered", replays, len(answered))
	}
	if len(answered) == 0 || len(answered) == n {
		t.Errorf("%d of %d answered before the kill: the test did not kill mid-way", len(answered), n)
	}
	charges := chargeEntries(t, db, acct.ID)
	if charges != n {
		t.Errorf("%d charge entries for %d validations", charges, n)
	}
}

// fleetWorld: domains accepting domains d0…d399.test with 50 mailboxes
// each (20,000 addresses), a little latency per reply.
func fleetWorld(t *testing.T, domains, mailboxes int, latency time.Duration) (*world.Running, []string) {
	t.Helper()
	w := &world.World{}
	var addrs []string
	for d := range domains {
		host := fmt.Sprintf("mx.f%d.test", d)
		w.Hosts = append(w.Hosts, &world.Host{Name: host, IP: fmt.Sprintf("127.74.%d.%d", d/200, d%200+1), Latency: world.Duration(latency)})
		dom := &world.Domain{Name: fmt.Sprintf("f%d.test", d), MX: []world.MX{{Pref: 10, Host: host}}, Mailboxes: map[string]world.MailboxState{}}
		for m := range mailboxes {
			dom.Mailboxes[fmt.Sprintf("m%d", m)] = world.MailboxOK
			addrs = append(addrs, fmt.Sprintf("m%d@f%d.test", m, d))
		}
		w.Domains = append(w.Domains, dom)
	}
	return startWorld(t, w), addrs
}

// TestFleetBatchKill: three boxes split a 20,000-address job; one that
// holds slices of it is killed (kill -9) in the middle. The others take
// its slices once its lease has run out and complete the job: every
// address has exactly one result, the reservation is settled once, the
// ledger adds up to the credit, and the webhook is posted once.
func TestFleetBatchKill(t *testing.T) {
	run, addrs := fleetWorld(t, 400, 50, 2*time.Millisecond)
	dsn, db := fleetDB(t)
	boxes := startBoxes(t, 3, dsn, batchConfig(run, "", "concurrency = 64\n"))
	key := boxes[0].key
	ac := adminClient(t, boxes[0])
	acct := demoAccount(t, ac)
	more := int64(len(addrs))
	if _, err := ac.AdjustCredits(context.Background(), acct.ID, adminapi.AdjustCredits{Add: &more}); err != nil {
		t.Fatal(err)
	}
	hook := webhooktest.New(t, 200)
	c := &client{t: t, base: boxes[0].base, key: key}
	r := c.do("POST", "/v1/batch", key, batchBody(t, addrs, map[string]any{"webhookUrl": hook.URL}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)

	// Kill a box other than the first (the test reads through it) that
	// holds slices, once a quarter of the job is done.
	victim := -1
	waitFor(t, func() bool {
		j, err := db.Job(t.Context(), id)
		if err != nil || j.Processed < len(addrs)/4 {
			return false
		}
		for i := 1; i < len(boxes); i++ {
			if held, _ := db.HeldSlices(id, fmt.Sprintf("box%d", i)); held > 0 {
				victim = i
				return true
			}
		}
		return false
	})
	mid, _ := db.Job(t.Context(), id)
	if err := boxes[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	boxes[victim].cmd.Wait()
	t.Logf("killed box%d with %d of %d addresses done", victim, mid.Processed, mid.Total)
	if mid.Processed == mid.Total {
		t.Fatal("the job ended before the kill")
	}

	job := waitDone(t, c, key, id, 3*time.Minute)
	if job["status"] != "completed" || job["progress"].(map[string]any)["processed"] != float64(len(addrs)) {
		t.Fatalf("job %v", job)
	}
	seen := map[int]bool{}
	if err := db.JobResults(t.Context(), id, func(r storage.Result) error {
		if seen[r.JobIndex] {
			t.Fatalf("address %d has two results", r.JobIndex)
		}
		seen[r.JobIndex] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(addrs) {
		t.Fatalf("%d results for %d addresses", len(seen), len(addrs))
	}
	other := &client{t: t, base: boxes[3-victim].base, key: key}
	rows, err := csv.NewReader(bytes.NewReader(other.do("GET", "/v1/jobs/"+id+"/results.csv", key, "").body)).ReadAll()
	if err != nil || len(rows) != len(addrs)+1 {
		t.Fatalf("CSV: %d rows, %v", len(rows)-1, err)
	}
	for i, row := range rows[1:] {
		if row[0] != addrs[i] || row[1] != "valid" {
			t.Fatalf("row %d: %q, want %s valid", i, row, addrs[i])
		}
	}
	es := storagetest.CheckLedger(t, db, acct.ID)
	var reserved, used int64
	for _, e := range es {
		switch e.Kind {
		case storage.EntryReserve:
			reserved += e.Amount
		case storage.EntryUse:
			used += e.Amount
		case storage.EntryRefund:
			t.Errorf("a refund of a completed job: %+v", e)
		}
	}
	if cr, _ := db.Credits(t.Context(), acct.ID); reserved != more || used != more || cr.Balance != 1000 {
		t.Fatalf("reserved %d, used %d, balance %d: want %d, %d, 1000", reserved, used, cr.Balance, more, more)
	}
	waitFor(t, func() bool { return len(hook.Requests()) >= 1 })
	time.Sleep(time.Second)
	if n := len(hook.Requests()); n != 1 {
		t.Fatalf("the webhook was posted %d times", n)
	}
}

// TestFleetDatabaseOutage: while the database is unreachable (its server
// killed), the API answers 500 INTERNAL, safe to retry, and charges
// nothing; when it is back the box serves again by itself, without a
// restart, and the ledger adds up: no half-written charge, no credit left
// held (a validation whose hold was taken before the outage and whose
// charge failed in it gets its hold released once the database is back).
func TestFleetDatabaseOutage(t *testing.T) {
	run := testWorld(t, 100*time.Millisecond)
	dsn, db, srv := fleetServer(t)
	boxes := startBoxes(t, 1, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	key := boxes[0].key
	acct := demoAccount(t, adminClient(t, boxes[0]))
	c := &client{t: t, base: boxes[0].base, key: key}
	if r := c.do("POST", "/v1/validate", key, `{"email":"ann@shop.test"}`); r.status != 200 {
		t.Fatalf("before the outage: %d %s", r.status, r.body)
	}

	inflight := make(chan reply, 1)
	go func() { inflight <- c.do("POST", "/v1/validate", key, `{"email":"info@shop.test"}`) }()
	waitFor(t, func() bool { cr, err := db.Credits(t.Context(), acct.ID); return err == nil && cr.Held == 1 })
	srv.Kill()
	(<-inflight).wantError(t, 500, "INTERNAL")
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/validate", `{"email":"info@shop.test"}`},
		{"GET", "/v1/balance", ""},
		{"GET", "/v1/results", ""},
		{"POST", "/v1/batch", `{"emails":["ann@shop.test"]}`},
	} {
		start := time.Now()
		r := c.do(req.method, req.path, key, req.body)
		r.wantError(t, 500, "INTERNAL")
		if bytes.Contains(r.body, []byte("postgres")) || bytes.Contains(r.body, []byte("dial")) {
			t.Errorf("%s %s: internal error text in the answer: %s", req.method, req.path, r.body)
		}
		t.Logf("%s %s during the outage: 500 in %v", req.method, req.path, time.Since(start).Round(time.Millisecond))
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var ok reply
	waitFor(t, func() bool {
		ok = c.do("POST", "/v1/validate", key, `{"email":"info@shop.test"}`)
		return ok.status == 200
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cr, err := db.Credits(t.Context(), acct.ID)
		if err == nil && cr.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			hs, _ := db.Holds(t.Context(), acct.ID)
			boxes[0].mu.Lock()
			t.Fatalf("credits %+v (%v) still held after the outage: holds %+v; verifyd logged:\n%s", cr, err, hs, strings.Join(boxes[0].stderr, "\n"))
		}
	}
	storagetest.CheckLedger(t, db, acct.ID)
	if b := balance(t, c, key); b != 998 {
		t.Fatalf("balance %d after two validations answered 200, want 998", b)
	}
}

// TestFleetSharedCatchAll: a domain's catch-all finding made by one box
// is known to the other, which then validates an address of it without a
// probe of its own (the world's log has one RCPT of a random local part,
// the first box's) and with the same verdict.
func TestFleetSharedCatchAll(t *testing.T) {
	run := testWorld(t, 0)
	dsn, db := fleetDB(t)
	boxes := startBoxes(t, 2, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	key := boxes[0].key
	a := (&client{t: t, base: boxes[0].base, key: key}).do("POST", "/v1/validate", key, `{"email":"ann@catch.test"}`)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	waitFor(t, func() bool { v, _, ok, _ := db.Fact("catchall", "catch.test"); return ok && v == "yes" })
	b := (&client{t: t, base: boxes[1].base, key: key}).do("POST", "/v1/validate", key, `{"email":"bob@catch.test"}`)
	if b.status != 200 {
		t.Fatalf("%d %s", b.status, b.body)
	}
	ma, mb := a.json(t), b.json(t)
	if ma["status"] != mb["status"] || fmt.Sprint(ma["checks"].(map[string]any)["is_catch_all"]) != "true" ||
		fmt.Sprint(mb["checks"].(map[string]any)["is_catch_all"]) != "true" {
		t.Fatalf("box a: %s\nbox b: %s", a.body, b.body)
	}
	// The world logs a session when it ends; each box's was kept open
	// for the next validation (probe/README.md, "Kept sessions") and
	// ends by itself within 2 s.
	run.Log().Wait(2, 10*time.Second)
	probes := 0
	for _, s := range run.Log().Sessions() {
		for _, rc := range s.Rcpts {
			if strings.HasPrefix(rc.Addr, "verifyd-") {
				probes++
			}
		}
	}
	if probes != 1 {
		t.Fatalf("%d catch-all probes of catch.test, want the first box's only", probes)
	}
}

// TestStartErrors: a verifyd that cannot start says why and exits with
// status 1 — no panic — for each error after its Pebble opened: the
// fleet's database down, a schema older and one newer than the binary,
// and lists that cannot be read.
func TestStartErrors(t *testing.T) {
	dsn, _ := fleetDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	migs, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	last := migs[len(migs)-1].Version
	fleet := func(dsn string) string {
		return testConfig + fmt.Sprintf("\n[storage]\nbackend = \"postgres\"\ndsn = %q\nbox = \"start\"\n", dsn)
	}
	notDir := filepath.Join(t.TempDir(), "lists")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("postgres://%s@127.0.0.1:%d/fleet?sslmode=disable&connect_timeout=2", pgtest.Superuser, freePort(t))
	for _, tc := range []struct {
		name   string
		config string
		before func()
		want   string
	}{
		{"database down", fleet(down), nil, "cannot open the fleet's database"},
		{"schema older", fleet(dsn), func() {
			exec1(t, conn, `DELETE FROM schema_migrations WHERE version = $1`, last)
		}, "verifyctl db migrate"},
		{"schema newer", fleet(dsn), func() {
			exec1(t, conn, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'old', now()) ON CONFLICT DO NOTHING`, last)
			exec1(t, conn, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', now())`, last+1)
		}, "newer"},
		{"lists unreadable", testConfig + "\n[probe]\nlists_dir = " + quote(notDir) + "\n", nil, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, "verifyd.toml")
			body := "data_dir = " + quote(filepath.Join(dir, "data")) + "\n" + tc.config
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(cctx, binary, "-config", cfg).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; output:\n%s", err, out)
			}
			if strings.Contains(string(out), "panic") || strings.Contains(string(out), "goroutine ") {
				t.Fatalf("verifyd panicked:\n%s", out)
			}
			if !strings.Contains(string(out), "verifyd stopped") || !strings.Contains(string(out), tc.want) {
				t.Fatalf("the output does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

func exec1(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// freePort returns a loopback TCP port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestFleetJobRuns: three boxes run ten 20,000-address jobs of 20 slices
// one after another, and every one completes, with one result per
// address. On b4dd917 a lease statement could lease slices it did not
// return (or return a slice another box had leased): a live box then
// held slices it never worked on and the job stood still (4 runs of 7 in
// an operator's test). The boxes also give back any slice they hold and
// do not work on (verifyd_jobs_slices_given_back_total).
func TestFleetJobRuns(t *testing.T) {
	run, addrs := fleetWorld(t, 400, 50, time.Millisecond)
	dsn, db := fleetDB(t)
	boxes := startBoxes(t, 3, dsn, batchConfig(run, "", "concurrency = 64\n"))
	key := boxes[0].key
	ac := adminClient(t, boxes[0])
	acct := demoAccount(t, ac)
	const runs = 10
	more := int64(runs * len(addrs))
	if _, err := ac.AdjustCredits(context.Background(), acct.ID, adminapi.AdjustCredits{Add: &more}); err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		c := &client{t: t, base: boxes[i%len(boxes)].base, key: key}
		r := c.do("POST", "/v1/batch", key, batchBody(t, addrs, nil))
		if r.status != 202 {
			t.Fatalf("run %d: %d %s", i, r.status, r.body)
		}
		id := r.json(t)["job_id"].(string)
		start := time.Now()
		job := waitDone(t, c, key, id, 5*time.Minute)
		if job["status"] != "completed" || job["progress"].(map[string]any)["processed"] != float64(len(addrs)) {
			t.Fatalf("run %d: job %v", i, job)
		}
		n := 0
		if err := db.JobResults(t.Context(), id, func(storage.Result) error { n++; return nil }); err != nil || n != len(addrs) {
			t.Fatalf("run %d: %d results for %d addresses (%v)", i, n, len(addrs), err)
		}
		t.Logf("run %d: completed in %v", i, time.Since(start).Round(time.Millisecond))
	}
}

// TestFleetDatabaseRestart: PostgreSQL is killed and started again
// (pg_ctl restart -m immediate) while two boxes answer validations with
// Idempotency-Keys, three times. Every request answered 500 ("safe to
// retry with the same Idempotency-Key") reaches a final answer when
// retried with its key, on either box, within a lease of the database's
// return; no key is charged twice and no credit stays held. On b4dd917
// some keys answered 409 "still in progress" on every retry for as long
// as their box lived.
func TestFleetDatabaseRestart(t *testing.T) {
	run := testWorld(t, 20*time.Millisecond)
	dsn, db, srv := fleetServer(t)
	boxes := startBoxes(t, 2, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	key := boxes[0].key
	acct := demoAccount(t, adminClient(t, boxes[0]))
	clients := []*client{{t: t, base: boxes[0].base, key: key}, {t: t, base: boxes[1].base, key: key}}
	const rounds, n = 3, 120
	total500, worst := 0, time.Duration(0)
	for round := range rounds {
		type answer struct {
			status int
			body   []byte
		}
		answers := make([]answer, n)
		var wg sync.WaitGroup
		var answered atomic.Int32
		sem := make(chan struct{}, 24)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				r := clients[i%2].do("POST", "/v1/validate", key, fmt.Sprintf(`{"email":"r%d-%d@catch.test"}`, round, i),
					"Idempotency-Key", fmt.Sprintf("restart-%d-%03d", round, i))
				answers[i] = answer{r.status, r.body}
				answered.Add(1)
			}()
		}
		waitFor(t, func() bool { return answered.Load() >= n/4 })
		srv.Kill()
		time.Sleep(200 * time.Millisecond)
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		wg.Wait()
		// Every request answered 500 is retried with its key, on the
		// other box first, until a final answer; all at once, as their
		// clients would.
		failed := 0
		var mu sync.Mutex
		for i, a := range answers {
			switch a.status {
			case 200:
				continue
			case 500:
				failed++
			default:
				t.Errorf("round %d, request %d: %d %s", round, i, a.status, a.body)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 1; ; try++ {
					r := clients[(i+try)%2].do("POST", "/v1/validate", key, fmt.Sprintf(`{"email":"r%d-%d@catch.test"}`, round, i),
						"Idempotency-Key", fmt.Sprintf("restart-%d-%03d", round, i))
					if r.status == 200 {
						mu.Lock()
						worst = max(worst, time.Since(back))
						mu.Unlock()
						return
					}
					if r.status != 500 && r.status != 409 {
						t.Errorf("round %d, request %d, retry %d: %d %s", round, i, try, r.status, r.body)
						return
					}
					if time.Since(back) > 2*time.Minute {
						t.Errorf("round %d, request %d: still %d %s two minutes after the database's return", round, i, r.status, r.body)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		total500 += failed
		t.Logf("round %d: %d of %d answered 500, every one retried to a 200", round, failed, n)
	}
	if total500 == 0 {
		t.Error("no request answered 500: the restarts came at no request")
	}
	t.Logf("the last retry answered 200 %v after the database's return (lease %v)", worst.Round(time.Millisecond), fleetLease)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c, err := db.Credits(t.Context(), acct.ID); err == nil && c.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			hs, err := db.Holds(t.Context(), acct.ID)
			t.Fatalf("credits still held a minute after the last round: %+v %v", hs, err)
		}
	}
	charges := chargeEntries(t, db, acct.ID)
	if charges != rounds*n {
		t.Errorf("%d charge entries for %d keys", charges, rounds*n)
	}
}
