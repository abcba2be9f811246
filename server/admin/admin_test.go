package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
	"github.com/verifyd/verifyd/storage"
)

// quiet is Options for a Server that only listens.
var quiet = Options{Logger: slog.New(slog.DiscardHandler)}

func TestSocket(t *testing.T) {
	e := newEnv(t)
	fi, err := os.Lstat(e.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(e.sock))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("created socket directory mode %v, want 0700", di.Mode().Perm())
	}
	leftovers, _ := os.ReadDir(filepath.Dir(e.sock))
	if len(leftovers) != 1 {
		t.Errorf("socket directory holds %d entries, want the socket alone: %v", len(leftovers), leftovers)
	}

	// A second server on the same path finds it in use.
	other := New(quiet)
	if err := other.Listen(e.sock); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Listen on a live socket: %v, want in use", err)
	}
	// And the first still answers.
	e.ok("GET", "/v1/accounts", "", 200, nil)
}

func TestSocketStaleAndShutdown(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "admin.sock")

	// A socket left by a process that died: bound, never unlinked.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatal("no stale socket to test with")
	}
	s := New(quiet)
	if err := s.Listen(sock); err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket after replacing a stale one: %v %v", fi, err)
	}
	if err := s.Listen(sock); err == nil {
		t.Error("second Listen of one Server succeeded")
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	c := unixClient(sock)
	resp, err := c.Get("http://admin/v1/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after Shutdown: %v", err)
	}
	if err := New(quiet).Serve(); err == nil {
		t.Error("Serve before Listen succeeded")
	}
}

func TestSocketRefusals(t *testing.T) {
	dir := socketDir(t)
	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := New(quiet).Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Error("Listen changed a regular file")
	}
	long := filepath.Join(dir, strings.Repeat("x", 110))
	if err := New(quiet).Listen(long); err == nil || !strings.Contains(err.Error(), "over the 107") {
		t.Errorf("Listen on a too long path: %v", err)
	}
	if err := New(quiet).Listen(""); err == nil {
		t.Error("Listen on an empty path succeeded")
	}
}

// TestSocketLongTempName binds in a directory so deep that the private
// temporary name would not fit in sun_path: the socket is bound in place
// and chmod-ed.
func TestSocketLongTempName(t *testing.T) {
	base := socketDir(t)
	dir := filepath.Join(base, strings.Repeat("d", 100-len(base)-1))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	if len(sock) != MaxSocketPath {
		t.Fatalf("path of %d bytes", len(sock))
	}
	s := New(quiet)
	if err := s.Listen(sock); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v, want the socket alone", ents)
	}
}

