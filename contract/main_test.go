package contract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// The one verifyd and the one simulated world every test shares.
var (
	baseURL   string // http://127.0.0.1:port of verifyd's API
	adminSock string // verifyd's admin socket, for verifyctl
	ctlBin    string // the verifyctl binary
	mailWorld *world.Running

	logMu     sync.Mutex
	verifydLg []string // what verifyd logged, shown when a test fails
	raceSeen  bool     // verifyd (built with -race) reported a data race
)

// The simulated world. Hosts listen on 127.36.0.x; verifyd's egress
// addresses are 127.36.1.2 and 127.36.1.3; the tests' HTTP clients bind
// source addresses from 127.36.2.1 upwards (see newClient), one per
// client, so that the per source IP rate limits of §8 of one test never
// meet another's.
//
// Domains and what a correct verifier concludes of them, by the meaning
// of the verdicts in §2.3:
//
//	shop.test      accepts ann, bob, info, carol; 550 5.1.1 for any other
//	               local part: ann@ valid, zed@ invalid (no mailbox)
//	catch.test     accepts every local part: risky, is_catch_all
//	mailinator.com a disposable provider: disposable
//	gone.test      NXDOMAIN: invalid
//	refused.test   its MX refuses connections: unknown
//	grey.test      greylists every recipient for an hour: unknown
//	slow.test      a host that waits 1 s before each reply: jobs that
//	               stay running for a few seconds
//	freemail.test  a free mailbox provider (the operator's list)
//	traps.test     every address a spam trap (the operator's list)
func newWorld() *world.World {
	return &world.World{
		Hosts: []*world.Host{
			{Name: "mx.shop.test", IP: "127.36.0.1", TLS: "1.3"},
			{Name: "mx.catch.test", IP: "127.36.0.2"},
			{Name: "mx.mailinator.com", IP: "127.36.0.3"},
			{Name: "mx.refused.test", IP: "127.36.0.5", Mode: world.HostRefuse},
			{Name: "mx.slow.test", IP: "127.36.0.6", Latency: world.Duration(time.Second)},
			{Name: "mx.grey.test", IP: "127.36.0.7"},
			{Name: "mx.freemail.test", IP: "127.36.0.8"},
		},
		Domains: []*world.Domain{
			{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
				Mailboxes: map[string]world.MailboxState{
					"ann": world.MailboxOK, "bob": world.MailboxOK, "info": world.MailboxOK, "carol": world.MailboxOK,
				}},
			{Name: "catch.test", MX: []world.MX{{Pref: 10, Host: "mx.catch.test"}}, Policy: world.PolicyCatchAll},
			{Name: "mailinator.com", MX: []world.MX{{Pref: 10, Host: "mx.mailinator.com"}}, Policy: world.PolicyCatchAll},
			{Name: "gone.test", NXDomain: true},
			{Name: "refused.test", MX: []world.MX{{Pref: 10, Host: "mx.refused.test"}}},
			{Name: "slow.test", MX: []world.MX{{Pref: 10, Host: "mx.slow.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "grey.test", MX: []world.MX{{Pref: 10, Host: "mx.grey.test"}}, Policy: world.PolicyGreylist,
				GreylistDelay: world.Duration(time.Hour), Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "freemail.test", MX: []world.MX{{Pref: 10, Host: "mx.freemail.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "traps.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}}},
		},
	}
}

// operatorLists are the operator's override lists (lists_dir): a free
// provider and a spam trap domain of the world.
var operatorLists = map[string]string{
	"free.txt":     "freemail.test\n",
	"spamtrap.txt": "@traps.test\n",
}

// config is verifyd's configuration. It keeps §8's rate limits (no
// [rate_limits] section: the suite tests the defaults). The real-time
// budget is shortened so that a greylisting host answers unknown sooner.
const config = `data_dir = %q
log_format = "json"
log_level = "warn"
[http]
listen = "127.0.0.1:0"
[admin]
socket = %q
[metrics]
listen = ""
[resolver]
upstreams = [%q]
[smtp]
port = %d
helo_name = "verifyd.contract.test"
command_timeout = "5s"
[egress]
addresses = ["127.36.1.2", "127.36.1.3"]
greylist_cooldown = "1s"
self_check_interval = "0s"
[probe]
lists_dir = %q
realtime_budget = "8s"
[webhooks]
allow_private = true
`

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "verifyd-contract")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stop, err := start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contract: cannot start verifyd on the simulated world:", err)
		logMu.Lock()
		fmt.Fprintln(os.Stderr, strings.Join(verifydLg, "\n"))
		logMu.Unlock()
		if stop != nil {
			stop()
		}
		return 1
	}
	code := m.Run()
	stop()
	logMu.Lock()
	if raceSeen {
		fmt.Fprintln(os.Stderr, "contract: verifyd, built with -race, reported a data race")
		code = 1
	}
	logMu.Unlock()
	if code != 0 {
		logMu.Lock()
		fmt.Fprintf(os.Stderr, "contract: verifyd logged (level warn and above):\n%s\n", strings.Join(verifydLg, "\n"))
		logMu.Unlock()
	}
	return code
}

