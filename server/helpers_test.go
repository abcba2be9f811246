package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe"
	"github.com/verifyd/verifyd/probe/address"
	"github.com/verifyd/verifyd/server/batch"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble/pebbletest"
)

// testEnv is the API served on loopback with real storage and keys, an
// account with credits and a key of both scopes.
type testEnv struct {
	t    *testing.T
	srv  *Server
	addr string // host:port
	key  string
}

var quiet = slog.New(slog.DiscardHandler)

// domainVerifier is the engine's batch mode answering every address
// valid.
type domainVerifier struct{}

func (domainVerifier) VerifyDomain(_ context.Context, addrs []address.Input, _ netip.Addr) ([]*probe.Result, error) {
	out := make([]*probe.Result, len(addrs))
	for i, in := range addrs {
		out[i] = valid(in.Email)
	}
	return out, nil
}

// startBatch starts a batch scheduler on db with domainVerifier, closed
// when the test ends.
func startBatch(t testing.TB, db storage.Store) *batch.Scheduler {
	t.Helper()
	s, err := batch.Start(batch.Options{DB: db, Verifier: domainVerifier{}, Logger: quiet, FlushInterval: 20 * time.Millisecond})
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

// startServer serves the API on loopback with real storage and keys, an
// account with 1,000 credits and a key of both scopes; mod changes the
// options (a Guard it sets replaces the default, without IP limits).
func startServer(t *testing.T, mod func(*Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	db := pebbletest.Open(t, nil)
	keys, err := receipt.NewKeySet(receipt.NewFileStore(dir + "/signing"))
	if err != nil {
		t.Fatal(err)
	}
	acct, err := db.CreateAccount(t.Context(), "test", storage.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AddCredits(t.Context(), acct.ID, 1000, "test"); err != nil {
		t.Fatal(err)
	}
	key, _, err := db.MintKey(t.Context(), acct.ID, []string{httpapi.ScopeRead, httpapi.ScopeWrite}, "test")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{DB: db, Keys: keys, Verifier: instantVerifier{}, Logger: quiet}
	if mod != nil {
		mod(&opts)
	}
	if opts.Guard == nil {
		opts.Guard = httpapi.NewGuard(httpapi.GuardOptions{DB: db, IPLimitsDisabled: true, Logger: quiet})
	}
	s := New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		s.Shutdown(t.Context())
		<-done
	})
	return &testEnv{t: t, srv: s, addr: ln.Addr().String(), key: key}
}

// reply is an answer read off the wire.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorEnvelope decodes the answer as spec §2.11's envelope; it fails
// the test when it is not one.
func (r reply) errorEnvelope(t *testing.T) (code, message string, details map[string]any) {
	t.Helper()
	var env struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error == nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("%d %q: not the error envelope (%v)", r.status, r.body, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%d %s: content type %q", r.status, r.body, ct)
	}
	return env.Error.Code, env.Error.Message, env.Error.Details
}

// raw sends a request as written and reads one answer; the connection
// closes after it.
func (e *testEnv) raw(req string) reply {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		e.t.Fatal(err)
	}
	return readReply(e.t, bufio.NewReader(c))
}

func readReply(t *testing.T, br *bufio.Reader) reply {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// do sends one request with net/http; hdr are name, value pairs: the
// first of a name replaces the header (a Content-Type the
// application/json of a body; an empty value removes it), a later one of
// the same name adds a second line.
func (e *testEnv) do(method, path, body string, hdr ...string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+e.addr+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(hdr); i += 2 {
		name := http.CanonicalHeaderKey(hdr[i])
		switch {
		case seen[name]:
			req.Header.Add(name, hdr[i+1])
		case hdr[i+1] == "":
			req.Header.Del(name)
		default:
			req.Header.Set(name, hdr[i+1])
		}
		seen[name] = true
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

// bearer is the Authorization header pair of the env's key.
func (e *testEnv) bearer() []string { return []string{"Authorization", "Bearer " + e.key} }