func TestAccounts(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("  Acme Corp  ", "growth", 500)
	if !strings.HasPrefix(a.ID, "acct_") || a.Name != "Acme Corp" || a.Plan != "growth" || a.Balance != 500 || a.CreatedAt.IsZero() {
		t.Errorf("created %+v", a)
	}
	es, err := e.db.Ledger(t.Context(), a.ID, 0, 0)
	if err != nil || len(es) != 1 || es[0].Kind != storage.EntryAdd || es[0].Amount != 500 || es[0].Note != "initial credits" {
		t.Errorf("ledger after create: %+v %v", es, err)
	}
	b := e.createAccount("Zero", "free", 0)
	if b.Balance != 0 {
		t.Errorf("balance %d", b.Balance)
	}
	if es, _ := e.db.Ledger(t.Context(), b.ID, 0, 0); len(es) != 0 {
		t.Errorf("an account without credits has ledger entries: %+v", es)
	}

	var got adminapi.Account
	raw := e.ok("GET", "/v1/accounts/"+a.ID, "", 200, &got)
	if got != a {
		t.Errorf("GET %+v, want %+v", got, a)
	}
	if strings.Contains(string(raw), "whsec_") || strings.Contains(string(raw), "webhook_secret\"") {
		t.Errorf("account view shows the webhook secret: %s", raw)
	}

	var list adminapi.AccountList
	e.ok("GET", "/v1/accounts", "", 200, &list)
	ids := []string{}
	for _, x := range list.Accounts {
		ids = append(ids, x.ID)
	}
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("list %v, want %v", ids, want)
	}

	e.ok("POST", "/v1/accounts/"+a.ID+"/plan", `{"plan":"enterprise"}`, 200, &got)
	if got.Plan != "enterprise" {
		t.Errorf("plan %q", got.Plan)
	}
	if st, _ := e.db.GetAccount(t.Context(), a.ID); st.Plan != storage.PlanEnterprise {
		t.Errorf("stored plan %q", st.Plan)
	}

	// Errors.
	e.fail("GET", "/v1/accounts/acct_nope", "", 404, "NOT_FOUND")
	e.fail("POST", "/v1/accounts/acct_nope/plan", `{"plan":"free"}`, 404, "NOT_FOUND")
	er := e.fail("POST", "/v1/accounts/"+a.ID+"/plan", `{"plan":"platinum"}`, 400, "BAD_REQUEST")
	if !slices.Equal(issuePaths(er), []string{"plan"}) || !strings.Contains(er.Message, "free, starter, growth, scale, enterprise") {
		t.Errorf("bad plan: %+v", er)
	}
	er = e.fail("POST", "/v1/accounts", `{"name":" ","plan":"gold","credits":-1}`, 400, "BAD_REQUEST")
	if p := issuePaths(er); !slices.Equal(p, []string{"name", "plan", "credits"}) {
		t.Errorf("issues %v, want every problem", p)
	}
	e.fail("POST", "/v1/accounts", `{"plan":"free"}`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", `{"name":"x"}`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", fmt.Sprintf(`{"name":%q,"plan":"free"}`, strings.Repeat("n", 201)), 400, "BAD_REQUEST")
	e.createAccount(strings.Repeat("n", 200), "free", 0)
	e.fail("POST", "/v1/accounts", `{"name":"a\u0007b","plan":"free"}`, 400, "BAD_REQUEST")
	er = e.fail("POST", "/v1/accounts", `{"name":"x","plan":"free","colour":"red"}`, 400, "BAD_REQUEST")
	if p := issuePaths(er); !slices.Equal(p, []string{"colour"}) {
		t.Errorf("unknown member: issues %v", p)
	}
	er = e.fail("POST", "/v1/accounts", `{"name":"x","plan":"free","credits":1.5}`, 400, "BAD_REQUEST")
	if p := issuePaths(er); !slices.Equal(p, []string{"credits"}) {
		t.Errorf("fractional credits: issues %v", p)
	}
	e.fail("POST", "/v1/accounts", `{"name":"x","plan":"free","credits":"5"}`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", `{"name":"x","plan":"free"} {}`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", `{"name":"x",`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", `["x"]`, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", ``, 400, "BAD_REQUEST")
	e.fail("POST", "/v1/accounts", `{"name":"x","plan":"free","credits":1000000000001}`, 400, "BAD_REQUEST")
	if all, _ := e.db.ListAccounts(t.Context()); len(all) != 3 {
		t.Errorf("%d accounts after the failed creations, want 3", len(all))
	}
}

func TestCredits(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "starter", 100)
	path := "/v1/accounts/" + a.ID + "/credits"

	var c adminapi.CreditsChanged
	e.ok("POST", path, `{"add":50,"note":"top-up"}`, 200, &c)
	if c.Account != a.ID || c.Balance != 150 || c.Entry.Kind != "add" || c.Entry.Amount != 50 || c.Entry.Delta != 50 || c.Entry.Note != "top-up" || c.Entry.Seq != 2 {
		t.Errorf("add: %+v", c)
	}
	e.ok("POST", path, `{"set":20}`, 200, &c)
	if c.Balance != 20 || c.Entry.Kind != "set" || c.Entry.Delta != -130 || c.Entry.Seq != 3 {
		t.Errorf("set: %+v", c)
	}
	e.ok("POST", path, `{"set":0,"note":"zeroed"}`, 200, &c)
	if c.Balance != 0 {
		t.Errorf("set 0: %+v", c)
	}
	if cr, _ := e.db.Credits(t.Context(), a.ID); cr.Balance != 0 {
		t.Errorf("stored balance %d", cr.Balance)
	}

	for _, body := range []string{`{}`, `{"note":"x"}`, `{"add":1,"set":1}`, `{"add":0}`, `{"add":-5}`,
		`{"set":-1}`, `{"add":1,"note":"` + strings.Repeat("n", 201) + `"}`, `{"add":"1"}`, `{"add":1e3}`} {
		e.fail("POST", path, body, 400, "BAD_REQUEST")
	}
	e.fail("POST", "/v1/accounts/acct_nope/credits", `{"add":1}`, 404, "NOT_FOUND")

	// Set below what validations in flight hold.
	h, err := e.db.AddCredits(t.Context(), a.ID, 10, "")
	if err != nil || h.Balance != 10 {
		t.Fatal(err)
	}
	hold, err := e.db.Hold(t.Context(), a.ID, 3, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	er := e.fail("POST", path, `{"set":2}`, 400, "BAD_REQUEST")
	if !strings.Contains(er.Message, "held") || strings.Contains(er.Message, "storage:") {
		t.Errorf("set below held: %q", er.Message)
	}
	var acc adminapi.Account
	e.ok("GET", "/v1/accounts/"+a.ID, "", 200, &acc)
	if acc.Balance != 10 || acc.Held != 3 {
		t.Errorf("account credits %d held %d", acc.Balance, acc.Held)
	}
	if _, err := e.db.Release(t.Context(), hold, "test"); err != nil {
		t.Fatal(err)
	}
}