// start builds the binaries (or takes the ones $VERIFYD_CONTRACT_VERIFYD
// and $VERIFYD_CONTRACT_VERIFYCTL name: the suite then checks that build,
// an older release or the one a box runs), starts the world and verifyd,
// and returns the function that stops both.
func start(dir string) (stop func(), err error) {
	ctlBin = filepath.Join(dir, "verifyctl")
	bin := filepath.Join(dir, "verifyd")
	given, givenCtl := os.Getenv("VERIFYD_CONTRACT_VERIFYD"), os.Getenv("VERIFYD_CONTRACT_VERIFYCTL")
	switch {
	case given != "" && givenCtl != "":
		bin, ctlBin = given, givenCtl
		fmt.Fprintf(os.Stderr, "contract: checking %s (verifyctl %s)\n", bin, ctlBin)
	case given != "" || givenCtl != "":
		return nil, fmt.Errorf("set both VERIFYD_CONTRACT_VERIFYD and VERIFYD_CONTRACT_VERIFYCTL, or neither")
	default:
		for _, args := range [][]string{
			{"build", "-race", "-o", bin, "../cmd/verifyd"},
			{"build", "-o", ctlBin, "../cmd/verifyctl"},
		} {
			cmd := exec.Command("go", args...)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
			}
		}
	}

	w := newWorld()
	w.Defaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	mailWorld, err = world.Start(w, world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1})
	if err != nil {
		return nil, err
	}
	stopWorld := func() { mailWorld.Close() }

	lists := filepath.Join(dir, "lists")
	if err := os.Mkdir(lists, 0o700); err != nil {
		return stopWorld, err
	}
	for name, text := range operatorLists {
		if err := os.WriteFile(filepath.Join(lists, name), []byte(text), 0o600); err != nil {
			return stopWorld, err
		}
	}
	adminSock = filepath.Join(dir, "admin.sock")
	cfg := filepath.Join(dir, "verifyd.toml")
	text := fmt.Sprintf(config, filepath.Join(dir, "data"), adminSock, mailWorld.DNS.Addr(), mailWorld.SMTP.Port(), lists)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return stopWorld, err
	}

	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return stopWorld, err
	}
	if err := cmd.Start(); err != nil {
		return stopWorld, err
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	stop = func() {
		// Stop the process this suite started, by its id: SIGTERM, then
		// SIGKILL if it does not drain in time.
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
		stopWorld()
	}
	found := make(chan string, 1)
	api := regexp.MustCompile(`API on (http://[0-9.:]+)`)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			if len(verifydLg) < 5000 {
				verifydLg = append(verifydLg, line)
			}
			if strings.Contains(line, "WARNING: DATA RACE") {
				raceSeen = true
			}
			logMu.Unlock()
			if m := api.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // should the scanner stop early
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case baseURL = <-found:
	case <-exited:
		return func() { stopWorld() }, fmt.Errorf("verifyd exited before it listened")
	case <-time.After(90 * time.Second):
		return stop, fmt.Errorf("verifyd did not say where it listens within 90 s")
	}
	// Wait until it is ready.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(baseURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return stop, fmt.Errorf("verifyd at %s not ready within 60 s", baseURL)
		}
	}
	return stop, nil
}

