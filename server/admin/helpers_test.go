package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage/pebble"
)

// env is an admin server on a real unix socket, over a real pebble.DB
// and a real receipt.KeySet in temporary directories.
type env struct {
	t    *testing.T
	db   *pebble.DB
	keys *receipt.KeySet
	srv  *Server
	sock string
	hc   *http.Client
	logs *syncBuffer
}

// socketDir is a directory short enough for a socket path (sun_path is
// 108 bytes; t.TempDir() can be longer under a deep TMPDIR).
func socketDir(t *testing.T) string {
	t.Helper()
	if d := t.TempDir(); len(d) < 80 {
		return d
	}
	d, err := os.MkdirTemp("", "va")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newEnv(t *testing.T, extra ...func(*Options)) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := pebble.Open(filepath.Join(dir, "db"), pebble.Options{
		PurgeInterval: -1,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ks, err := receipt.NewKeySet(receipt.NewFileStore(filepath.Join(dir, "keys")))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	opts := Options{
		DB:     db,
		Keys:   ks,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range extra {
		f(&opts)
	}
	srv := New(opts)
	sock := filepath.Join(socketDir(t), "run", "admin.sock")
	if err := srv.Listen(sock); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	e := &env{t: t, db: db, keys: ks, srv: srv, sock: sock, logs: logs, hc: unixClient(sock)}
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// do sends a request and returns the status and body.
func (e *env) do(method, path, body string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://admin"+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, b
}

// ok sends a request that must answer want, and decodes the body into out.
func (e *env) ok(method, path, body string, want int, out any) []byte {
	e.t.Helper()
	status, b := e.do(method, path, body)
	if status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

// fail sends a request that must fail with status and code, and returns
// the error.
func (e *env) fail(method, path, body string, status int, code string) *adminapi.Error {
	e.t.Helper()
	got, b := e.do(method, path, body)
	var env adminapi.Envelope
	if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
		e.t.Fatalf("%s %s: not an error envelope: %s", method, path, b)
	}
	if got != status || env.Error.Code != code {
		e.t.Fatalf("%s %s: %d %s, want %d %s: %s", method, path, got, env.Error.Code, status, code, b)
	}
	if env.Error.Message == "" {
		e.t.Errorf("%s %s: empty message", method, path)
	}
	return env.Error
}

// issuePaths lists the paths of details.issues.
func issuePaths(e *adminapi.Error) []string {
	var out []string
	issues, _ := e.Details["issues"].([]any)
	for _, it := range issues {
		m, _ := it.(map[string]any)
		p, _ := m["path"].(string)
		out = append(out, p)
	}
	return out
}

func (e *env) createAccount(name, plan string, credits int64) adminapi.Account {
	e.t.Helper()
	body, _ := json.Marshal(adminapi.CreateAccount{Name: name, Plan: plan, Credits: credits})
	var a adminapi.Account
	e.ok("POST", "/v1/accounts", string(body), http.StatusCreated, &a)
	return a
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
