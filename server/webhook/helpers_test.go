package webhook

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for storage and the dispatcher.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var quiet = slog.New(slog.DiscardHandler)

// startDispatcher starts a Dispatcher that may reach loopback, closed
// when the test ends.
func startDispatcher(t testing.TB, db Store, tweak func(*Options)) *Dispatcher {
	t.Helper()
	o := Options{DB: db, Logger: quiet, AllowPrivate: true, Timeout: 5 * time.Second}
	if tweak != nil {
		tweak(&o)
	}
	d, err := Start(o)
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