// --- operator side: verifyctl over the admin socket ---------------------

// ctl runs verifyctl with -json and returns its standard output; the test
// fails when it exits non-zero.
func ctl(t testing.TB, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(ctlBin, append([]string{"-socket", adminSock, "-json"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("verifyctl %s: %v\n%s%s", strings.Join(args, " "), err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

// account is an account made for one test.
type account struct {
	id string
}

var accountSeq atomic.Int64

// newAccount creates an account of plan with credits.
func newAccount(t testing.TB, plan string, credits int) *account {
	t.Helper()
	name := fmt.Sprintf("contract-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), accountSeq.Add(1))
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	var a struct {
		ID string `json:"id"`
	}
	out := ctl(t, "accounts", "create", "--name", name, "--plan", plan, "--credits", fmt.Sprint(credits))
	if err := json.Unmarshal(out, &a); err != nil || a.ID == "" {
		t.Fatalf("accounts create: %v: %s", err, out)
	}
	return &account{id: a.ID}
}

// mint mints a key of the account with the given scopes (both when none).
func (a *account) mint(t testing.TB, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"validate:read", "validate:write"}
	}
	var k struct {
		Key string `json:"key"`
	}
	out := ctl(t, "keys", "mint", a.id, "--scopes", strings.Join(scopes, ","))
	if err := json.Unmarshal(out, &k); err != nil || k.Key == "" {
		t.Fatalf("keys mint: %v: %s", err, out)
	}
	return k.Key
}

// webhookSecret is the account's webhook signing secret.
func (a *account) webhookSecret(t testing.TB) string {
	t.Helper()
	var s struct {
		Secret string `json:"webhook_secret"`
	}
	out := ctl(t, "webhooks", "secret", a.id)
	if err := json.Unmarshal(out, &s); err != nil || s.Secret == "" {
		t.Fatalf("webhooks secret: %v: %s", err, out)
	}
	return s.Secret
}

// --- customer side: HTTP ---------------------------------------------------

var clientSeq atomic.Int64

// nextSourceIP is a loopback address no other client of the suite uses.
func nextSourceIP() net.IP {
	n := clientSeq.Add(1) - 1
	return net.IPv4(127, 36, byte(2+n/250), byte(1+n%250))
}

// client is an HTTP client with a source address of its own and an API
// key. A test makes its own, so the per source IP rate limits of §8 that
// it spends are its own.
type client struct {
	t   testing.TB
	hc  *http.Client
	key string
	ip  net.IP
}

func newClient(t testing.TB, key string) *client {
	ip := nextSourceIP()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 16,
		DisableCompression:  true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, key: key, ip: ip, hc: &http.Client{
		Transport: tr,
		Timeout:   60 * time.Second,
		// Never follow a redirect: the first answer is the one the
		// contract is about.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// with returns a client that shares c's source address with another key.
func (c *client) with(key string) *client {
	d := *c
	d.key = key
	return &d
}

// reply is one answer.
type reply struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
}

func (r *reply) String() string {
	b := r.body
	if len(b) > 2000 {
		b = append(b[:2000:2000], "…"...)
	}
	return fmt.Sprintf("%s %s → %d %s", r.method, r.path, r.status, b)
}

// req sends a request. body nil sends none; a body is sent with
// Content-Type application/json unless hdr sets another (hdr are name,
// value pairs; a value "" removes the header).
func (c *client) req(method, path string, body []byte, hdr ...string) *reply {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	r := &reply{method: method, path: path, status: resp.StatusCode, header: resp.Header, body: b}
	// §1.5: "Format: JSON, UTF-8 for all request and response bodies,
	// except the CSV download." A declared charset must be UTF-8.
	if ct := r.header.Get("Content-Type"); ct != "" {
		if _, params, err := mime.ParseMediaType(ct); err != nil {
			c.t.Errorf("Content-Type %q does not parse: %v: %s", ct, err, r)
		} else if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			c.t.Errorf("Content-Type %q: a body in %s, not UTF-8: %s", ct, cs, r)
		}
	}
	// §1.5: "Every non-2xx response uses the error envelope of part 7."
	// Checked on every answer of every test, whatever the test expects.
	if r.status < 200 || r.status > 299 {
		if err := nonSuccessErr(r); err != nil {
			c.t.Errorf("a non-2xx answer breaks §1.5 and §7: %v: %s", err, r)
		}
	}
	return r
}

// nonSuccessErr checks a non-2xx answer: the envelope, a code of §2.3's
// enumeration, and the status §7 gives that code.
func nonSuccessErr(r *reply) error {
	if err := envelopeShape(r, ""); err != nil {
		return err
	}
	m, _ := decodeObject(r.body)
	code := m["error"].(map[string]any)["code"].(string)
	if statusOf[code] != r.status {
		return fmt.Errorf("code %s with status %d; §7 gives it %d", code, r.status, statusOf[code])
	}
	return nil
}

func (c *client) get(path string) *reply { c.t.Helper(); return c.req("GET", path, nil) }

func (c *client) post(path, body string, hdr ...string) *reply {
	c.t.Helper()
	return c.req("POST", path, []byte(body), hdr...)
}

// obj decodes the answer as one JSON object, numbers as json.Number.
func (r *reply) obj(t testing.TB) map[string]any {
	t.Helper()
	m, err := decodeObject(r.body)
	if err != nil {
		t.Fatalf("the answer is not one JSON object (%v): %s", err, r)
	}
	return m
}

func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("null, not an object")
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the object")
	}
	return m, nil
}

// want fails the test unless the answer has status.
func (r *reply) want(t testing.TB, status int) *reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r)
	}
	return r
}

