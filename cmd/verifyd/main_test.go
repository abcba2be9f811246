package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	re := regexp.MustCompile(`API on (http://[0-9.:]+)`)
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
	select {
	case in.key = <-keyc:
	case <-time.After(200 * time.Millisecond):
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
	_, base := startVerifyd(t, testConfig)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/nope", 404, "NOT_FOUND"},
		{"POST", "/healthz", 400, "BAD_REQUEST"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || env.Error.Code != tc.code || env.Error.Message == "" {
			t.Errorf("%s %s: %d %+v (%v), want %d %s", tc.method, tc.path, resp.StatusCode, env, err, tc.status, tc.code)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: content type %q", tc.method, tc.path, ct)
		}
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
