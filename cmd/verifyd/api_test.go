package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// testWorld is a small world with one domain of each kind the API tests
// need, on its own loopback subnet.
func testWorld(t *testing.T, latency time.Duration) *world.Running {
	t.Helper()
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.shop.test", IP: "127.71.0.1", TLS: "1.3", Latency: world.Duration(latency)},
			{Name: "mx.catch.test", IP: "127.71.0.2", Latency: world.Duration(latency)},
			{Name: "mx.mailinator.com", IP: "127.71.0.3"},
		},
		Domains: []*world.Domain{
			{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK, "info": world.MailboxOK}},
			{Name: "catch.test", MX: []world.MX{{Pref: 10, Host: "mx.catch.test"}}, Policy: world.PolicyCatchAll},
			{Name: "mailinator.com", MX: []world.MX{{Pref: 10, Host: "mx.mailinator.com"}}, Policy: world.PolicyCatchAll},
			{Name: "gone.test", NXDomain: true},
		},
	}
	return startWorld(t, w)
}

// startWorld validates w and starts it on loopback until the test ends.
func startWorld(t *testing.T, w *world.World) *world.Running {
	t.Helper()
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	run, err := world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	return run
}

// inviteAuth is the [auth] of the tests of the account surface:
// registration by invitation, and a cheap password hash.
const inviteAuth = `
[auth]
registration = "invite"
argon2_memory_kib = 1024
argon2_iterations = 1
`

// worldConfig points verifyd at the world.
func worldConfig(run *world.Running, extra string) string {
	return fmt.Sprintf(`
log_format = "json"
log_level = "warn"
[http]
listen = "127.0.0.1:0"
[metrics]
listen = ""
[resolver]
upstreams = [%q]
[smtp]
port = %d
helo_name = "verifyd.e2e.test"
command_timeout = "5s"
[egress]
addresses = ["127.0.0.2", "127.0.0.3"]
greylist_cooldown = "1s"
max_conns_per_host = 64
self_check_interval = "0s" # the world gives the test's egress addresses no reverse DNS
[probe]
lists_dir = "/nonexistent"
`, run.DNS.Addr(), run.SMTP.Port()) + extra
}

