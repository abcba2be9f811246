package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verifyd-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "verifyd")
	cmd := exec.Command("go", "build", "-race", "-o", binary, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		panic("cannot build verifyd: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instance is a running verifyd.
type instance struct {
	cmd  *exec.Cmd
	base string // API base URL
	key  string // the demo key, when this start created the account
	dir  string // data dir's parent (config and data)

	mu     sync.Mutex
	stderr []string // every line verifyd logged
}

// waitLog waits until verifyd logged a line containing every one of subs.
func (in *instance) waitLog(t *testing.T, subs ...string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		in.mu.Lock()
		for _, l := range in.stderr {
			ok := true
			for _, s := range subs {
				ok = ok && strings.Contains(l, s)
			}
			if ok {
				in.mu.Unlock()
				return l
			}
		}
		in.mu.Unlock()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	t.Fatalf("verifyd never logged %q; it logged:\n%s", subs, strings.Join(in.stderr, "\n"))
	return ""
}

// startVerifyd runs the binary with a config file and returns its API base
// URL, read from the line it prints when it listens.
func startVerifyd(t *testing.T, config string) (*exec.Cmd, string) {
	t.Helper()
	in := startIn(t, t.TempDir(), config)
	return in.cmd, in.base
}

// startIn runs verifyd with data in dir (reused across restarts).
func startIn(t *testing.T, dir, config string) *instance {
	t.Helper()
	cfgPath := filepath.Join(dir, "verifyd.toml")
	// Tests use the demo account unless their config says otherwise; its
	// key is printed on the first start on a data directory.
	_, statErr := os.Stat(filepath.Join(dir, "data"))
	fresh := errors.Is(statErr, fs.ErrNotExist)
	if !strings.Contains(config, "demo_account") {
		config = "demo_account = true\n" + config
	}
	wantKey := fresh && strings.Contains(config, "demo_account = true")
	config = "data_dir = " + quote(filepath.Join(dir, "data")) + "\n" + config
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "-config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	keyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`(svc_live_\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				keyc <- m[1]
			}
		}
	}()
	re := regexp.MustCompile(`API on (https?://[0-9.:]+)`)
	found := make(chan string, 1)
	in := &instance{cmd: cmd, dir: dir}
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			in.mu.Lock()
			in.stderr = append(in.stderr, sc.Text())
			in.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	select {
	case in.base = <-found:
	case <-time.After(60 * time.Second):
		t.Fatal("verifyd did not say where it listens")
	}
	if wantKey {
		// The key goes to stdout before the API line to stderr, but the
		// two pipes are read apart: wait for it, however busy the machine.
		select {
		case in.key = <-keyc:
		case <-time.After(60 * time.Second):
			t.Fatal("verifyd did not print the demo account's key")
		}
	}
	return in
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

const testConfig = `
log_format = "json"
[http]
listen = "127.0.0.1:0"
[metrics]
listen = "127.0.0.1:0"
`

func TestHealthzAndShutdown(t *testing.T) {
	cmd, base := startVerifyd(t, testConfig)
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("verifyd did not exit 0 on SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("verifyd did not stop on SIGTERM")
	}
}

