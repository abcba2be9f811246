package webhook

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/webhook/webhooktest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
	"github.com/verifyd/verifyd/storage/storagetest"
)

// checkSigned verifies a request as a receiver should.
func checkSigned(t *testing.T, secret string, r webhooktest.Request) {
	t.Helper()
	if !Verify(secret, r.Body, r.Header.Get(HeaderSignature)) {
		t.Errorf("X-SVC-Signature %q does not verify", r.Header.Get(HeaderSignature))
	}
	ts, err := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		t.Errorf("X-SVC-Timestamp %q", r.Header.Get(HeaderTimestamp))
	}
	id := r.Header.Get(HeaderEventID)
	if !storage.ValidUUID(id) {
		t.Errorf("X-SVC-Event-Id %q", id)
	}
	if got, want := r.Header.Get(HeaderSignatureTS), SignTimestamped(secret, id, ts, r.Body); got != want {
		t.Errorf("X-SVC-Signature-Timestamped %q, want %q", got, want)
	}
	if r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("content type %q", r.Header.Get("Content-Type"))
	}
}

func secretOf(t *testing.T, db *pebble.DB, acct string) string {
	a, err := db.GetAccount(t.Context(), acct)
	if err != nil {
		t.Fatal(err)
	}
	return a.WebhookSecret
}

// TestWebhookDeliveredOnce: a job's completion event reaches the
// receiver once, signed with the account's secret, and leaves the outbox.
func TestWebhookDeliveredOnce(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 100)
	rc := webhooktest.New(t, 204)
	d := startDispatcher(t, db, nil)
	j := storage.Job{ID: "0194c1c2-0000-7000-8000-000000000001", Account: acct, Status: storage.JobCompleted,
		Total: 2, Processed: 2, Counts: map[string]int{"valid": 2}, CompletedAt: time.Now(), WebhookURL: rc.URL + "/hook?token=abc"}
	ev, err := JobEvent(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Enqueue(t.Context(), *ev); err != nil {
		t.Fatal(err)
	}
	d.Wake()
	waitUntil(t, 5*time.Second, "delivery", func() bool { return rc.Count() == 1 })
	waitUntil(t, 5*time.Second, "outbox empty", func() bool { evs, _ := db.OutboxEvents(t.Context(), "", 0); return len(evs) == 0 })
	time.Sleep(50 * time.Millisecond)
	got := rc.Requests()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	checkSigned(t, secretOf(t, db, acct), got[0])
	var body CompletedEvent
	if err := json.Unmarshal(got[0].Body, &body); err != nil || body.JobID != j.ID || body.Processed != 2 || body.Event != "batch.completed" {
		t.Fatalf("body %s", got[0].Body)
	}
	if got[0].Header.Get(HeaderEvent) != EventBatchCompleted || got[0].Header.Get(HeaderAttempt) != "1" {
		t.Errorf("headers %v", got[0].Header)
	}
	at := d.Attempts("", 10)
	if len(at) != 1 || at[0].Outcome != "delivered" || at[0].Status != 204 {
		t.Errorf("attempts %+v", at)
	}
}

