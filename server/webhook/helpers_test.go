package webhook

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

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
