package admin

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
	"github.com/verifyd/verifyd/storage"
)

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

// TestAdminWebhooks: list the outbox, the dead-letter queue and the
// attempts; resend a dead letter; fire a test event replaying the latest
// payload to another endpoint.
func TestAdminWebhooks(t *testing.T) {
	failing := webhooktest.New(t, 500)
	good := webhooktest.New(t, 200)
	e := newEnv(t, func(o *Options) {
		d, err := webhook.Start(webhook.Options{DB: o.DB.(webhook.Store), Logger: slog.New(slog.DiscardHandler), AllowPrivate: true,
			Timeout: 5 * time.Second, RetrySchedule: []time.Duration{time.Hour}, GiveUpAfter: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		o.Webhooks = d
	})
	db, c := e.db, adminapi.NewClient(e.sock)
	t.Cleanup(c.Close)
	ctx := context.Background()
	acct := e.createAccount("hooks", "enterprise", 100).ID

	// A job ended: its batch.completed event is in the outbox.
	ev, err := webhook.JobEvent(storage.Job{ID: "0194c1c2-0000-7000-8000-000000000002", Account: acct, Status: storage.JobCompleted,
		Total: 1, Processed: 1, Counts: map[string]int{"valid": 1}, CompletedAt: time.Now(), WebhookURL: failing.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Enqueue(t.Context(), *ev); err != nil {
		t.Fatal(err)
	}
	e.srv.opts.Webhooks.(*webhook.Dispatcher).Wake()
	// First attempt fails; the last one, as the window closes, too.
	waitFor(t, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters(t.Context(), "", 0)
		return len(dl) == 1
	})
	dead, err := hookapi.DeadLetters(ctx, c, acct, 10)
	if err != nil || len(dead) != 1 || dead[0].Type != webhook.EventBatchCompleted || dead[0].Attempts != 2 || dead[0].LastStatus != 500 || len(dead[0].Body) == 0 {
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
	got := good.Requests()
	if len(got) != 1 || string(got[0].Body) != string(dead[0].Body) || got[0].Header.Get(webhook.HeaderTest) != "true" ||
		got[0].Header.Get(webhook.HeaderEventID) != res.EventID {
		t.Fatalf("test delivery: %+v", got)
	}
	a, err := db.GetAccount(t.Context(), acct)
	if err != nil || !webhook.Verify(a.WebhookSecret, got[0].Body, got[0].Header.Get(webhook.HeaderSignature)) {
		t.Errorf("test delivery not signed with the account's secret: %v", err)
	}
	if _, err := hookapi.Test(ctx, c, hookapi.TestRequest{Account: acct, URL: "ftp://x"}); !isCode(err, adminapi.CodeBadRequest) {
		t.Errorf("bad test URL: %v", err)
	}
	other := e.createAccount("quiet", "enterprise", 0).ID
	if _, err := hookapi.Test(ctx, c, hookapi.TestRequest{Account: other}); !isCode(err, adminapi.CodeNotFound) {
		t.Errorf("account without events: %v", err)
	}

	// Resend the dead letter, after the receiver recovered.
	failing.SetStatus(200)
	n := failing.Count()
	re, err := hookapi.Resend(ctx, c, dead[0].ID)
	if err != nil || re.ID != dead[0].ID || re.Attempts != 0 {
		t.Fatalf("resend: %+v, %v", re, err)
	}
	waitFor(t, "redelivered", func() bool { return failing.Count() == n+1 })
	waitFor(t, "outbox empty", func() bool { evs, _ := db.OutboxEvents(t.Context(), "", 0); return len(evs) == 0 })
	if dl, _ := db.DeadLetters(t.Context(), "", 0); len(dl) != 0 {
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
