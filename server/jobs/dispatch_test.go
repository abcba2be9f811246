package jobs

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// receiver is a webhook endpoint on loopback that records what it gets.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	status int
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newReceiver(t *testing.T, status int) *receiver {
	rc := &receiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Clone(), b, time.Now()})
		st := rc.status
		rc.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// checkSigned verifies a request as a receiver should.
func checkSigned(t *testing.T, secret string, r received) {
	t.Helper()
	if !Verify(secret, r.body, r.header.Get(HeaderSignature)) {
		t.Errorf("X-SVC-Signature %q does not verify", r.header.Get(HeaderSignature))
	}
	ts, err := strconv.ParseInt(r.header.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		t.Errorf("X-SVC-Timestamp %q", r.header.Get(HeaderTimestamp))
	}
	id := r.header.Get(HeaderEventID)
	if !storage.ValidUUID(id) {
		t.Errorf("X-SVC-Event-Id %q", id)
	}
	if got, want := r.header.Get(HeaderSignatureTS), SignTimestamped(secret, id, ts, r.body); got != want {
		t.Errorf("X-SVC-Signature-Timestamped %q, want %q", got, want)
	}
	if r.header.Get("Content-Type") != "application/json" {
		t.Errorf("content type %q", r.header.Get("Content-Type"))
	}
}

func secretOf(t *testing.T, db *pebble.DB, acct string) string {
	a, err := db.GetAccount(acct)
	if err != nil {
		t.Fatal(err)
	}
	return a.WebhookSecret
}

// TestWebhookDeliveredOnce: a job's completion reaches the receiver once,
// signed with the account's secret, and leaves the outbox.
func TestWebhookDeliveredOnce(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	acct := newAccount(t, db, 100)
	rc := newReceiver(t, 204)
	s := startService(t, db, newFake(), nil)
	j := submit(t, s, acct, []string{"a@x.test", "b@y.test"}, rc.URL+"/hook?token=abc")
	j = waitJob(t, db, j.ID, 5*time.Second)
	waitUntil(t, 5*time.Second, "delivery", func() bool { return rc.count() == 1 })
	waitUntil(t, 5*time.Second, "outbox empty", func() bool { evs, _ := db.OutboxEvents("", 0); return len(evs) == 0 })
	time.Sleep(50 * time.Millisecond)
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got))
	}
	checkSigned(t, secretOf(t, db, acct), got[0])
	var body completedEvent
	if err := json.Unmarshal(got[0].body, &body); err != nil || body.JobID != j.ID || body.Processed != 2 || body.Event != "batch.completed" {
		t.Fatalf("body %s", got[0].body)
	}
	if got[0].header.Get(HeaderEvent) != EventBatchCompleted || got[0].header.Get(HeaderAttempt) != "1" {
		t.Errorf("headers %v", got[0].header)
	}
	at := s.hooks.attempts("", 10)
	if len(at) != 1 || at[0].Outcome != "delivered" || at[0].Status != 204 {
		t.Errorf("attempts %+v", at)
	}
}

// TestWebhookRetrySchedule walks an always-failing receiver through the
// whole schedule on a fake clock: retries at 30 s, 2 min, 10 min, 1 h,
// 6 h, then every 6 h, one last attempt at 24 h, then the dead-letter
// queue.
func TestWebhookRetrySchedule(t *testing.T) {
	c := newClock()
	db := openDB(t, t.TempDir(), c.Now)
	acct := newAccount(t, db, 0)
	rc := newReceiver(t, 503)
	s := startService(t, db, newFake(), func(o *Options) { o.Now = c.Now })
	t0 := c.Now()
	ev, err := db.Enqueue(storage.Event{Account: acct, Type: EventReputationWarning, URL: rc.URL, Body: []byte(`{"event":"reputation.warning"}`)})
	if err != nil {
		t.Fatal(err)
	}
	s.hooks.wake()
	wantAt := []time.Duration{0, 30 * time.Second, 150 * time.Second, 750 * time.Second,
		time.Hour + 750*time.Second, 7*time.Hour + 750*time.Second, 13*time.Hour + 750*time.Second,
		19*time.Hour + 750*time.Second, 24 * time.Hour}
	for i, at := range wantAt {
		if now := c.Now().Sub(t0); now < at {
			// Just before: nothing goes.
			c.Advance(at - now - time.Second)
			s.hooks.wake()
			time.Sleep(20 * time.Millisecond)
			if rc.count() != i {
				t.Fatalf("attempt %d went a second early", i+1)
			}
			c.Advance(time.Second)
			s.hooks.wake()
		}
		waitUntil(t, 5*time.Second, "attempt "+strconv.Itoa(i+1), func() bool { return rc.count() == i+1 })
		waitUntil(t, 5*time.Second, "outcome recorded", func() bool { return s.hooks.inflightCount() == 0 })
	}
	waitUntil(t, 5*time.Second, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters(acct, 0)
		return len(dl) == 1
	})
	dl, _ := db.DeadLetters(acct, 0)
	if dl[0].ID != ev.ID || dl[0].Attempts != len(wantAt) || dl[0].LastStatus != 503 {
		t.Fatalf("dead letter %+v", dl[0])
	}
	for i, r := range rc.requests() {
		if r.header.Get(HeaderEventID) != ev.ID || r.header.Get(HeaderAttempt) != strconv.Itoa(i+1) {
			t.Errorf("attempt %d: id %s attempt %s", i+1, r.header.Get(HeaderEventID), r.header.Get(HeaderAttempt))
		}
	}
	if evs, _ := db.OutboxEvents("", 0); len(evs) != 0 {
		t.Errorf("outbox after giving up: %+v", evs)
	}
}