// wantError checks §7's envelope with code and status and returns details
// (nil when absent).
func (r *reply) wantError(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	if err := r.envelopeErr(status, code); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	d, _ := r.obj(t)["error"].(map[string]any)["details"].(map[string]any)
	return d
}

// envelopeErr says what is wrong with the answer as §7's error envelope of
// code, with status.
func (r *reply) envelopeErr(status int, code string) error {
	if r.status != status {
		return fmt.Errorf("status %d, want %d (%s)", r.status, status, code)
	}
	return envelopeShape(r, code)
}

// envelopeShape checks the envelope of §2.11 and §7 whatever the status:
// {error: {code, message, details?}}, Content-Type application/json, and
// (code non-empty) the code.
func envelopeShape(r *reply, code string) error {
	// §1.5: "Format: JSON, UTF-8 for all request and response bodies,
	// except the CSV download."
	if mt := mediaType(r.header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("Content-Type %q, want application/json", r.header.Get("Content-Type"))
	}
	m, err := decodeObject(r.body)
	if err != nil {
		return fmt.Errorf("body is not a JSON object: %v", err)
	}
	// §2.11: "{error: {code: string from the error code enumeration,
	// message: string, details?: object with free-form keys}}"
	if len(m) != 1 {
		return fmt.Errorf("the envelope has members other than error")
	}
	e, ok := m["error"].(map[string]any)
	if !ok {
		return fmt.Errorf("no error object")
	}
	for k := range e {
		if k != "code" && k != "message" && k != "details" {
			return fmt.Errorf("error has a member %q the envelope does not have", k)
		}
	}
	c, ok := e["code"].(string)
	if !ok || !contains(errorCodes, c) {
		return fmt.Errorf("error.code %v is not in the enumeration %v", e["code"], errorCodes)
	}
	if code != "" && c != code {
		return fmt.Errorf("error.code %s, want %s", c, code)
	}
	if msg, ok := e["message"].(string); !ok || msg == "" {
		return fmt.Errorf("error.message %v is not a non-empty string", e["message"])
	}
	if d, ok := e["details"]; ok {
		if _, ok := d.(map[string]any); !ok {
			return fmt.Errorf("error.details %v is not an object", d)
		}
	}
	return nil
}

// mediaType is the lower-cased media type of a Content-Type value.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// waitUntil polls cond every interval until it is true or the deadline
// passes; then the test fails with what(). A poll that sends a request
// must keep under the rate limit of its class (§8: 300 a minute for the
// job resource, so no faster than every 250 ms).
func waitUntil(t testing.TB, within, every time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what())
		}
		time.Sleep(every)
	}
}