type client struct {
	t    *testing.T
	base string
	key  string
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (c *client) do(method, path, key string, body string, header ...string) reply {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// errCode checks an error envelope and returns its details.
func (r reply) wantError(t *testing.T, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	m := r.json(t)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != code || e["message"] == "" {
		t.Fatalf("envelope %s, want code %s", r.body, code)
	}
	d, _ := e["details"].(map[string]any)
	return d
}

func TestAPIValidateEndToEnd(t *testing.T) {
	run := testWorld(t, 0)
	in := startIn(t, t.TempDir(), worldConfig(run, ""))
	if in.key == "" {
		t.Fatal("no demo key printed on the first start")
	}
	c := &client{t: t, base: in.base, key: in.key}

	credits := 1000
	for _, tc := range []struct {
		email, status, reason string
		catchAll, disposable  bool
		role                  bool
	}{
		{"ann@shop.test", "valid", "ok", false, false, false},
		{"info@shop.test", "valid", "role_based", false, false, true},
		{"zed@shop.test", "invalid", "mailbox_not_found", false, false, false},
		{"any@catch.test", "risky", "catch_all", true, false, false},
		{"x@mailinator.com", "disposable", "disposable_domain", false, true, false},
		{"x@gone.test", "invalid", "domain_not_found", false, false, false},
		{"not an address@", "invalid", "syntax_error", false, false, false},
	} {
		r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":%q}`, tc.email))
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.email, r.status, r.body)
		}
		credits--
		if got := r.header.Get("X-Credits-Remaining"); got != strconv.Itoa(credits) {
			t.Errorf("%s: X-Credits-Remaining %q, want %d", tc.email, got, credits)
		}
		m := r.json(t)
		// The engine's time to the microsecond, and the receipt's
		// latency_ms its whole milliseconds.
		var engineMs float64
		if n, err := fmt.Sscanf(r.header.Get("Server-Timing"), "engine;dur=%f", &engineMs); n != 1 || err != nil {
			t.Errorf("%s: Server-Timing %q", tc.email, r.header.Get("Server-Timing"))
		} else if lat, _ := m["latency_ms"].(float64); math.Floor(engineMs) != lat {
			t.Errorf("%s: Server-Timing engine %v ms, latency_ms %v", tc.email, engineMs, lat)
		}
		for _, k := range []string{"email", "status", "score", "checks", "probed_at", "latency_ms", "kid", "sig", "credits_remaining", "cached"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: receipt lacks %s: %s", tc.email, k, r.body)
			}
		}
		checks := m["checks"].(map[string]any)
		for _, k := range []string{"syntax", "mx", "is_disposable", "is_role_based", "is_free_provider", "is_catch_all", "auth"} {
			if _, ok := checks[k]; !ok {
				t.Errorf("%s: checks lack %s", tc.email, k)
			}
		}
		if m["status"] != tc.status || checks["reason"] != tc.reason {
			t.Errorf("%s: %v/%v, want %s/%s", tc.email, m["status"], checks["reason"], tc.status, tc.reason)
		}
		if checks["is_catch_all"] != tc.catchAll || checks["is_disposable"] != tc.disposable || checks["is_role_based"] != tc.role {
			t.Errorf("%s: flags %v", tc.email, checks)
		}
		if m["credits_remaining"] != float64(credits) || m["cached"] != false || m["kid"] != "v1" {
			t.Errorf("%s: credits_remaining %v cached %v kid %v", tc.email, m["credits_remaining"], m["cached"], m["kid"])
		}
		if pa, _ := m["probed_at"].(string); len(pa) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(pa, "Z") {
			t.Errorf("%s: probed_at %q is not ISO 8601 UTC with milliseconds", tc.email, pa)
		}
		verifyWithPython(t, c, r.body)
	}

	// Balance.
	if m := c.do("GET", "/v1/balance", c.key, "").json(t); m["credits"] != float64(credits) {
		t.Errorf("balance %v, want %d", m["credits"], credits)
	}

	// cache: true reuses the account's own result, still costs a credit,
	// and the history row points at its source.
	r := c.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test","cache":true}`)
	credits--
	if m := r.json(t); r.status != 200 || m["cached"] != true || m["credits_remaining"] != float64(credits) {
		t.Fatalf("cached: %d %s", r.status, r.body)
	}
	if st := r.header.Get("Server-Timing"); st != "" {
		t.Errorf("a cached answer has Server-Timing %q: no engine ran", st)
	}
	verifyWithPython(t, c, r.body)
	h := c.do("GET", "/v1/results?limit=1", c.key, "").json(t)
	rows := h["results"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["cached_from"] == nil || rows[0].(map[string]any)["kind"] != "single" {
		t.Fatalf("history after a cached validation: %v", h)
	}

	// Idempotency: replay, conflict, bad key.
	body := `{"email":"ann@shop.test"}`
	first := c.do("POST", "/v1/validate", c.key, body, "Idempotency-Key", "order-12345")
	credits--
	again := c.do("POST", "/v1/validate", c.key, body, "Idempotency-Key", "order-12345")
	if first.status != 200 || again.status != 200 || !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %d replay=%q same=%v", first.status, again.status, again.header.Get("Idempotent-Replay"), bytes.Equal(first.body, again.body))
	}
	if first.header.Get("Idempotent-Replay") != "" {
		t.Error("first answer marked as a replay")
	}
	if d := c.do("POST", "/v1/validate", c.key, `{"email":"zed@shop.test"}`, "Idempotency-Key", "order-12345").wantError(t, 409, "CONFLICT"); d["field"] != "Idempotency-Key" {
		t.Errorf("conflict details %v", d)
	}
	c.do("POST", "/v1/validate", c.key, body, "Idempotency-Key", "short").wantError(t, 400, "BAD_REQUEST")
	if m := c.do("GET", "/v1/balance", c.key, "").json(t); m["credits"] != float64(credits) {
		t.Errorf("balance %v after a replay, want %d (a replay costs nothing)", m["credits"], credits)
	}

	// Bad bodies.
	for _, b := range []string{`{}`, `{"email":""}`, `{"email":"nobody"}`, `{"email":1}`, `{"email":"a@b.test","x":1}`,
		`{"email":"` + strings.Repeat("a", 321) + `@b"}`, `not json`} {
		d := c.do("POST", "/v1/validate", c.key, b).wantError(t, 400, "BAD_REQUEST")
		if is, _ := d["issues"].([]any); len(is) == 0 {
			t.Errorf("%s: no details.issues: %v", b, d)
		}
	}

	// Auth.
	c.do("POST", "/v1/validate", "", body).wantError(t, 401, "UNAUTHORIZED")
	c.do("GET", "/v1/balance", "svc_live_nope", "").wantError(t, 401, "UNAUTHORIZED")
	c.do("GET", "/v1/balance", "svc_live_abcdefghijkl_"+strings.Repeat("x", 43), "").wantError(t, 401, "UNAUTHORIZED")

	// Results queries.
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "kind=other", "cursor=yesterday", "page=2"} {
		c.do("GET", "/v1/results?"+q, c.key, "").wantError(t, 400, "BAD_REQUEST")
	}

	// Unknown paths and methods.
	c.do("GET", "/v1/nothing", c.key, "").wantError(t, 404, "NOT_FOUND")
	c.do("DELETE", "/v1/validate", c.key, "").wantError(t, 400, "BAD_REQUEST")
}

