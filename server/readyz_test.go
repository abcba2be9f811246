package server

import (
	"sync/atomic"
	"testing"
)

// TestReadyz: /readyz answers 503 with its reason while verifyd starts
// (Options.Ready) or cannot serve (Options.Unready), and 200 otherwise;
// /healthz (liveness) stays 200 while the database is away.
func TestReadyz(t *testing.T) {
	var started atomic.Bool
	var reason atomic.Value
	reason.Store("")
	e := startServer(t, func(o *Options) {
		o.Ready = started.Load
		o.Unready = func() string { return reason.Load().(string) }
	})
	check := func(path string, status int, body string) {
		t.Helper()
		r := e.do("GET", path, "")
		if r.status != status || string(r.body) != body {
			t.Errorf("GET %s: %d %s, want %d %s", path, r.status, r.body, status, body)
		}
	}
	check("/readyz", 503, `{"status":"unavailable","reason":"starting"}`)
	check("/healthz", 503, `{"status":"starting"}`)
	started.Store(true)
	check("/readyz", 200, `{"status":"ready"}`)
	check("/healthz", 200, `{"status":"ok"}`)
	reason.Store("database")
	check("/readyz", 503, `{"status":"unavailable","reason":"database"}`)
	check("/healthz", 200, `{"status":"ok"}`)
	reason.Store("")
	check("/readyz", 200, `{"status":"ready"}`)
	if r := e.do("GET", "/readyz", ""); r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
}
