package webhook

import (
	"context"
	"errors"

	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/storage"
)

// The operator's side of the dispatcher (the admin socket's webhook
// routes, and the dashboard's for an account's owners).

// Resend makes an event of the outbox or the dead-letter queue due now:
// of account, or of any account when account is "". storage.ErrNotFound
// when there is no such event (delivered events are not kept).
func (d *Dispatcher) Resend(ctx context.Context, account, id string) (storage.Event, error) {
	ev, err := d.db.ResendEvent(ctx, account, id)
	if err != nil {
		return ev, err
	}
	hooksRedriven.Inc()
	d.log.Info("webhook event resent by the operator", "event", id, "account", ev.Account)
	d.Wake()
	return ev, nil
}

// Test sends ev's payload once, under a new event id, with X-SVC-Test:
// true, and reports the outcome; nothing is recorded in the outbox.
func (d *Dispatcher) Test(ctx context.Context, ev storage.Event) hookapi.TestResult {
	hooksTestEvents.Inc()
	id := storage.NewUUIDv7(d.now())
	o := d.send(ctx, ev, id, 1, true)
	r := hookapi.TestResult{EventID: id, ReplayOf: ev.ID, Type: ev.Type, URL: ev.URL, Delivered: o.ok(),
		Status: o.status, Error: o.text(), DurationMs: o.dur.Milliseconds()}
	d.remember(Attempt{EventID: id, Account: ev.Account, Type: ev.Type, URL: ev.URL, At: d.now(), Attempt: 1,
		Status: o.status, Error: o.text(), DurationMs: r.DurationMs, Outcome: "test"})
	d.log.Info("webhook test event", "replay_of", ev.ID, "event", id, "url", redactURL(ev.URL),
		"delivered", r.Delivered, "status", o.status, "err", o.text())
	return r
}

// CheckURL judges raw as a batch's webhookUrl is judged when posted
// (Guard.CheckURL): an absolute http(s) URL whose host, when an IP
// literal, the SSRF guard allows.
func (d *Dispatcher) CheckURL(raw string) error {
	_, err := d.guard.CheckURL(raw)
	return err
}

// CheckPosted is CheckURL for the webhookUrl of a batch being posted: it
// also counts the SSRF guard's refusals
// (verifyd_webhooks_ssrf_refused_total{stage="post"}).
func (d *Dispatcher) CheckPosted(raw string) error {
	err := d.CheckURL(raw)
	if errors.Is(err, ErrRefused) {
		ssrfAtPost.Inc()
	}
	return err
}