func TestLedger(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "free", 0)
	path := "/v1/accounts/" + a.ID + "/ledger"

	var l adminapi.Ledger
	raw := e.ok("GET", path, "", 200, &l)
	if l.Account != a.ID || len(l.Entries) != 0 || l.NextBefore != nil || !strings.Contains(string(raw), `"entries":[]`) {
		t.Errorf("empty ledger: %s", raw)
	}
	const n = 45
	for i := 1; i <= n; i++ {
		if _, err := e.db.AddCredits(t.Context(), a.ID, int64(i), fmt.Sprint("n", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.ok("GET", path, "", 200, &l)
	if len(l.Entries) != DefaultLedgerLimit || l.Entries[0].Seq != n || l.Balance != n*(n+1)/2 {
		t.Fatalf("default page: %d entries, first %+v, balance %d", len(l.Entries), l.Entries[0], l.Balance)
	}

	// Walk every page of 7: each entry once, newest first.
	var seqs []uint64
	before := uint64(0)
	for pages := 0; ; pages++ {
		q := path + "?limit=7"
		if before > 0 {
			q += fmt.Sprint("&before=", before)
		}
		e.ok("GET", q, "", 200, &l)
		for _, en := range l.Entries {
			seqs = append(seqs, en.Seq)
			if en.Note != fmt.Sprint("n", en.Seq) || en.Kind != "add" {
				t.Errorf("entry %+v", en)
			}
		}
		if l.NextBefore == nil {
			break
		}
		before = *l.NextBefore
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	if len(seqs) != n {
		t.Fatalf("paging returned %d entries, want %d: %v", len(seqs), n, seqs)
	}
	for i, s := range seqs {
		if s != uint64(n-i) {
			t.Fatalf("seqs %v not newest first without gaps", seqs)
		}
	}
	e.ok("GET", path+"?before=3&limit=10", "", 200, &l)
	if len(l.Entries) != 2 || l.Entries[0].Seq != 2 || l.Entries[1].Seq != 1 || l.NextBefore != nil {
		t.Errorf("before=3: %+v", l)
	}
	e.ok("GET", path+"?before=1", "", 200, &l)
	if len(l.Entries) != 0 {
		t.Errorf("before=1: %+v", l)
	}
	e.ok("GET", path+"?before=1000", "", 200, &l)
	if len(l.Entries) != DefaultLedgerLimit || l.Entries[0].Seq != n {
		t.Errorf("before beyond the end: %+v", l.Entries[0])
	}

	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?before=0", "?before=-1"} {
		e.fail("GET", path+q, "", 400, "BAD_REQUEST")
	}
	e.fail("GET", "/v1/accounts/acct_nope/ledger", "", 404, "NOT_FOUND")
}

func TestLastLedgerSeq(t *testing.T) {
	e := newEnv(t)
	a, err := e.db.CreateAccount(t.Context(), "x", storage.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	added := 0
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100} {
		for ; added < n; added++ {
			if _, err := e.db.AddCredits(t.Context(), a.ID, 1, ""); err != nil {
				t.Fatal(err)
			}
		}
		got, err := lastLedgerSeq(t.Context(), e.db, a.ID)
		if err != nil || got != uint64(n) {
			t.Errorf("lastLedgerSeq with %d entries: %d %v", n, got, err)
		}
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "growth", 0)
	other := e.createAccount("Other", "free", 0)
	path := "/v1/accounts/" + a.ID + "/keys"

	var m adminapi.MintedKey
	e.ok("POST", path, `{"scopes":["validate:write","validate:read"],"label":"prod"}`, 201, &m)
	if m.Account != a.ID || m.Label != "prod" || !slices.Equal(m.Scopes, []string{"validate:read", "validate:write"}) || m.Revoked {
		t.Errorf("minted %+v", m)
	}
	if !strings.HasPrefix(m.Token, "svc_live_"+m.Prefix+"_") {
		t.Errorf("token %q does not carry prefix %q", m.Token, m.Prefix)
	}
	k, err := e.db.VerifyKey(t.Context(), m.Token)
	if err != nil || k.Prefix != m.Prefix || k.Account != a.ID || !k.HasScope(storage.ScopeValidateWrite) {
		t.Fatalf("VerifyKey of the minted key: %+v %v", k, err)
	}
	var ro adminapi.MintedKey
	e.ok("POST", path, `{"scopes":["validate:read"]}`, 201, &ro)
	if k, err := e.db.VerifyKey(t.Context(), ro.Token); err != nil || k.HasScope(storage.ScopeValidateWrite) {
		t.Errorf("read-only key: %+v %v", k, err)
	}

	var list adminapi.KeyList
	raw := e.ok("GET", path, "", 200, &list)
	if len(list.Keys) != 2 || list.Keys[0].Prefix != m.Prefix || list.Keys[1].Prefix != ro.Prefix {
		t.Errorf("list %+v", list)
	}
	for _, secret := range []string{m.Token, ro.Token, m.Token[len(m.Token)-20:], `"hash"`, `"key"`} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("key list shows %q: %s", secret, raw)
		}
	}
	raw = e.ok("GET", "/v1/accounts/"+other.ID+"/keys", "", 200, &list)
	if len(list.Keys) != 0 || !strings.Contains(string(raw), `"keys":[]`) {
		t.Errorf("other account's keys: %s", raw)
	}

	var rk adminapi.Key
	e.ok("POST", "/v1/keys/"+m.Prefix+"/revoke", "", 200, &rk)
	if !rk.Revoked || rk.RevokedAt.IsZero() || rk.Prefix != m.Prefix {
		t.Errorf("revoked %+v", rk)
	}
	if _, err := e.db.VerifyKey(t.Context(), m.Token); !errors.Is(err, storage.ErrKeyRevoked) {
		t.Errorf("VerifyKey after revoke: %v", err)
	}
	if _, err := e.db.VerifyKey(t.Context(), ro.Token); err != nil {
		t.Errorf("the other key stopped working: %v", err)
	}
	er := e.fail("POST", "/v1/keys/"+m.Prefix+"/revoke", "", 409, "CONFLICT")
	if !strings.Contains(er.Message, "already revoked") || er.Details["revokedAt"] == nil {
		t.Errorf("revoke twice: %+v", er)
	}
	e.ok("GET", path, "", 200, &list)
	if !list.Keys[0].Revoked || list.Keys[1].Revoked {
		t.Errorf("list after revoke %+v", list.Keys)
	}

	e.fail("POST", "/v1/keys/aaaaaaaaaaaa/revoke", "", 404, "NOT_FOUND")
	er = e.fail("POST", "/v1/keys/"+ro.Token+"/revoke", "", 400, "BAD_REQUEST")
	if strings.Contains(er.Message, ro.Token) {
		t.Error("the error echoes a pasted key")
	}
	e.fail("POST", "/v1/keys/ABCDEFGHIJKL/revoke", "", 400, "BAD_REQUEST")

	for _, body := range []string{`{}`, `{"scopes":[]}`, `{"scopes":["admin"]}`, `{"scopes":"validate:read"}`,
		`{"scopes":["validate:read","validate:delete"]}`, `{"scopes":["validate:read"],"label":"` + strings.Repeat("l", 201) + `"}`} {
		e.fail("POST", path, body, 400, "BAD_REQUEST")
	}
	er = e.fail("POST", path, `{"scopes":["validate:read","nope"]}`, 400, "BAD_REQUEST")
	if p := issuePaths(er); !slices.Equal(p, []string{"scopes[1]"}) {
		t.Errorf("bad scope issues %v", p)
	}
	e.fail("POST", "/v1/accounts/acct_nope/keys", `{"scopes":["validate:read"]}`, 404, "NOT_FOUND")
	e.fail("GET", "/v1/accounts/acct_nope/keys", "", 404, "NOT_FOUND")
	if ks, _ := e.db.ListKeys(t.Context(), a.ID); len(ks) != 2 {
		t.Errorf("%d keys after the failed mints, want 2", len(ks))
	}
}

