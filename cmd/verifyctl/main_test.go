package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/server/web"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// bin is the verifyctl binary the tests run.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verifyctl-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "verifyctl")
	build := exec.Command("go", "build", "-o", bin, ".")
	// Everything is in the module cache: never reach for the network.
	build.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is an admin server on a unix socket over a real pebble.DB and
// receipt.KeySet, for the binary to talk to.
type env struct {
	t    *testing.T
	dir  string
	db   *pebble.DB
	keys *receipt.KeySet
	sock string
}

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

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(filepath.Join(dir, "db"), pebble.Options{PurgeInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ks, err := receipt.NewKeySet(receipt.NewFileStore(filepath.Join(dir, "keys")))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := web.PasswordHasher(web.Argon2Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{DB: db, Keys: ks, Logger: quiet, HashPassword: hash})
	sock := filepath.Join(socketDir(t), "admin.sock")
	if err := srv.Listen(sock); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-served
	})
	return &env{t: t, dir: dir, db: db, keys: ks, sock: sock}
}

type result struct {
	stdout, stderr string
	code           int
}

// exec runs verifyctl with args and stdin, with no socket from the
// environment.
func execCtl(t *testing.T, stdin string, environ []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(environWithout(SocketEnv), environ...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func environWithout(name string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// ctl runs verifyctl against the env's socket.
func (e *env) ctl(stdin string, args ...string) result {
	e.t.Helper()
	return execCtl(e.t, stdin, nil, append([]string{"-socket", e.sock}, args...)...)
}

// ok runs a command that must succeed and returns its stdout.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.ctl("", args...)
	if r.code != 0 {
		e.t.Fatalf("verifyctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs a command with -json and decodes its output.
func (e *env) okJSON(out any, args ...string) {
	e.t.Helper()
	s := e.ok(append([]string{"-json"}, args...)...)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		e.t.Fatalf("verifyctl -json %s: %v: %s", strings.Join(args, " "), err, s)
	}
}

// fails runs a command that must exit with code, and returns its stderr.
func (e *env) fails(code int, args ...string) string {
	e.t.Helper()
	r := e.ctl("", args...)
	if r.code != code {
		e.t.Fatalf("verifyctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if r.stderr == "" {
		e.t.Errorf("verifyctl %s: exit %d without a word on stderr", strings.Join(args, " "), code)
	}
	return r.stderr
}

func contains(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

// kvLine matches "name   value" in key-value output.
func kvValue(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s{2,}(.*)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q line in:\n%s", name, out)
	}
	return strings.TrimSpace(m[1])
}

func TestAccountsCommands(t *testing.T) {
	e := newEnv(t)
	out := e.ok("accounts", "create", "--name", "Acme Corp", "--plan", "growth", "--credits", "500")
	id := kvValue(t, out, "account")
	if !strings.HasPrefix(id, "acct_") || kvValue(t, out, "name") != "Acme Corp" || kvValue(t, out, "plan") != "growth" || kvValue(t, out, "balance") != "500" {
		t.Errorf("create:\n%s", out)
	}
	if a, err := e.db.GetAccount(t.Context(), id); err != nil || a.Name != "Acme Corp" {
		t.Errorf("stored %+v %v", a, err)
	}
	var b adminapi.Account
	e.okJSON(&b, "accounts", "create", "--plan=free", "--name=Beta")
	if b.Name != "Beta" || b.Plan != "free" || b.Balance != 0 {
		t.Errorf("create -json: %+v", b)
	}

	out = e.ok("accounts", "list")
	contains(t, "accounts list", out, "ID", "PLAN", "BALANCE", id, "Acme Corp", "growth", "500", b.ID, "Beta")
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 2 {
		t.Errorf("accounts list has %d rows, want 2:\n%s", n, out)
	}
	var l adminapi.AccountList
	e.okJSON(&l, "accounts", "list")
	if len(l.Accounts) != 2 {
		t.Errorf("accounts list -json: %+v", l)
	}

	out = e.ok("accounts", "show", id)
	if kvValue(t, out, "account") != id || kvValue(t, out, "webhook secret rotated") != "never" {
		t.Errorf("show:\n%s", out)
	}
	out = e.ok("accounts", "plan", id, "scale")
	if kvValue(t, out, "plan") != "scale" {
		t.Errorf("plan:\n%s", out)
	}
	// Global flags after the command.
	var a adminapi.Account
	e.okJSON(&a, "accounts", "show", b.ID)
	s := e.ok("accounts", "show", b.ID, "-json")
	if err := json.Unmarshal([]byte(s), &a); err != nil || a.ID != b.ID {
		t.Errorf("-json after the command: %v %s", err, s)
	}

	contains(t, "show unknown", e.fails(1, "accounts", "show", "acct_nope"), `no account "acct_nope"`, "NOT_FOUND")
	contains(t, "bad plan", e.fails(1, "accounts", "plan", id, "platinum"), "plan", "free, starter, growth, scale, enterprise")
	contains(t, "create bad plan", e.fails(1, "accounts", "create", "--name", "x", "--plan", "gold"), "plan")
	contains(t, "create without name", e.fails(2, "accounts", "create", "--plan", "free"), "--name and --plan are required", "usage:")
	contains(t, "extra argument", e.fails(2, "accounts", "show", id, "more"), `unexpected argument "more"`)
	contains(t, "missing argument", e.fails(2, "accounts", "plan", id), "too few arguments", "verifyctl accounts plan ID PLAN")
	contains(t, "no subcommand", e.fails(2, "accounts"), "accounts needs a command", "accounts create")
	contains(t, "bad subcommand", e.fails(2, "accounts", "delete", id), `unknown command "accounts" "delete"`)
	contains(t, "bad group", e.fails(2, "frobnicate"), `unknown command "frobnicate"`)
	contains(t, "bad flag", e.fails(2, "accounts", "list", "--colour"), "flag provided but not defined")
}

// TestUsersAndInvites: users add (password on stdin, never in the
// answer), list, operator on/off; accounts invite and invites.
func TestUsersAndInvites(t *testing.T) {
	e := newEnv(t)
	acct := kvValue(t, e.ok("accounts", "create", "--name", "Acme", "--plan", "free"), "account")
	r := e.ctl("correct horse battery\n", "users", "add", "ops@example.test", "--operator")
	if r.code != 0 || kvValue(t, r.stdout, "operator") != "true" || strings.Contains(r.stdout+r.stderr, "horse") {
		t.Fatalf("users add: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	u, err := e.db.UserByEmail(t.Context(), "OPS@example.test")
	if err != nil || !strings.HasPrefix(u.PasswordHash, "$argon2id$") || !u.Operator {
		t.Fatalf("stored %+v %v", u, err)
	}
	if r := e.ctl("short\n", "users", "add", "b@example.test"); r.code != 1 || !strings.Contains(r.stderr, "at least 12") {
		t.Errorf("short password: %d %s", r.code, r.stderr)
	}
	contains(t, "no password", e.fails(2, "users", "add", "b@example.test"), "read from standard input")
	if r := e.ctl("correct horse battery\n", "users", "add", "OPS@example.test"); r.code != 1 || !strings.Contains(r.stderr, "CONFLICT") {
		t.Errorf("same email: %d %s", r.code, r.stderr)
	}
	contains(t, "users list", e.ok("users", "list"), "ops@example.test", "yes")
	if out := e.ok("users", "operator", "ops@example.test", "off"); kvValue(t, out, "operator") != "false" {
		t.Errorf("operator off:\n%s", out)
	}
	contains(t, "operator bad", e.fails(2, "users", "operator", u.ID, "maybe"), "want on or off")

	r = e.ctl("", "accounts", "invite", acct, "--role", "member", "--email", "ann@example.test")
	token := kvValue(t, r.stdout, "invitation")
	if r.code != 0 || !strings.HasPrefix(token, "inv_") || !strings.Contains(r.stderr, "shown only this once") {
		t.Fatalf("invite: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	contains(t, "invites", e.ok("accounts", "invites", acct), "member", "ann@example.test", "operator")
	if strings.Contains(e.ok("accounts", "invites", acct), token) {
		t.Error("invites shows the token")
	}
	if _, _, err := e.db.RegisterWithInvite(t.Context(), "ann@example.test", u.PasswordHash, token); err != nil {
		t.Fatalf("the invitation does not work: %v", err)
	}
	contains(t, "after use", e.ok("accounts", "invites", acct), "no pending invitations")
	contains(t, "bad role", e.fails(1, "accounts", "invite", acct, "--role", "admin"), "owner or member")
}

func TestCreditsCommands(t *testing.T) {
	e := newEnv(t)
	a, err := e.db.CreateAccount(t.Context(), "Acme", storage.PlanStarter)
	if err != nil {
		t.Fatal(err)
	}
	out := e.ok("credits", "add", a.ID, "250", "--note", "invoice 7")
	if kvValue(t, out, "balance") != "250" || kvValue(t, out, "change") != "added 250" || kvValue(t, out, "ledger entry") != "#1" {
		t.Errorf("add:\n%s", out)
	}
	var c adminapi.CreditsChanged
	e.okJSON(&c, "credits", "set", "--note=reset", a.ID, "100")
	if c.Balance != 100 || c.Entry.Kind != "set" || c.Entry.Delta != -150 || c.Entry.Note != "reset" {
		t.Errorf("set -json: %+v", c)
	}
	if cr, _ := e.db.Credits(t.Context(), a.ID); cr.Balance != 100 {
		t.Errorf("stored balance %d", cr.Balance)
	}

	out = e.ok("credits", "show", a.ID)
	if kvValue(t, out, "balance") != "100" {
		t.Errorf("show:\n%s", out)
	}
	contains(t, "credits show", out, "SEQ", "KIND", "invoice 7", "reset", "-150", "+250")
	if strings.Index(out, "reset") > strings.Index(out, "invoice 7") {
		t.Errorf("ledger not newest first:\n%s", out)
	}
	for range 3 {
		e.ok("credits", "add", a.ID, "1")
	}
	out = e.ok("credits", "show", a.ID, "--limit", "2")
	contains(t, "credits show --limit 2", out, "older entries: verifyctl credits show "+a.ID+" --before 4")
	out = e.ok("credits", "show", a.ID, "--limit", "2", "--before", "4")
	contains(t, "credits show --before 4", out, "reset", "--before 2")
	out = e.ok("credits", "show", a.ID, "--before", "2")
	contains(t, "credits show --before 2", out, "invoice 7")
	if strings.Contains(out, "older entries") {
		t.Errorf("the oldest page offers older entries:\n%s", out)
	}
	var l adminapi.Ledger
	e.okJSON(&l, "credits", "show", a.ID)
	if len(l.Entries) != 5 || l.Entries[0].Seq != 5 || l.Balance != 103 {
		t.Errorf("show -json: %+v", l)
	}

	contains(t, "not a number", e.fails(2, "credits", "add", a.ID, "lots"), `"lots" is not a whole number`)
	contains(t, "zero", e.fails(1, "credits", "add", a.ID, "0"), "add", "must be positive")
	contains(t, "unknown account", e.fails(1, "credits", "set", "acct_nope", "5"), "no account")
	e.fails(2, "credits", "show", a.ID, "--limit", "0")
	e.fails(1, "credits", "show", "acct_nope")
}

func TestKeysCommands(t *testing.T) {
	e := newEnv(t)
	a, err := e.db.CreateAccount(t.Context(), "Acme", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	r := e.ctl("", "keys", "mint", a.ID, "--label", "production")
	if r.code != 0 {
		t.Fatalf("mint: %d %s", r.code, r.stderr)
	}
	contains(t, "mint warning", r.stderr, "shown only this once")
	token := kvValue(t, r.stdout, "key")
	prefix := kvValue(t, r.stdout, "prefix")
	if kvValue(t, r.stdout, "scopes") != "validate:read,validate:write" || kvValue(t, r.stdout, "label") != "production" {
		t.Errorf("mint:\n%s", r.stdout)
	}
	k, err := e.db.VerifyKey(t.Context(), token)
	if err != nil || k.Prefix != prefix || !k.HasScope(storage.ScopeValidateWrite) || !k.HasScope(storage.ScopeValidateRead) {
		t.Fatalf("VerifyKey of the printed key: %+v %v", k, err)
	}

	var ro adminapi.MintedKey
	e.okJSON(&ro, "keys", "mint", "--scopes", "validate:read", a.ID)
	if k, err := e.db.VerifyKey(t.Context(), ro.Token); err != nil || k.HasScope(storage.ScopeValidateWrite) {
		t.Errorf("read-only key: %+v %v", k, err)
	}

	out := e.ok("keys", "list", a.ID)
	contains(t, "keys list", out, "PREFIX", prefix, ro.Prefix, "production", "active", "validate:read,validate:write")
	if strings.Contains(out, token) || strings.Contains(out, ro.Token) || strings.Contains(out, "svc_live_") {
		t.Errorf("keys list shows a key:\n%s", out)
	}

	out = e.ok("keys", "revoke", prefix)
	contains(t, "revoke", out, "revoked key "+prefix, a.ID)
	if _, err := e.db.VerifyKey(t.Context(), token); !errors.Is(err, storage.ErrKeyRevoked) {
		t.Errorf("VerifyKey after revoke: %v", err)
	}
	contains(t, "revoke twice", e.fails(1, "keys", "revoke", prefix), "already revoked", "CONFLICT")
	// A pasted whole key revokes it, and only the prefix travels.
	var rk adminapi.Key
	e.okJSON(&rk, "keys", "revoke", ro.Token)
	if !rk.Revoked || rk.Prefix != ro.Prefix {
		t.Errorf("revoke by whole key: %+v", rk)
	}
	if _, err := e.db.VerifyKey(t.Context(), ro.Token); !errors.Is(err, storage.ErrKeyRevoked) {
		t.Errorf("VerifyKey after revoke by whole key: %v", err)
	}
	out = e.ok("keys", "list", a.ID)
	if strings.Count(out, "revoked") != 2 {
		t.Errorf("keys list after revoking both:\n%s", out)
	}

	contains(t, "bad scope", e.fails(1, "keys", "mint", a.ID, "--scopes", "validate:read,admin"), "scopes[1]", `"admin"`)
	contains(t, "unknown prefix", e.fails(1, "keys", "revoke", "zzzzzzzzzzzz"), "no key")
	contains(t, "unknown account", e.fails(1, "keys", "list", "acct_nope"), "no account")
	e.fails(2, "keys", "mint")
	if ks, _ := e.db.ListKeys(t.Context(), a.ID); len(ks) != 2 {
		t.Errorf("%d keys, want 2", len(ks))
	}
	out = e.ok("keys", "list", "-json", a.ID)
	if strings.Contains(out, "svc_live_") || strings.Contains(out, "hash") {
		t.Errorf("keys list -json shows secrets: %s", out)
	}
}

func TestWebhooksCommands(t *testing.T) {
	e := newEnv(t)
	a, err := e.db.CreateAccount(t.Context(), "Acme", storage.PlanGrowth)
	if err != nil {
		t.Fatal(err)
	}
	out := e.ok("webhooks", "secret", a.ID)
	if kvValue(t, out, "secret") != a.WebhookSecret || kvValue(t, out, "rotated") != "never" {
		t.Errorf("secret:\n%s", out)
	}
	r := e.ctl("", "webhooks", "rotate-secret", a.ID)
	if r.code != 0 {
		t.Fatalf("rotate-secret: %d %s", r.code, r.stderr)
	}
	stored, _ := e.db.GetAccount(t.Context(), a.ID)
	if got := kvValue(t, r.stdout, "secret"); got != stored.WebhookSecret || got == a.WebhookSecret {
		t.Errorf("rotate-secret printed %q; stored %q, old %q", got, stored.WebhookSecret, a.WebhookSecret)
	}
	var s adminapi.WebhookSecret
	e.okJSON(&s, "webhooks", "secret", a.ID)
	if s.Secret != stored.WebhookSecret || s.RotatedAt.IsZero() {
		t.Errorf("secret -json: %+v", s)
	}
	e.fails(1, "webhooks", "secret", "acct_nope")
	e.fails(1, "webhooks", "rotate-secret", "acct_nope")
}

func TestSigningKeysCommands(t *testing.T) {
	e := newEnv(t)
	out := e.ok("signing-keys", "list")
	contains(t, "list", out, "KID", "v1", "active", "Ed25519")
	out = e.ok("signing-keys", "rotate")
	contains(t, "rotate", out, "signed with v2", "v1 is retired")
	if e.keys.ActiveKid() != "v2" {
		t.Errorf("active kid %s", e.keys.ActiveKid())
	}
	out = e.ok("signing-keys", "list")
	if !regexp.MustCompile(`(?m)^v2\s+active`).MatchString(out) || !regexp.MustCompile(`(?m)^v1\s+retired`).MatchString(out) {
		t.Errorf("list after rotation:\n%s", out)
	}
	var r adminapi.SigningKeyRotated
	e.okJSON(&r, "signing-keys", "rotate")
	if r.Kid != "v3" || r.Previous != "v2" {
		t.Errorf("rotate -json %+v", r)
	}
	// -json list is a JWKS.
	raw := e.ok("-json", "signing-keys", "list")
	pub, err := receipt.ParseJWKS([]byte(raw))
	if err != nil || len(pub.Kids()) != 3 {
		t.Errorf("list -json is not the JWKS: %v %s", err, raw)
	}
}

func TestReceiptVerify(t *testing.T) {
	e := newEnv(t)
	signed, err := e.keys.Sign([]byte(`{"email":"jane@example.com","status":"valid","score":97,"checks":{"mx":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(signed, []byte(`"score":97`), []byte(`"score":98`), 1)
	if bytes.Equal(tampered, signed) {
		t.Fatal("tampering changed nothing")
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", signed)
	bad := write("bad.json", tampered)
	jwksFile := write("jwks.json", e.keys.JWKS())

	// Key set from the admin socket, receipt on stdin.
	r := e.ctl(string(signed), "receipt", "verify")
	if r.code != 0 || r.stdout != "ok: signed by kid v1\n" {
		t.Errorf("verify stdin: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = e.ctl(string(tampered), "receipt", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, "receipt does not verify: signature does not verify") {
		t.Errorf("verify tampered: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// From a file argument, and "-".
	if out := e.ok("receipt", "verify", good); out != "ok: signed by kid v1\n" {
		t.Errorf("verify FILE: %q", out)
	}
	if r := e.ctl(string(signed), "receipt", "verify", "-"); r.code != 0 {
		t.Errorf("verify -: %d %s", r.code, r.stderr)
	}
	e.fails(1, "receipt", "verify", bad)

	// Key set from --jwks FILE: no socket needed at all.
	noSocket := []string{"-socket", filepath.Join(dir, "none.sock")}
	r = execCtl(t, "", nil, append(noSocket, "receipt", "verify", "--jwks", jwksFile, good)...)
	if r.code != 0 || r.stdout != "ok: signed by kid v1\n" {
		t.Errorf("verify --jwks: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = execCtl(t, string(tampered), nil, append(noSocket, "receipt", "verify", "--jwks", jwksFile)...)
	if r.code != 1 {
		t.Errorf("verify --jwks tampered: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// Key set from --url, a public API on 127.0.0.1.
	var hits []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hits = append(hits, req.URL.Path)
		if req.URL.Path != jwksPath {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(e.keys.JWKS())
	}))
	defer api.Close()
	for _, u := range []string{api.URL + jwksPath, api.URL, api.URL + "/"} {
		r = execCtl(t, "", nil, append(noSocket, "receipt", "verify", "--url", u, good)...)
		if r.code != 0 || r.stdout != "ok: signed by kid v1\n" {
			t.Errorf("verify --url %s: %d %q %q", u, r.code, r.stdout, r.stderr)
		}
	}
	r = execCtl(t, "", nil, append(noSocket, "receipt", "verify", "--url", api.URL+"/elsewhere", good)...)
	if r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("verify --url of a 404: %d %q", r.code, r.stderr)
	}
	if len(hits) != 4 {
		t.Errorf("the API saw %v", hits)
	}

	// Unknown kid: a key set of another verifyd.
	other, err := receipt.NewKeySet(receipt.NewFileStore(filepath.Join(dir, "other")))
	if err != nil {
		t.Fatal(err)
	}
	other.Rotate()
	otherSigned, err := other.Sign([]byte(`{"email":"x@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	r = e.ctl(string(otherSigned), "receipt", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown kid "v2"`) {
		t.Errorf("verify unknown kid: %d %q", r.code, r.stderr)
	}
	// The other set's v1 is not ours either: a signature by another key.
	otherV1 := write("other-jwks.json", other.JWKS())
	r = e.ctl(string(signed), "receipt", "verify", "--jwks", otherV1)
	if r.code != 1 || !strings.Contains(r.stderr, "does not verify") {
		t.Errorf("verify with another set's v1: %d %q", r.code, r.stderr)
	}

	// -json, both ways.
	var res verifyResult
	r = e.ctl(string(signed), "-json", "receipt", "verify")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || !res.OK || res.Kid != "v1" || !strings.Contains(res.Keys, e.sock) {
		t.Errorf("verify -json: %d %+v %v", r.code, res, err)
	}
	r = e.ctl(string(tampered), "-json", "receipt", "verify")
	res = verifyResult{}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 || res.OK || res.Error == "" {
		t.Errorf("verify -json tampered: %d %+v %v", r.code, res, err)
	}

	// After a rotation old receipts still verify, new ones carry the new kid.
	e.ok("signing-keys", "rotate")
	if out := e.ok("receipt", "verify", good); out != "ok: signed by kid v1\n" {
		t.Errorf("old receipt after rotation: %q", out)
	}
	newer, err := e.keys.Sign([]byte(`{"email":"b@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	if out := e.ok("receipt", "verify", write("new.json", newer)); out != "ok: signed by kid v2\n" {
		t.Errorf("new receipt: %q", out)
	}

	// Malformed input, bad key sets, usage.
	r = e.ctl("not json", "receipt", "verify")
	if r.code != 1 || !strings.Contains(r.stderr, "malformed") {
		t.Errorf("verify garbage: %d %q", r.code, r.stderr)
	}
	r = e.ctl("", "receipt", "verify", "--jwks", write("empty.json", []byte(`{"keys":[]}`)), good)
	if r.code != 1 || !strings.Contains(r.stderr, "not usable") {
		t.Errorf("verify with an empty key set: %d %q", r.code, r.stderr)
	}
	e.fails(1, "receipt", "verify", filepath.Join(dir, "missing.json"))
	e.fails(2, "receipt", "verify", "--jwks", jwksFile, "--url", api.URL, good)
	e.fails(2, "receipt", "verify", "--url", "ftp://example.com/jwks.json", good)
	e.fails(2, "receipt", "verify", good, "extra")
}

func TestSocketDiscovery(t *testing.T) {
	e := newEnv(t)
	// $VERIFYD_ADMIN_SOCKET.
	r := execCtl(t, "", []string{SocketEnv + "=" + e.sock}, "accounts", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "no accounts") {
		t.Errorf("socket from the environment: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// admin.socket of -config.
	cfg := filepath.Join(e.dir, "verifyd.toml")
	text := fmt.Sprintf("data_dir = %q\n\n[admin]\nsocket = %q\n", e.dir, e.sock)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r = execCtl(t, "", nil, "-config", cfg, "accounts", "list")
	if r.code != 0 {
		t.Errorf("socket from -config: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// -socket wins over the environment.
	r = execCtl(t, "", []string{SocketEnv + "=/nonexistent/admin.sock"}, "-socket", e.sock, "accounts", "list")
	if r.code != 0 {
		t.Errorf("-socket over the environment: %d %q", r.code, r.stderr)
	}
	// Nobody there: exit 1, saying which socket and where it came from.
	r = execCtl(t, "", []string{SocketEnv + "=" + filepath.Join(e.dir, "gone.sock")}, "accounts", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "gone.sock") || !strings.Contains(r.stderr, "$"+SocketEnv) {
		t.Errorf("unreachable socket: %d %q", r.code, r.stderr)
	}
	// A broken configuration.
	bad := filepath.Join(e.dir, "bad.toml")
	os.WriteFile(bad, []byte("colour = \"red\"\n"), 0o644)
	r = execCtl(t, "", nil, "-config", bad, "accounts", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "colour") {
		t.Errorf("bad config: %d %q", r.code, r.stderr)
	}
}

func TestUsage(t *testing.T) {
	r := execCtl(t, "", nil)
	if r.code != 2 || !strings.Contains(r.stderr, "usage: verifyctl") {
		t.Errorf("no arguments: %d %q", r.code, r.stderr)
	}
	r = execCtl(t, "", nil, "help")
	if r.code != 0 {
		t.Errorf("help: %d", r.code)
	}
	for _, cmd := range commands {
		if !strings.Contains(r.stdout, cmd.usageLine()) {
			t.Errorf("help lacks %q", cmd.usageLine())
		}
	}
	r = execCtl(t, "", nil, "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "keys mint") {
		t.Errorf("-h: %d %q", r.code, r.stderr)
	}
	r = execCtl(t, "", nil, "keys", "mint", "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "usage: verifyctl keys mint ID") || !strings.Contains(r.stderr, "-scopes") || strings.Contains(r.stderr, "-socket") {
		t.Errorf("keys mint -h: %d %q", r.code, r.stderr)
	}
	r = execCtl(t, "", nil, "-bogus")
	if r.code != 2 {
		t.Errorf("unknown global flag: %d", r.code)
	}
}

func TestKeyPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"abcdefghij12":                       "abcdefghij12",
		"svc_live_abcdefghij12":              "abcdefghij12",
		"svc_live_abcdefghij12_SeCrEt0123":   "abcdefghij12",
		" svc_live_abcdefghij12_SeCrEt0123 ": "abcdefghij12",
	} {
		if got := keyPrefix(in); got != want {
			t.Errorf("keyPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
