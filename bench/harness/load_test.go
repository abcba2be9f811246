package harness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testAPI answers POST /v1/validate after delay: 200 with the body echoed,
// or 400 for a body containing "bad".
func testAPI(t *testing.T, delay time.Duration) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.URL.Path != "/v1/validate" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "wrong request", http.StatusTeapot)
			return
		}
		time.Sleep(delay)
		if strings.Contains(string(b), "bad") {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"BAD_REQUEST","message":"insufficient credits: 1 needed, 0 available"}}`)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestLoadCountBound(t *testing.T) {
	srv, n := testAPI(t, 2*time.Millisecond)
	addr := strings.TrimPrefix(srv.URL, "http://")
	bodies := []string{`{"email":"a"}`, `{"email":"bad"}`}
	st := Load{
		Client: NewClient(addr, 8, 5*time.Second), Path: "/v1/validate", Key: "k",
		Concurrency: 8, Count: 200, Duration: time.Minute, Timeout: 5 * time.Second,
		Body: func(i int) []byte { return []byte(bodies[i%2]) },
		Check: func(_, status int, body []byte, _ time.Duration) string {
			if status != 200 {
				return httpFailure(status, body)
			}
			return ""
		},
	}.Run(context.Background())
	if n.Load() != 200 || st.Sent != 200 || st.OK != 100 {
		t.Fatalf("server saw %d, sent %d, ok %d; want 200, 200, 100", n.Load(), st.Sent, st.OK)
	}
	if st.Errors["HTTP 400 BAD_REQUEST: insufficient credits"] != 100 || len(st.Errors) != 1 {
		t.Errorf("errors %v", st.Errors)
	}
	if st.Hist.Count() != 100 || st.Hist.Quantile(0.5) < 2*time.Millisecond {
		t.Errorf("histogram: %d values, p50 %v", st.Hist.Count(), st.Hist.Quantile(0.5))
	}
	if st.Window <= 0 || st.Window > st.Total || st.InWindow > st.OK || st.Throughput() <= 0 || st.OverallThroughput() <= 0 {
		t.Errorf("window %v total %v in window %d", st.Window, st.Total, st.InWindow)
	}
}

// TestLoadTimeAndContextBounds: a load far too long to finish stops at its
// Duration, or when its context ends. The bounds on elapsed time are
// loose on purpose (seconds against the hours the count would take), so a
// loaded machine cannot fail them; the context is cancelled from the
// server's side once requests arrive, not after a span of real time.
func TestLoadTimeAndContextBounds(t *testing.T) {
	srv, n := testAPI(t, 20*time.Millisecond)
	addr := strings.TrimPrefix(srv.URL, "http://")
	l := Load{
		Client: NewClient(addr, 4, 5*time.Second), Path: "/v1/validate", Key: "k",
		Concurrency: 4, Count: 1_000_000, Duration: 300 * time.Millisecond, Timeout: 5 * time.Second,
		Body: func(int) []byte { return []byte(`{}`) },
	}
	start := time.Now()
	st := l.Run(context.Background())
	// 4 at a time for 300 ms at 20 ms each is at most 64; a million
	// would take over an hour.
	if el := time.Since(start); el > 30*time.Second || st.Sent > 200 {
		t.Fatalf("duration bound: %v elapsed, %d sent", el, st.Sent)
	}
	// The sustained window ends at the last send, which is never after
	// Duration; the total includes the drain.
	if st.Window > l.Duration || st.Total < st.Window {
		t.Errorf("window %v, total %v", st.Window, st.Total)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := n.Load()
	go func() {
		for n.Load() < before+8 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	l.Duration = time.Hour
	start = time.Now()
	st = l.Run(ctx)
	if el := time.Since(start); el > 30*time.Second || st.Sent < 8 {
		t.Fatalf("context bound: %v elapsed, %d sent", el, st.Sent)
	}
}

func TestEngineTiming(t *testing.T) {
	for _, tc := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"engine;dur=12.345", 12345 * time.Microsecond, true},
		{"db;dur=1, engine;desc=\"x\";dur=0.250", 250 * time.Microsecond, true},
		{"", 0, false},
		{"engine", 0, false},
		{"engine;dur=x", 0, false},
		{"api;dur=3", 0, false},
	} {
		got, ok := EngineTiming([]byte(tc.h))
		if got != tc.want || ok != tc.ok {
			t.Errorf("EngineTiming(%q) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}