func TestWebhookSecret(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "growth", 0)
	path := "/v1/accounts/" + a.ID + "/webhook-secret"

	var s1 adminapi.WebhookSecret
	e.ok("GET", path, "", 200, &s1)
	stored, _ := e.db.GetAccount(t.Context(), a.ID)
	if s1.Account != a.ID || s1.Secret != stored.WebhookSecret || !strings.HasPrefix(s1.Secret, "whsec_") || !s1.RotatedAt.IsZero() {
		t.Errorf("secret %+v", s1)
	}
	var s2 adminapi.WebhookSecret
	e.ok("POST", path+"/rotate", "", 200, &s2)
	stored, _ = e.db.GetAccount(t.Context(), a.ID)
	if s2.Secret == s1.Secret || s2.Secret != stored.WebhookSecret || s2.RotatedAt.IsZero() {
		t.Errorf("rotated %+v, before %+v", s2, s1)
	}
	var acc adminapi.Account
	e.ok("GET", "/v1/accounts/"+a.ID, "", 200, &acc)
	if !acc.WebhookSecretRotatedAt.Equal(s2.RotatedAt) {
		t.Errorf("account rotated_at %v, want %v", acc.WebhookSecretRotatedAt, s2.RotatedAt)
	}
	e.fail("GET", "/v1/accounts/acct_nope/webhook-secret", "", 404, "NOT_FOUND")
	e.fail("POST", "/v1/accounts/acct_nope/webhook-secret/rotate", "", 404, "NOT_FOUND")
}

