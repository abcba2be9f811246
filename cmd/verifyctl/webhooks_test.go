package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// newWebhookEnv is newEnv with the webhook dispatcher's admin routes,
// whose deliveries give up after giveUp.
func newWebhookEnv(t *testing.T, giveUp time.Duration) *env {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(filepath.Join(dir, "db"), pebble.Options{PurgeInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hooks, err := webhook.Start(webhook.Options{DB: db, Logger: quiet,
		AllowPrivate: true, RetrySchedule: []time.Duration{time.Hour}, GiveUpAfter: giveUp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hooks.Close(context.Background()) })
	ks, err := receipt.NewKeySet(receipt.NewFileStore(filepath.Join(dir, "keys")))
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{DB: db, Keys: ks, Logger: quiet, Webhooks: hooks})
	sock := filepath.Join(socketDir(t), "admin.sock")
	if err := srv.Listen(sock); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &env{t: t, dir: dir, db: db, keys: ks, sock: sock}
}

func hookServer(t *testing.T, status *atomic.Int32, got *atomic.Int32) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestWebhookDeliveryCommands(t *testing.T) {
	e := newWebhookEnv(t, 100*time.Millisecond)
	a, err := e.db.CreateAccount(t.Context(), "hooks", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	var badStatus, badGot, goodStatus, goodGot atomic.Int32
	badStatus.Store(500)
	goodStatus.Store(200)
	bad, good := hookServer(t, &badStatus, &badGot), hookServer(t, &goodStatus, &goodGot)

	// An event whose receiver fails: tried, then given up after 100 ms.
	ev, err := e.db.Enqueue(t.Context(), storage.Event{Account: a.ID, Type: "batch.completed", URL: bad.URL + "/hook",
		Body: []byte(`{"event":"batch.completed","job_id":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Written behind verifyd's back: resend makes the dispatcher look.
	contains(t, "resend", e.ok("webhooks", "resend", ev.ID), ev.ID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if dl, _ := e.db.DeadLetters(t.Context(), "", 0); len(dl) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event did not reach the dead-letter queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One more waiting in the outbox, due in an hour.
	later, _ := e.db.Enqueue(t.Context(), storage.Event{Account: a.ID, Type: "reputation.warning", URL: bad.URL + "/later",
		Body: []byte(`{}`), NextAttempt: time.Now().Add(time.Hour)})

	out := e.ok("webhooks", "dlq")
	contains(t, "dlq", out, ev.ID, a.ID, "batch.completed", "HTTP 500", bad.URL+"/hook", "DEAD SINCE")
	var dl hookapi.EventList
	e.okJSON(&dl, "webhooks", "dlq", "--account", a.ID)
	if len(dl.Events) != 1 || dl.Events[0].ID != ev.ID || dl.Events[0].Attempts != 2 {
		t.Fatalf("dlq -json: %+v", dl)
	}
	out = e.ok("webhooks", "deliveries")
	contains(t, "deliveries", out, "waiting for delivery: 1", later.ID, "latest attempts", ev.ID, "dead", "retry")
	var del struct {
		Outbox   []hookapi.Event   `json:"outbox"`
		Attempts []hookapi.Attempt `json:"attempts"`
	}
	e.okJSON(&del, "webhooks", "deliveries", "--limit", "1")
	if len(del.Outbox) != 1 || len(del.Attempts) != 1 || del.Attempts[0].Outcome != "dead" {
		t.Fatalf("deliveries -json: %+v", del)
	}
	e.fails(1, "webhooks", "dlq", "--account", "acct_nosuchaccount00000")
	e.fails(2, "webhooks", "dlq", "--limit", "0")

	// A test event replays the latest payload (the reputation warning).
	out = e.ok("webhooks", "test", a.ID, "--url", good.URL+"/test")
	if kvValue(t, out, "delivered") != "true" || kvValue(t, out, "status") != "200" || kvValue(t, out, "replay of") != later.ID || goodGot.Load() != 1 {
		t.Fatalf("test:\n%s", out)
	}
	r := e.ctl("", "webhooks", "test", a.ID) // to its own (failing) endpoint
	if r.code != 1 || kvValue(t, r.stdout, "delivered") != "false" || kvValue(t, r.stdout, "status") != "500" {
		t.Fatalf("test to a failing endpoint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.fails(2, "webhooks", "test")

	// Resend the dead letter once the receiver works.
	badStatus.Store(200)
	n := badGot.Load()
	out = e.ok("webhooks", "resend", ev.ID)
	contains(t, "resend", out, ev.ID, "batch.completed")
	for deadline := time.Now().Add(10 * time.Second); badGot.Load() == n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the resent event was not delivered")
		}
	}
	if msg := e.fails(1, "webhooks", "resend", "01890000-0000-7000-8000-000000000000"); !strings.Contains(msg, "no event") {
		t.Errorf("resend of an unknown event: %s", msg)
	}
	contains(t, "help", e.ok("help"), "webhooks deliveries", "webhooks dlq", "webhooks resend EVENT_ID", "webhooks test ACCOUNT")
}
