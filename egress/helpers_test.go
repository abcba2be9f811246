package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: every pool's
// background loop must have stopped with Close.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "leaked goroutines: %d before, %d after\n%s\n", before, n, buf)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeClock is an Options.Now that moves only when told, and an
// Options.Sleep that records each wait and (if advance) moves the clock by it.
type fakeClock struct {
	mu      sync.Mutex
	t       time.Time
	advance bool
	slept   []time.Duration
	fail    error // returned by the next Sleep
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), advance: true}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	if err := c.fail; err != nil {
		c.fail = nil
		c.mu.Unlock()
		return err
	}
	if c.advance {
		c.t = c.t.Add(d)
	}
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.slept)
}

// recorder collects events.
type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

func kinds(evs []Event) []string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, e.Kind)
	}
	return ks
}

// memStore is a Store in memory.
type memStore struct {
	mu      sync.Mutex
	data    []byte
	saves   int
	loadErr error
}

func (s *memStore) LoadEgressState() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.data), s.loadErr
}

func (s *memStore) SaveEgressState(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = slices.Clone(b)
	s.saves++
	return nil
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a pool under test with its clock and event recorder.
type env struct {
	p   *Pool
	clk *fakeClock
	rec *recorder
}

// newEnv makes a pool on addrs (loopback only) with a fake clock, no rate
// cap unless opts says otherwise, and closes it at the end of the test.
func newEnv(t testing.TB, addrs []string, tweak func(*Options)) *env {
	t.Helper()
	e := &env{clk: newFakeClock(), rec: &recorder{}}
	opts := Options{
		Addresses:        ips(addrs...),
		MaxConnsPerHost:  4,
		MaxRatePerHost:   -1,
		GreylistCooldown: time.Minute,
		MaxCooldown:      5 * time.Minute,
		Now:              e.clk.Now,
		Sleep:            e.clk.Sleep,
		OnEvent:          e.rec.add,
		Logger:           quietLogger,
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	e.p = p
	return e
}

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// acquire acquires or fails the test.
func (e *env) acquire(t testing.TB, dest string, prefer string) *Lease {
	t.Helper()
	var pr netip.Addr
	if prefer != "" {
		pr = ip(prefer)
	}
	l, err := e.p.Acquire(context.Background(), ip(dest), pr)
	if err != nil {
		t.Fatalf("Acquire(%s, prefer %q): %v", dest, prefer, err)
	}
	return l
}

// status returns the snapshot of addr, and whether it is in the pool.
func (e *env) status(addr string) (AddrStatus, bool) {
	for _, s := range e.p.Snapshot() {
		if addrLabel(s.Addr) == addr {
			return s, true
		}
	}
	return AddrStatus{}, false
}

// waiters returns the number of Acquires waiting for a slot to dest.
func (e *env) waiters(dest string) int {
	ds := e.p.lockDestIfAny(ip(dest))
	if ds == nil {
		return 0
	}
	defer ds.mu.Unlock()
	return len(ds.waiters)
}

// waitForWaiters waits until n Acquires wait for a slot to dest. It waits
// for goroutines to block, not for time to pass.
func (e *env) waitForWaiters(t testing.TB, dest string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.waiters(dest) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters for %s, want %d", e.waiters(dest), dest, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// result is what an Acquire on another goroutine returned.
type result struct {
	l   *Lease
	err error
}

func (e *env) acquireAsync(ctx context.Context, dest string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := e.p.Acquire(ctx, ip(dest), netip.Addr{})
		ch <- result{l, err}
	}()
	return ch
}

// mustReceive waits for an Acquire that is expected to have been unblocked.
func mustReceive(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still blocked")
		return result{}
	}
}

func isCooling(err error) (*CoolingError, bool) {
	var ce *CoolingError
	return ce, errors.As(err, &ce) && errors.Is(err, ErrAllCooling)
}