// TestWebhookRetrySchedule walks an always-failing receiver through the
// whole schedule on a fake clock: retries at 30 s, 2 min, 10 min, 1 h,
// 6 h, then every 6 h, one last attempt at 24 h, then the dead-letter
// queue.
func TestWebhookRetrySchedule(t *testing.T) {
	c := storagetest.NewClock()
	db := pebbletest.Open(t, c.Now)
	acct := pebbletest.Account(t, db, 0)
	rc := webhooktest.New(t, 503)
	d := startDispatcher(t, db, func(o *Options) { o.Now = c.Now })
	t0 := c.Now()
	ev, err := db.Enqueue(t.Context(), storage.Event{Account: acct, Type: EventReputationWarning, URL: rc.URL, Body: []byte(`{"event":"reputation.warning"}`)})
	if err != nil {
		t.Fatal(err)
	}
	d.Wake()
	wantAt := []time.Duration{0, 30 * time.Second, 150 * time.Second, 750 * time.Second,
		time.Hour + 750*time.Second, 7*time.Hour + 750*time.Second, 13*time.Hour + 750*time.Second,
		19*time.Hour + 750*time.Second, 24 * time.Hour}
	for i, at := range wantAt {
		if now := c.Now().Sub(t0); now < at {
			// Just before: nothing goes.
			c.Advance(at - now - time.Second)
			d.Wake()
			time.Sleep(20 * time.Millisecond)
			if rc.Count() != i {
				t.Fatalf("attempt %d went a second early", i+1)
			}
			c.Advance(time.Second)
			d.Wake()
		}
		waitUntil(t, 5*time.Second, "attempt "+strconv.Itoa(i+1), func() bool { return rc.Count() == i+1 })
		waitUntil(t, 5*time.Second, "outcome recorded", func() bool { return d.inflightCount() == 0 })
	}
	waitUntil(t, 5*time.Second, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters(t.Context(), acct, 0)
		return len(dl) == 1
	})
	dl, _ := db.DeadLetters(t.Context(), acct, 0)
	if dl[0].ID != ev.ID || dl[0].Attempts != len(wantAt) || dl[0].LastStatus != 503 {
		t.Fatalf("dead letter %+v", dl[0])
	}
	for i, r := range rc.Requests() {
		if r.Header.Get(HeaderEventID) != ev.ID || r.Header.Get(HeaderAttempt) != strconv.Itoa(i+1) {
			t.Errorf("attempt %d: id %s attempt %s", i+1, r.Header.Get(HeaderEventID), r.Header.Get(HeaderAttempt))
		}
	}
	if evs, _ := db.OutboxEvents(t.Context(), "", 0); len(evs) != 0 {
		t.Errorf("outbox after giving up: %+v", evs)
	}
}

// TestWebhookRedirectNotFollowed: a 3xx is a failed attempt; the target
// of the redirect is never contacted.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 0)
	target := webhooktest.New(t, 200)
	redir := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redir.Close()
	d := startDispatcher(t, db, nil)
	if _, err := db.Enqueue(t.Context(), storage.Event{Account: acct, Type: EventBatchCompleted, URL: redir.URL, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	d.Wake()
	waitUntil(t, 5*time.Second, "rescheduled", func() bool {
		evs, _ := db.OutboxEvents(t.Context(), "", 0)
		return len(evs) == 1 && evs[0].Attempts == 1
	})
	evs, _ := db.OutboxEvents(t.Context(), "", 0)
	if evs[0].LastStatus != 307 || target.Count() != 0 {
		t.Fatalf("after a redirect: %+v; target hit %d times", evs[0], target.Count())
	}
}

// TestWebhookSSRFRefusedAtDelivery: with allow_private off, a URL whose
// host resolves to loopback is refused at the dial, the receiver never
// sees a connection, and the event goes to the dead-letter queue at once.
func TestWebhookSSRFRefusedAtDelivery(t *testing.T) {
	db := pebbletest.Open(t, nil)
	acct := pebbletest.Account(t, db, 0)
	rc := webhooktest.New(t, 200)
	port := rc.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	res := fakeResolver{"hooks.customer.example": {netip.MustParseAddr("127.0.0.1")}}
	d := startDispatcher(t, db, func(o *Options) {
		o.AllowPrivate = false
		o.Resolver = res
	})
	for _, u := range []string{rc.URL, "http://hooks.customer.example:" + strconv.Itoa(int(port)) + "/x"} {
		if _, err := db.Enqueue(t.Context(), storage.Event{Account: acct, Type: EventBatchCompleted, URL: u, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	d.Wake()
	waitUntil(t, 5*time.Second, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters(t.Context(), acct, 0)
		return len(dl) == 2
	})
	dl, _ := db.DeadLetters(t.Context(), acct, 0)
	for _, ev := range dl {
		if ev.Attempts != 1 || ev.LastStatus != 0 || !strings.Contains(ev.LastError, "loopback") {
			t.Errorf("dead letter %+v", ev)
		}
	}
	if rc.Count() != 0 {
		t.Fatalf("the receiver got %d requests through the guard", rc.Count())
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
