package batch

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/storage"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeVerifier answers from a rule per address and records every call.
type fakeVerifier struct {
	// answer returns the result of the nth probe (from 1) of email; nil
	// means valid.
	answer func(email string, n int) *probe.Result
	// delay is how long each call takes.
	delay time.Duration
	// gate, when set, is taken before each call and given back after:
	// tests close it or fill it to control progress.
	gate chan struct{}
	// fail, when set, makes calls fail with this error.
	fail error
	// blockAfter, when positive, makes every call after that many block
	// until its context ends (the engine of a stopping verifyd).
	blockAfter int

	mu      sync.Mutex
	calls   int
	probes  map[string]int // address → probes
	order   []string       // addresses in call order
	cur     map[string]int // domain → calls in flight
	maxCur  map[string]int
	prefers []netip.Addr
}

func newFake() *fakeVerifier {
	return &fakeVerifier{probes: map[string]int{}, cur: map[string]int{}, maxCur: map[string]int{}}
}

func (f *fakeVerifier) VerifyDomain(ctx context.Context, addrs []address.Input, prefer netip.Addr) ([]*probe.Result, error) {
	emails := make([]string, len(addrs))
	for i, in := range addrs {
		emails[i] = in.Email
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { f.gate <- struct{}{} }()
	}
	d := addrs[0].ASCIIDomain()
	f.mu.Lock()
	if f.blockAfter > 0 && f.calls >= f.blockAfter {
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.calls++
	f.cur[d]++
	f.maxCur[d] = max(f.maxCur[d], f.cur[d])
	f.prefers = append(f.prefers, prefer)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.cur[d]--
		f.mu.Unlock()
	}()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail != nil {
		return nil, f.fail
	}
	out := make([]*probe.Result, len(emails))
	for i, e := range emails {
		f.mu.Lock()
		f.probes[e]++
		n := f.probes[e]
		f.order = append(f.order, e)
		f.mu.Unlock()
		var r *probe.Result
		if f.answer != nil {
			r = f.answer(e, n)
		}
		if r == nil {
			r = valid(e)
		}
		out[i] = r
	}
	return out, nil
}

func (f *fakeVerifier) probed(email string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[email]
}

func valid(email string) *probe.Result {
	d := address.NewInput(email).ASCIIDomain()
	return &probe.Result{Email: email, Status: probe.StatusValid, Reason: probe.ReasonOK, Score: 90,
		Checks:   probe.Checks{Syntax: true, MX: true, Domain: d, MXHost: "mx." + d},
		ProbedAt: time.Now(), Latency: 12 * time.Millisecond}
}

func greylisted(email string, retryAt time.Time, from netip.Addr) *probe.Result {
	d := address.NewInput(email).ASCIIDomain()
	return &probe.Result{Email: email, Status: probe.StatusUnknown, Reason: probe.ReasonTimeout, Score: 0,
		Checks:   probe.Checks{Syntax: true, MX: true, Domain: d, MXHost: "mx." + d},
		ProbedAt: time.Now(), RetryAt: retryAt, Egress: from}
}

// addresses makes n addresses over domains domains.
func addresses(prefix string, n, domains int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s%d@d%d.%s.test", prefix, i, i%domains, prefix)
	}
	return out
}

// startService starts a Scheduler with small timings for tests.
func startService(t testing.TB, db storage.Store, v Verifier, tweak func(*Options)) *Scheduler {
	t.Helper()
	o := Options{DB: db, Verifier: v, Logger: quiet, FlushInterval: 20 * time.Millisecond, RetryWindow: time.Minute}
	if l, ok := db.(storage.JobLeases); ok {
		o.Leases = l // a fleet's store
	}
	if tweak != nil {
		tweak(&o)
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// submit creates a job the way POST /v1/batch does, of unique addresses.
func submit(t testing.TB, s *Scheduler, account string, addrs []string, webhook string) storage.Job {
	t.Helper()
	j, err := s.db.(storage.Jobs).CreateJob(t.Context(), storage.JobSpec{Account: account, Addresses: addrs, WebhookURL: webhook})
	if err != nil {
		t.Fatal(err)
	}
	s.Add(j, addrs)
	return j
}

// waitJob waits until the job has ended and returns it.
func waitJob(t testing.TB, db storage.Jobs, id string, within time.Duration) storage.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := db.Job(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Active() {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after %v: %d of %d", id, j.Status, within, j.Processed, j.Total)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitUntil(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// results returns the job's stored results by email.
func results(t testing.TB, db storage.Jobs, id string) map[string]storage.Result {
	t.Helper()
	out := map[string]storage.Result{}
	if err := db.JobResults(t.Context(), id, func(r storage.Result) error {
		out[r.Email] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// startHooks starts a webhook dispatcher that may reach loopback, closed
// when the test ends.
func startHooks(t testing.TB, db storage.Store) *webhook.Dispatcher {
	t.Helper()
	d, err := webhook.Start(webhook.Options{DB: db, Logger: quiet, AllowPrivate: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	return d
}