func TestSigningKeys(t *testing.T) {
	e := newEnv(t)
	r1, err := e.keys.Sign([]byte(`{"email":"a@example.com","status":"valid","score":97}`))
	if err != nil {
		t.Fatal(err)
	}

	var set adminapi.SigningKeys
	raw := e.ok("GET", "/v1/signing-keys", "", 200, &set)
	if set.Active != "v1" || len(set.Keys) != 1 {
		t.Errorf("key set %s", raw)
	}
	if kid, err := receipt.Verify(r1, raw); err != nil || kid != "v1" {
		t.Errorf("Verify with the admin key set: %q %v", kid, err)
	}

	var rot adminapi.SigningKeyRotated
	e.ok("POST", "/v1/signing-keys/rotate", "", 200, &rot)
	if rot.Kid != "v2" || rot.Previous != "v1" || e.keys.ActiveKid() != "v2" {
		t.Errorf("rotated %+v, active %s", rot, e.keys.ActiveKid())
	}
	r2, err := e.keys.Sign([]byte(`{"email":"b@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw = e.ok("GET", "/v1/signing-keys", "", 200, &set)
	if set.Active != "v2" || len(set.Keys) != 2 {
		t.Errorf("key set after rotation %s", raw)
	}
	for want, r := range map[string][]byte{"v1": r1, "v2": r2} {
		if kid, err := receipt.Verify(r, raw); err != nil || kid != want {
			t.Errorf("Verify %s receipt: %q %v", want, kid, err)
		}
	}
	if strings.Contains(string(raw), `"d"`) || strings.Contains(string(raw), "seed") {
		t.Errorf("the key set shows private keys: %s", raw)
	}
}

func TestEnvelope(t *testing.T) {
	e := newEnv(t)
	e.fail("GET", "/v1/nothing", "", 404, "NOT_FOUND")
	e.fail("GET", "/", "", 404, "NOT_FOUND")
	e.fail("DELETE", "/v1/accounts", "", 400, "BAD_REQUEST")
	e.fail("GET", "/v1/signing-keys/rotate", "", 400, "BAD_REQUEST")

	// A body over the limit is refused from its Content-Length, before it
	// is sent (a client still writing it could see the connection close
	// first, so this one sends only the head).
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/accounts HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", MaxBodyBytes+1)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env adminapi.Envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != 400 || env.Error == nil ||
		env.Error.Code != adminapi.CodeBadRequest || !strings.Contains(env.Error.Message, "exceeds") {
		t.Errorf("oversized body: %d %+v %v", resp.StatusCode, env.Error, err)
	}
}

func TestExtraRoutes(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Extra = func(r *router.Router) {
			r.POST("/v1/egress/echo", JSON(func(ctx *fasthttp.RequestCtx) (any, error) {
				var req struct {
					N int `json:"n"`
				}
				if err := DecodeJSON(ctx, &req); err != nil {
					return nil, err
				}
				if req.N < 0 {
					return nil, fmt.Errorf("boom")
				}
				return map[string]int{"n": req.N * 2}, nil
			}))
		}
	})
	var out map[string]int
	e.ok("POST", "/v1/egress/echo", `{"n":21}`, 200, &out)
	if out["n"] != 42 {
		t.Errorf("extra route answered %v", out)
	}
	e.fail("POST", "/v1/egress/echo", `{"m":1}`, 400, "BAD_REQUEST")
	er := e.fail("POST", "/v1/egress/echo", `{"n":-1}`, 500, "INTERNAL")
	if !strings.Contains(er.Message, "boom") {
		t.Errorf("internal error message %q", er.Message)
	}
	if !strings.Contains(e.logs.String(), `"msg":"admin request failed"`) {
		t.Errorf("the 500 was not logged: %s", e.logs.String())
	}
}

// TestNoSecretsLogged runs every route that handles a secret at debug
// level and checks the log for each secret.
func TestNoSecretsLogged(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "growth", 5)
	var m adminapi.MintedKey
	e.ok("POST", "/v1/accounts/"+a.ID+"/keys", `{"scopes":["validate:read"]}`, 201, &m)
	var s1, s2 adminapi.WebhookSecret
	e.ok("GET", "/v1/accounts/"+a.ID+"/webhook-secret", "", 200, &s1)
	e.ok("POST", "/v1/accounts/"+a.ID+"/webhook-secret/rotate", "", 200, &s2)
	e.fail("POST", "/v1/keys/"+m.Token+"/revoke", "", 400, "BAD_REQUEST")
	e.ok("POST", "/v1/keys/"+m.Prefix+"/revoke", "", 200, nil)

	logs := e.logs.String()
	_, secret, _ := storage.ParseKey(m.Token)
	for _, s := range []string{m.Token, secret, s1.Secret, s2.Secret, "whsec_"} {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds secret %q", s)
		}
	}
	for _, want := range []string{`"msg":"API key minted"`, `"prefix":"` + m.Prefix + `"`, `"msg":"API key revoked"`,
		`"msg":"webhook secret rotated"`, `"msg":"account created"`, `"route":"/v1/keys/{prefix}/revoke"`, `"peer_uid":`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("log line is not JSON: %s", line)
		}
		lines++
	}
	if lines < 6 {
		t.Errorf("%d log lines", lines)
	}
}

// TestConcurrentMints mints from many connections at once: every key is
// distinct and verifies.
func TestConcurrentMints(t *testing.T) {
	e := newEnv(t)
	a := e.createAccount("Acme", "growth", 0)
	c := adminapi.NewClient(e.sock)
	defer c.Close()
	const n = 16
	tokens := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			m, err := c.MintKey(context.Background(), a.ID, adminapi.MintKey{Scopes: []string{"validate:read"}})
			tokens <- m.Token
			errs <- err
		}()
	}
	seen := map[string]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		tok := <-tokens
		if seen[tok] {
			t.Fatal("the same key minted twice")
		}
		seen[tok] = true
		if _, err := e.db.VerifyKey(t.Context(), tok); err != nil {
			t.Error(err)
		}
	}
}

// TestClientErrors checks what the Go client makes of the envelope and of
// an absent socket.
func TestClientErrors(t *testing.T) {
	e := newEnv(t)
	c := adminapi.NewClient(e.sock)
	defer c.Close()
	_, err := c.Account(context.Background(), "acct_nope")
	var ae *adminapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != adminapi.CodeNotFound {
		t.Errorf("unknown account: %v", err)
	}
	_, err = c.CreateAccount(context.Background(), adminapi.CreateAccount{Name: "", Plan: "x"})
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "name: is required") || !strings.Contains(err.Error(), "plan: must be one of") {
		t.Errorf("invalid account: %v", err)
	}
	gone := adminapi.NewClient(filepath.Join(socketDir(t), "none.sock"))
	_, err = gone.Accounts(context.Background())
	var ce *adminapi.ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("absent socket: %v", err)
	}
}
