package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/jobs/hookapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage/pebble"
)

// adminSocket serves the admin API with the service's routes on a unix
// socket and returns a client for it.
func adminSocket(t *testing.T, db *pebble.DB, s *Service) *adminapi.Client {
	t.Helper()
	ks, err := receipt.NewKeySet(receipt.NewFileStore(filepath.Join(t.TempDir(), "keys")))
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{DB: db, Keys: ks, Logger: quiet, Extra: s.AdminRoutes})
	dir, err := os.MkdirTemp("", "jobsadm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "admin.sock")
	if err := srv.Listen(sock); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	c := adminapi.NewClient(sock)
	t.Cleanup(c.Close)
	return c
}

// TestAdminWebhooks: list the outbox, the dead-letter queue and the
// attempts; resend a dead letter; fire a test event replaying the latest
// payload to another endpoint.
func TestAdminWebhooks(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	acct := newAccount(t, db, 100)
	failing := newReceiver(t, 500)
	good := newReceiver(t, 200)
	s := startService(t, db, newFake(), func(o *Options) {
		o.Webhooks.RetrySchedule = []time.Duration{time.Hour}
		o.Webhooks.GiveUpAfter = 150 * time.Millisecond
	})
	c := adminSocket(t, db, s)
	ctx := context.Background()

	j := submit(t, s, acct, []string{"a@x.test"}, failing.URL+"/hook")
	waitJob(t, db, j.ID, 5*time.Second)
	// First attempt fails; the last one, as the window closes, too.
	waitUntil(t, 5*time.Second, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters("", 0)
		return len(dl) == 1
	})
	dead, err := hookapi.DeadLetters(ctx, c, acct, 10)
	if err != nil || len(dead) != 1 || dead[0].Type != EventBatchCompleted || dead[0].Attempts != 2 || dead[0].LastStatus != 500 || len(dead[0].Body) == 0 {
		t.Fatalf("dead letters: %+v, %v", dead, err)
	}
	if out, err := hookapi.Outbox(ctx, c, "", 0); err != nil || len(out) != 0 {
		t.Fatalf("outbox: %+v, %v", out, err)
	}
	at, err := hookapi.Attempts(ctx, c, acct, 10)
	if err != nil || len(at) != 2 || at[0].Outcome != "dead" || at[1].Outcome != "retry" {
		t.Fatalf("attempts: %+v, %v", at, err)
	}
	if _, err := hookapi.Outbox(ctx, c, "acct_nosuchaccount0000", 0); !isCode(err, adminapi.CodeNotFound) {
		t.Errorf("unknown account: %v", err)
	}
	if _, err := hookapi.Attempts(ctx, c, "", 0); err != nil {
		t.Errorf("no limit: %v", err)
	}

	// Test event: the latest payload, to the good endpoint, under its own
	// event id and X-SVC-Test; nothing changes in the outbox.
	res, err := hookapi.Test(ctx, c, hookapi.TestRequest{Account: acct, URL: good.URL + "/test"})
	if err != nil || !res.Delivered || res.Status != 200 || res.ReplayOf != dead[0].ID || res.EventID == dead[0].ID {
		t.Fatalf("test event: %+v, %v", res, err)
	}
	got := good.requests()
	if len(got) != 1 || string(got[0].body) != string(dead[0].Body) || got[0].header.Get(HeaderTest) != "true" ||
		got[0].header.Get(HeaderEventID) != res.EventID {
		t.Fatalf("test delivery: %+v", got)
	}
	checkSigned(t, secretOf(t, db, acct), got[0])
	if _, err := hookapi.Test(ctx, c, hookapi.TestRequest{Account: acct, URL: "ftp://x"}); !isCode(err, adminapi.CodeBadRequest) {
		t.Errorf("bad test URL: %v", err)
	}
	other := newAccount(t, db, 0)
	if _, err := hookapi.Test(ctx, c, hookapi.TestRequest{Account: other}); !isCode(err, adminapi.CodeNotFound) {
		t.Errorf("account without events: %v", err)
	}

	// Resend the dead letter, after the receiver recovered.
	failing.mu.Lock()
	failing.status = 200
	failing.mu.Unlock()
	n := failing.count()
	ev, err := hookapi.Resend(ctx, c, dead[0].ID)
	if err != nil || ev.ID != dead[0].ID || ev.Attempts != 0 {
		t.Fatalf("resend: %+v, %v", ev, err)
	}
	waitUntil(t, 5*time.Second, "redelivered", func() bool { return failing.count() == n+1 })
	waitUntil(t, 5*time.Second, "outbox empty", func() bool { evs, _ := db.OutboxEvents("", 0); return len(evs) == 0 })
	if dl, _ := db.DeadLetters("", 0); len(dl) != 0 {
		t.Errorf("dead letters after the resend: %+v", dl)
	}
	if _, err := hookapi.Resend(ctx, c, dead[0].ID); !isCode(err, adminapi.CodeNotFound) {
		t.Errorf("resend of a delivered event: %v", err)
	}
}

func isCode(err error, code string) bool {
	var e *adminapi.Error
	return errors.As(err, &e) && e.Code == code
}