// TestErrorEnvelope checks that unknown paths and wrong methods answer the
// spec's error envelope with a code from its enumeration.
func TestErrorEnvelope(t *testing.T) {
	in := startIn(t, t.TempDir(), testConfig)
	base := in.base
	// Never a redirect: http.Client would follow one, so refuse them to see
	// the first answer.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		method, path string
		body         string
		header       []string
		status       int
		code         string
		issue        string // a details.issues path the answer must name
	}{
		{"GET", "/nope", "", nil, 404, "NOT_FOUND", ""},
		{"POST", "/healthz", "", nil, 400, "BAD_REQUEST", ""},
		// The router's redirects are off: each of these was a bare 301 or
		// 308 to the client's Host, before authentication.
		{"GET", "/v1/balance/", "", nil, 404, "NOT_FOUND", ""},
		{"GET", "/V1/BALANCE", "", nil, 404, "NOT_FOUND", ""},
		{"GET", "/v1//balance", "", nil, 404, "NOT_FOUND", ""},
		{"POST", "/v1/validate/", `{"email":"a@b.test"}`, nil, 404, "NOT_FOUND", ""},
		{"GET", "/v1/jobs/../x", "", nil, 404, "NOT_FOUND", ""},
		{"OPTIONS", "/v1/balance", "", nil, 400, "BAD_REQUEST", ""},
		// A parameter given twice is refused, not read as its first value.
		{"GET", "/v1/results?limit=50&limit=abc", "", nil, 400, "BAD_REQUEST", "limit"},
		{"GET", "/v1/results?kind=all&kind=single", "", nil, 400, "BAD_REQUEST", "kind"},
		// Invalid UTF-8 and lone surrogates are refused on the slow JSON
		// path (the second member keeps the fast path out), never probed
		// in an altered form.
		{"POST", "/v1/validate", "{\"email\":\"a\xff@b.test\",\"cache\":false}", nil, 400, "BAD_REQUEST", ""},
		{"POST", "/v1/validate", "{\"cache\":false,\"email\":\"a\xc3@b.test\"}", nil, 400, "BAD_REQUEST", ""},
		{"POST", "/v1/validate", `{"email":"a\ud800@b.test"}`, nil, 400, "BAD_REQUEST", "email"},
		{"POST", "/v1/validate", "{\"email\":\"a\uFFFD@b.test\"}", nil, 400, "BAD_REQUEST", "email"},
		{"POST", "/v1/batch", "{\"emails\":[\"a\xff@b.test\"]}", nil, 400, "BAD_REQUEST", ""},
		{"POST", "/v1/batch", `{"emails":["ok@b.test","a\udfff@b.test"]}`, nil, 400, "BAD_REQUEST", "emails[1]"},
		// Idempotency-Key is 8 to 128 characters, not bytes: four
		// two-byte characters are too short, 100 are fine.
		{"POST", "/v1/validate", `{"email":"x"}`, []string{"Idempotency-Key", strings.Repeat("é", 4)}, 400, "BAD_REQUEST", "Idempotency-Key"},
		{"POST", "/v1/validate", `{"email":"x"}`, []string{"Idempotency-Key", strings.Repeat("é", 100)}, 400, "BAD_REQUEST", "email"},
		{"POST", "/v1/batch", `{"emails":["a@b.test"]}`, []string{"Idempotency-Key", strings.Repeat("k", 129)}, 400, "BAD_REQUEST", "Idempotency-Key"},
	} {
		name := tc.method + " " + tc.path + " " + tc.body
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+in.key)
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tc.header != nil {
			req.Header.Set(tc.header[0], tc.header[1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct {
				Code, Message string
				Details       struct {
					Issues []struct{ Path, Message string }
				}
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || env.Error.Code != tc.code || env.Error.Message == "" {
			t.Errorf("%s: %d %+v (%v), want %d %s", name, resp.StatusCode, env, err, tc.status, tc.code)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", name, ct)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			t.Errorf("%s: Location %q", name, loc)
		}
		if tc.issue != "" && !slices.ContainsFunc(env.Error.Details.Issues, func(i struct{ Path, Message string }) bool { return i.Path == tc.issue }) {
			t.Errorf("%s: issues %+v do not name %s", name, env.Error.Details.Issues, tc.issue)
		}
	}
	// Nothing above was charged or recorded.
	c := &client{t: t, base: base, key: in.key}
	if b := balance(t, c, in.key); b != 1000 {
		t.Errorf("balance %d after refused requests", b)
	}
}

// TestDemoAccountOnlyWhenAsked: the demo account and its printed key come
// with the embedded defaults (make run) or demo_account = true, never
// under an operator's configuration file that does not ask for them.
func TestDemoAccountOnlyWhenAsked(t *testing.T) {
	in := startIn(t, t.TempDir(), "demo_account = false\n"+testConfig)
	if in.key != "" {
		t.Fatalf("a key was printed: %s", in.key)
	}
	as, err := adminClient(t, in).Accounts(context.Background())
	if err != nil || len(as) != 0 {
		t.Fatalf("accounts %v, %v; want none", as, err)
	}
	in.mu.Lock()
	for _, l := range in.stderr {
		if strings.Contains(l, "svc_live_") {
			t.Errorf("a key in the log: %s", l)
		}
	}
	in.mu.Unlock()

	// A file that does not name the key: off.
	cfg := filepath.Join(t.TempDir(), "v.toml")
	os.WriteFile(cfg, []byte("[smtp]\nport = 2525\n"), 0o600)
	out, err := exec.Command(binary, "-print-config", "-config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo_account = false") {
		t.Errorf("a file without demo_account: %v\n%s", err, out)
	}
	// The embedded defaults (no -config, no /etc/verifyd/verifyd.toml): on.
	if _, err := os.Stat("/etc/verifyd/verifyd.toml"); err == nil {
		t.Skip("this machine has /etc/verifyd/verifyd.toml")
	}
	out, err = exec.Command(binary, "-print-config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo_account = true") {
		t.Errorf("the embedded defaults: %v\n%s", err, out)
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(good, []byte("[smtp]\nport = 2525\n"), 0o600)
	os.WriteFile(bad, []byte("[smtp]\nport = 0\nhelo = \"x\"\n[egress]\naddresses = [\"not-an-ip\"]\n"), 0o600)

	out, err := exec.Command(binary, "-check-config", "-config", good).CombinedOutput()
	if err != nil {
		t.Fatalf("good config refused: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "-check-config", "-config", bad).CombinedOutput()
	if err == nil {
		t.Fatalf("bad config accepted:\n%s", out)
	}
	for _, want := range []string{"smtp.helo: unknown key", "smtp.port:", "egress.addresses[0]:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not name %q:\n%s", want, out)
		}
	}
}