// verifyWithPython checks a receipt with the stdlib-only Python verifier
// against the JWKS fetched over HTTP: code that shares nothing with the
// signer.
func verifyWithPython(t *testing.T, c *client, receipt []byte) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not found; receipt checked by the Go verifier only")
		return
	}
	jwks := c.do("GET", "/.well-known/jwks.json", "", "")
	if jwks.status != 200 {
		t.Fatalf("jwks: %d", jwks.status)
	}
	dir := t.TempDir()
	jp, rp := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "receipt.json")
	os.WriteFile(jp, jwks.body, 0o600)
	os.WriteFile(rp, receipt, 0o600)
	script, _ := filepath.Abs("../../server/receipt/verifier-py/verify_receipt.py")
	cmd := exec.Command(py, script, jp)
	f, err := os.Open(rp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python verifier refused the receipt: %v\n%s\n%s", err, out, receipt)
	}
}

func TestAPIRateLimit(t *testing.T) {
	run := testWorld(t, 0)
	in := startIn(t, t.TempDir(), worldConfig(run, "[rate_limits]\nwindow = \"1m\"\nresults = 3\n"))
	c := &client{t: t, base: in.base, key: in.key}
	for i := range 3 {
		if r := c.do("GET", "/v1/results", c.key, ""); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := c.do("GET", "/v1/results", c.key, "")
	d := r.wantError(t, 429, "RATE_LIMITED")
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 || d["retryAfter"] != float64(ra) {
		t.Fatalf("Retry-After %q, details %v", r.header.Get("Retry-After"), d)
	}
	// Another route class has its own window.
	if r := c.do("GET", "/v1/balance", c.key, ""); r.status != 200 {
		t.Fatalf("balance after results were limited: %d", r.status)
	}
}

// TestAPICrashLosesNoCredit kills verifyd with SIGKILL while 50 validations
// with idempotency keys are in flight, restarts it, and shows that the
// ledger holds exactly the charges of the receipts that exist: every key
// retried after the restart either replays its receipt (charged once, before
// the crash) or is charged now; none is charged twice and held credits of
// requests that never answered were released.
func TestAPICrashLosesNoCredit(t *testing.T) {
	run := testWorld(t, 150*time.Millisecond)
	dir := t.TempDir()
	cfg := worldConfig(run, "[rate_limits]\ndisabled = true\n")
	in := startIn(t, dir, cfg)
	c := &client{t: t, base: in.base, key: in.key}
	const n = 50
	wait := keyedValidations(t, []string{c.base}, c.key, "crash-test-%03d", n)
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	in.cmd.Wait()
	answered := wait()
	t.Logf("%d of %d validations answered before the kill", len(answered), n)

	in2 := startIn(t, dir, cfg)
	if in2.key != "" {
		t.Fatal("the restart created another demo account")
	}
	c2 := &client{t: t, base: in2.base, key: c.key}
	before := int(c2.do("GET", "/v1/balance", c.key, "").json(t)["credits"].(float64))
	replays := retryKeyed(t, c2, "crash-test-%03d", n, answered)
	if before != 1000-replays {
		t.Errorf("balance after restart %d, want 1000 − %d charged before the crash", before, replays)
	}
	after := int(c2.do("GET", "/v1/balance", c.key, "").json(t)["credits"].(float64))
	if after != 1000-n {
		t.Errorf("balance after every key is answered: %d, want %d", after, 1000-n)
	}
	if replays < len(answered) {
		t.Errorf("%d replays, fewer than the %d receipts answered", replays, len(answered))
	}
	if len(answered) == 0 || len(answered) == n {
		t.Errorf("%d of %d answered before the kill: the test did not kill mid-way", len(answered), n)
	}
}

// keyedValidations starts n validations of ann<i>@catch.test, each with
// the Idempotency-Key keyFmt of i, the ith sent to bases[i%len(bases)]:
// the first half, then, once a quarter are answered, the second (so it is
// in flight when the caller kills a verifyd). wait returns, once every
// request has ended, the bodies answered 200 by index.
func keyedValidations(t *testing.T, bases []string, apiKey, keyFmt string, n int) (wait func() map[int][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[int][]byte{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", bases[i%len(bases)]+"/v1/validate", strings.NewReader(fmt.Sprintf(`{"email":"ann%d@catch.test"}`, i)))
			req.Header.Set("Authorization", "Bearer "+apiKey)
			req.Header.Set("Idempotency-Key", fmt.Sprintf(keyFmt, i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // its verifyd was killed mid-request
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				mu.Lock()
				answered[i] = b
				mu.Unlock()
			}
		}()
		if i == n/2-1 {
			// The first half finishes (about 1 s of 150 ms replies); the
			// second half is in flight when the kill comes.
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(answered) >= n/4 })
		}
	}
	time.Sleep(300 * time.Millisecond)
	return func() map[int][]byte {
		wg.Wait()
		return answered
	}
}

// retryKeyed sends keyedValidations' n requests again to c, at once, and
// checks each answer against what was answered before the kill: a key
// answered then replays the same body, no key is charged twice. It
// returns the replays.
func retryKeyed(t *testing.T, c *client, keyFmt string, n int, answered map[int][]byte) int {
	t.Helper()
	replays := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":"ann%d@catch.test"}`, i),
				"Idempotency-Key", fmt.Sprintf(keyFmt, i))
			if r.status != 200 {
				t.Errorf("retry %d: %d %s", i, r.status, r.body)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.header.Get("Idempotent-Replay") == "true" {
				replays++
			} else if _, ok := answered[i]; ok {
				t.Errorf("key %d was answered before the kill but not replayed: charged twice", i)
			}
			if prev, ok := answered[i]; ok && !bytes.Equal(prev, r.body) {
				t.Errorf("key %d: the replay differs from the receipt answered before the kill", i)
			}
		}()
	}
	wg.Wait()
	return replays
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 60 s")
		}
	}
}
