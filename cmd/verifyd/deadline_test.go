package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFleetRequestDeadline: another transaction holds the account's row
// (SELECT … FOR UPDATE, as an operator's session or a stuck box would)
// while keyed validations come in. Each answers 500 INTERNAL in the
// envelope, without the database's words, within http.request_timeout
// (3 s here) and a margin for a loaded machine — not after
// storage.call_timeout (30 s), which is how long each of its storage
// calls waited before the request's deadline reached the database — and
// charges nothing. Once the lock is released each, retried with its
// Idempotency-Key, answers 200; the account is charged once per key and
// nothing stays held.
func TestFleetRequestDeadline(t *testing.T) {
	run := testWorld(t, 20*time.Millisecond)
	dsn, db := fleetDB(t)
	const requestTimeout = 3 * time.Second
	cfg := strings.Replace(worldConfig(run, "realtime_budget = \"2s\"\n[rate_limits]\ndisabled = true\n"), "[http]\n",
		fmt.Sprintf("[http]\nrequest_timeout = %q\n", requestTimeout.String()), 1)
	box := startBoxes(t, 1, dsn, cfg)[0]
	c := &client{t: t, base: box.base, key: box.key}
	acct := demoAccount(t, adminClient(t, box))
	if r := c.do("POST", "/v1/validate", c.key, `{"email":"warm@catch.test"}`); r.status != 200 {
		t.Fatalf("before the lock: %d %s", r.status, r.body)
	}
	before := chargeEntries(t, db, acct.ID)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, acct.ID); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var wg sync.WaitGroup
	answers := make([]reply, n)
	took := make([]time.Duration, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			answers[i] = c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":"locked%d@catch.test"}`, i),
				"Idempotency-Key", fmt.Sprintf("deadline-key-%d", i))
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	bound := requestTimeout + 4*time.Second
	for i, r := range answers {
		r.wantError(t, 500, "INTERNAL")
		for _, w := range internalWords {
			if strings.Contains(strings.ToLower(string(r.body)), w) {
				t.Errorf("request %d: the answer shows %q: %s", i, w, r.body)
			}
		}
		if took[i] > bound {
			t.Errorf("request %d answered after %v, past %v (http.request_timeout %v)", i, took[i].Round(time.Millisecond), bound, requestTimeout)
		}
		if took[i] < requestTimeout-time.Second/2 {
			t.Errorf("request %d answered after %v, before its deadline: the lock did not hold it", i, took[i].Round(time.Millisecond))
		}
	}
	t.Logf("answered 500 after %v (http.request_timeout %v, storage.call_timeout 30 s)", took, requestTimeout)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":"locked%d@catch.test"}`, i),
			"Idempotency-Key", fmt.Sprintf("deadline-key-%d", i))
		if r.status != 200 {
			t.Errorf("request %d retried once the lock is released: %d %s", i, r.status, r.body)
		}
	}
	waitFor(t, func() bool { cr, err := db.Credits(ctx, acct.ID); return err == nil && cr.Held == 0 })
	if got := chargeEntries(t, db, acct.ID) - before; got != n {
		t.Errorf("%d charges for %d keys", got, n)
	}
}