// TestWebhookRedirectNotFollowed: a 3xx is a failed attempt; the target
// of the redirect is never contacted.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	acct := newAccount(t, db, 0)
	target := newReceiver(t, 200)
	redir := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redir.Close()
	s := startService(t, db, newFake(), nil)
	if _, err := db.Enqueue(storage.Event{Account: acct, Type: EventBatchCompleted, URL: redir.URL, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	s.hooks.wake()
	waitUntil(t, 5*time.Second, "rescheduled", func() bool {
		evs, _ := db.OutboxEvents("", 0)
		return len(evs) == 1 && evs[0].Attempts == 1
	})
	evs, _ := db.OutboxEvents("", 0)
	if evs[0].LastStatus != 307 || target.count() != 0 {
		t.Fatalf("after a redirect: %+v; target hit %d times", evs[0], target.count())
	}
}

// TestWebhookSSRFRefusedAtDelivery: with allow_private off, a URL whose
// host resolves to loopback is refused at the dial, the receiver never
// sees a connection, and the event goes to the dead-letter queue at once.
func TestWebhookSSRFRefusedAtDelivery(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	acct := newAccount(t, db, 0)
	rc := newReceiver(t, 200)
	port := rc.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	res := fakeResolver{"hooks.customer.example": {netip.MustParseAddr("127.0.0.1")}}
	s := startService(t, db, newFake(), func(o *Options) {
		o.Webhooks.AllowPrivate = false
		o.Webhooks.Resolver = res
	})
	for _, u := range []string{rc.URL, "http://hooks.customer.example:" + strconv.Itoa(int(port)) + "/x"} {
		if _, err := db.Enqueue(storage.Event{Account: acct, Type: EventBatchCompleted, URL: u, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	s.hooks.wake()
	waitUntil(t, 5*time.Second, "dead-lettered", func() bool {
		dl, _ := db.DeadLetters(acct, 0)
		return len(dl) == 2
	})
	dl, _ := db.DeadLetters(acct, 0)
	for _, ev := range dl {
		if ev.Attempts != 1 || ev.LastStatus != 0 || !strings.Contains(ev.LastError, "loopback") {
			t.Errorf("dead letter %+v", ev)
		}
	}
	if rc.count() != 0 {
		t.Fatalf("the receiver got %d requests through the guard", rc.count())
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestReputationWarning: the egress pool's reputation event becomes one
// reputation.warning per running job with a webhook, not repeated.
func TestReputationWarning(t *testing.T) {
	db := openDB(t, t.TempDir(), nil)
	acct := newAccount(t, db, 100)
	f := newFake()
	f.gate = make(chan struct{}) // the engine never answers
	s := startService(t, db, f, nil)
	withHook := submit(t, s, acct, []string{"a@x.test"}, "https://hooks.example/a")
	submit(t, s, acct, []string{"b@x.test"}, "")
	waitUntil(t, 5*time.Second, "running", func() bool {
		j, _ := db.Job(withHook.ID)
		return j.Status == storage.JobRunning
	})
	ev := egress.Event{Kind: egress.EventReputation, Addr: netip.MustParseAddr("192.0.2.10"), Reason: "3 policy blocks in 10m0s", At: time.Now()}
	s.EgressEvent(ev)
	s.EgressEvent(ev) // the same warning again: not repeated
	s.EgressEvent(egress.Event{Kind: egress.EventCooldown, Addr: ev.Addr})
	waitUntil(t, 5*time.Second, "warning enqueued", func() bool {
		evs, _ := db.OutboxEvents(acct, 0)
		return len(evs) == 1
	})
	time.Sleep(50 * time.Millisecond)
	evs, _ := db.OutboxEvents(acct, 0)
	if len(evs) != 1 || evs[0].Type != EventReputationWarning || evs[0].URL != "https://hooks.example/a" {
		t.Fatalf("outbox %+v", evs)
	}
	var body reputationEvent
	if err := json.Unmarshal(evs[0].Body, &body); err != nil || body.Event != EventReputationWarning ||
		body.JobID != withHook.ID || body.EgressIP != "192.0.2.10" || body.Reason != ev.Reason {
		t.Fatalf("body %s", evs[0].Body)
	}
}
