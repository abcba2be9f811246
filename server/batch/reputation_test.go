package batch

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
)

// TestReputationWarning: the egress pool's reputation event becomes one
// reputation.warning per running job with a webhook, not repeated.
func TestReputationWarning(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	f := newFake()
	f.gate = make(chan struct{}) // the engine never answers
	s := startService(t, db, f, nil)
	withHook := submit(t, s, acct, []string{"a@x.test"}, "https://hooks.example/a")
	submit(t, s, acct, []string{"b@x.test"}, "")
	waitUntil(t, 5*time.Second, "running", func() bool {
		j, _ := db.Job(t.Context(), withHook.ID)
		return j.Status == storage.JobRunning
	})
	ev := egress.Event{Kind: egress.EventReputation, Addr: netip.MustParseAddr("192.0.2.10"), Reason: "3 policy blocks in 10m0s", At: time.Now()}
	s.EgressEvent(ev)
	s.EgressEvent(ev) // the same warning again: not repeated
	s.EgressEvent(egress.Event{Kind: egress.EventCooldown, Addr: ev.Addr})
	waitUntil(t, 5*time.Second, "warning enqueued", func() bool {
		evs, _ := db.OutboxEvents(t.Context(), acct, 0)
		return len(evs) == 1
	})
	time.Sleep(50 * time.Millisecond)
	evs, _ := db.OutboxEvents(t.Context(), acct, 0)
	if len(evs) != 1 || evs[0].Type != webhook.EventReputationWarning || evs[0].URL != "https://hooks.example/a" {
		t.Fatalf("outbox %+v", evs)
	}
	var body webhook.ReputationEvent
	if err := json.Unmarshal(evs[0].Body, &body); err != nil || body.Event != webhook.EventReputationWarning ||
		body.JobID != withHook.ID || body.EgressIP != "192.0.2.10" || body.Reason != ev.Reason {
		t.Fatalf("body %s", evs[0].Body)
	}
}
