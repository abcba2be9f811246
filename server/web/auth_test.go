package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server"
	"github.com/verifyd/verifyd/server/admin"
	"github.com/verifyd/verifyd/server/httpapi"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// clock is a settable clock shared by storage, the API's limiter and the
// account surface: one clock, handed to every part.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	t     *testing.T
	db    *pebble.DB
	web   *Web
	clock *clock
	base  string
}

// testArgon2 is cheap: the tests check the flows, not the cost.
var testArgon2 = Argon2Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1}

func startEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	return startEnvAPI(t, nil, mod)
}

// startEnvAPI is startEnv with the API's options changed by apiMod too.
func startEnvAPI(t *testing.T, apiMod func(*httpapi.GuardOptions), mod func(*Options)) *env {
	t.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(t.TempDir(), pebble.Options{Now: c.Now, Logger: quiet, PurgeInterval: -1, CacheSize: 8 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gOpts := httpapi.GuardOptions{DB: db, Now: c.Now, Logger: quiet}
	if apiMod != nil {
		apiMod(&gOpts)
	}
	guard := httpapi.NewGuard(gOpts)
	api := server.New(server.Options{DB: db, Guard: guard, TrustedProxies: gOpts.TrustedProxies, Logger: quiet})
	opts := Options{DB: db, Guard: guard, Registration: RegistrationInvite, Argon2: testArgon2, Now: c.Now, Logger: quiet}
	if mod != nil {
		mod(&opts)
	}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	adm := admin.New(admin.Options{DB: db, Logger: quiet, HashPassword: w.HashPassword})
	w.Register(api.Router(), Actions{Admin: adm.Handlers(),
		Jobs: func(context.Context, string, int) (any, error) { return map[string][]any{"jobs": {}}, nil }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go api.Serve(ln)
	t.Cleanup(func() { api.Shutdown(t.Context()) })
	return &env{t: t, db: db, web: w, clock: c, base: "http://" + ln.Addr().String()}
}

// browser is a client that keeps the session cookie and the CSRF token,
// as the dashboard's script does.
type browser struct {
	e      *env
	cookie string
	csrf   string
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
	return m
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	e, _ := a.json(t)["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (b *browser) do(method, path, body string, hdr ...string) answer {
	t := b.e.t
	t.Helper()
	req, err := http.NewRequest(method, b.e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.cookie != "" {
		req.Header.Set("Cookie", "verifyd_session="+b.cookie)
	}
	if b.csrf != "" {
		req.Header.Set("X-CSRF-Token", b.csrf)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.Name == "verifyd_session" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure on plain HTTP", c)
			}
			b.cookie = c.Value
		}
	}
	if resp.StatusCode == 200 || resp.StatusCode == 201 {
		var sv SessionView
		if json.Unmarshal(rb, &sv) == nil && sv.CSRFToken != "" {
			b.csrf = sv.CSRFToken
		}
	}
	return answer{resp.StatusCode, resp.Header, rb}
}

func js(v map[string]string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

const pw = "correct horse battery"

func TestRegisterModes(t *testing.T) {
	// closed: nobody registers.
	e := startEnv(t, func(o *Options) { o.Registration = RegistrationClosed })
	b := &browser{e: e}
	if r := b.do("POST", "/auth/register", js(map[string]string{"email": "ann@x.test", "password": pw})); r.status != 403 || r.code(t) != "FORBIDDEN" {
		t.Fatalf("closed: %d %s", r.status, r.body)
	}

	// invite: only with a valid invitation, which then links the account.
	e = startEnv(t, nil)
	b = &browser{e: e}
	acct, _ := e.db.CreateAccount(t.Context(), "Shop", storage.PlanGrowth)
	token, _, err := e.db.CreateInvite(t.Context(), acct.ID, storage.RoleOwner, "", storage.OperatorInviter, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body, path string
	}{
		{js(map[string]string{"email": "ann@x.test", "password": pw}), "invitation"},
		{js(map[string]string{"email": "ann@x.test", "password": "short", "invitation": token}), "password"},
		{js(map[string]string{"email": "no-at", "password": pw, "invitation": token}), "email"},
		{js(map[string]string{"email": "ann@x.test", "password": pw, "invitation": token + "x"}), "invitation"},
		{`{"email":"ann@x.test","password":"` + pw + `","invitation":"` + token + `","extra":"1"}`, "extra"},
		{`{"email":1,"password":"` + pw + `"}`, "email"},
	} {
		r := b.do("POST", "/auth/register", tc.body)
		if r.status != 400 || !strings.Contains(string(r.body), `"path":"`+tc.path+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, r.status, r.body, tc.path)
		}
	}
	r := b.do("POST", "/auth/register", js(map[string]string{"email": "ann@x.test", "password": pw, "invitation": token}))
	if r.status != 201 || b.cookie == "" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "argon2") || strings.Contains(string(r.body), "password") {
		t.Errorf("the answer shows the password or its hash: %s", r.body)
	}
	m := b.do("GET", "/auth/session", "").json(t)
	if m["account"] != acct.ID || m["role"] != "owner" || m["user"].(map[string]any)["email"] != "ann@x.test" {
		t.Fatalf("session %v", m)
	}
	if r := (&browser{e: e}).do("POST", "/auth/register", js(map[string]string{"email": "ANN@x.test", "password": pw, "invitation": token})); r.status != 409 && r.status != 400 {
		t.Errorf("same email again: %d %s", r.status, r.body)
	}

	// open: a new account with the configured plan and credits.
	e = startEnv(t, func(o *Options) {
		o.Registration = RegistrationOpen
		o.OpenPlan = storage.PlanStarter
		o.OpenCredits = 250
	})
	b = &browser{e: e}
	r = b.do("POST", "/auth/register", js(map[string]string{"email": "bob@x.test", "password": pw, "account_name": "Bob's"}))
	if r.status != 201 {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	id := r.json(t)["account"].(string)
	a, _ := e.db.GetAccount(t.Context(), id)
	if cr, _ := e.db.Credits(t.Context(), id); a.Plan != storage.PlanStarter || cr.Balance != 250 || a.Name != "Bob's" {
		t.Fatalf("open account %+v, balance %d", a, cr.Balance)
	}
	if r := (&browser{e: e}).do("POST", "/auth/register", js(map[string]string{"email": "bob@x.test", "password": pw})); r.status != 409 || r.code(t) != "CONFLICT" {
		t.Errorf("same email again: %d %s", r.status, r.body)
	}
}

// newUser makes a user directly in storage, member of a new account.
func (e *env) newUser(email string) (storage.User, storage.Account) {
	e.t.Helper()
	acct, err := e.db.CreateAccount(context.Background(), "Shop", storage.PlanGrowth)
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := e.web.HashPassword(pw)
	if err != nil {
		e.t.Fatal(err)
	}
	token, _, _ := e.db.CreateInvite(context.Background(), acct.ID, storage.RoleOwner, "", storage.OperatorInviter, time.Hour)
	u, _, err := e.db.RegisterWithInvite(context.Background(), email, h, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return u, acct
}

func TestLoginLogout(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	b := &browser{e: e}
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw + "x"})); r.status != 401 || b.cookie != "" {
		t.Fatalf("wrong password: %d %s", r.status, r.body)
	}
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": "nobody@x.test", "password": pw})); r.status != 401 {
		t.Fatalf("unknown user: %d %s", r.status, r.body)
	}
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": " ANN@x.test", "password": pw})); r.status != 200 || b.cookie == "" || b.csrf == "" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	old := b.cookie
	// Logout needs the CSRF token.
	csrf := b.csrf
	b.csrf = ""
	if r := b.do("POST", "/auth/logout", "{}"); r.status != 403 || r.code(t) != "FORBIDDEN" {
		t.Fatalf("logout without the CSRF token: %d %s", r.status, r.body)
	}
	// The last character changed (to one it is not: a token ending in
	// "A" made this "wrong" token the right one, 1 time in 64).
	last := "A"
	if csrf[len(csrf)-1] == 'A' {
		last = "B"
	}
	b.csrf = csrf[:len(csrf)-1] + last
	if r := b.do("POST", "/auth/logout", "{}"); r.status != 403 {
		t.Fatalf("logout with a wrong CSRF token: %d %s", r.status, r.body)
	}
	b.csrf = csrf
	if r := b.do("POST", "/auth/logout", "{}"); r.status != 204 || b.cookie != "" {
		t.Fatalf("logout: %d %s, cookie %q", r.status, r.body, b.cookie)
	}
	// The token from before the logout is refused.
	b.cookie = old
	if r := b.do("GET", "/auth/session", ""); r.status != 401 || r.code(t) != "UNAUTHORIZED" {
		t.Fatalf("session after logout: %d %s", r.status, r.body)
	}
}

// TestCrossSite: a write from another site is refused whatever it
// carries: an HTML form's content type, a foreign Origin, or a
// Sec-Fetch-Site that says cross-site.
func TestCrossSite(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	b := &browser{e: e}
	body := js(map[string]string{"email": "ann@x.test", "password": pw})
	for _, hdr := range [][]string{
		{"Content-Type", "application/x-www-form-urlencoded"},
		{"Content-Type", "text/plain"},
		{"Origin", "http://evil.test"},
		{"Origin", "null"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
	} {
		r := b.do("POST", "/auth/login", body, hdr...)
		if r.status != 403 || r.code(t) != "FORBIDDEN" || b.cookie != "" {
			t.Errorf("%v: %d %s", hdr, r.status, r.body)
		}
	}
	if r := b.do("POST", "/auth/login", body, "Origin", e.base, "Sec-Fetch-Site", "same-origin"); r.status != 200 {
		t.Fatalf("same origin: %d %s", r.status, r.body)
	}
}

// TestAuthRateLimits: spec §8's per-IP limits answer 429 at the 6th
// link, the 21st register and the 31st login within their windows, and
// let requests through again once the window has passed.
func TestAuthRateLimits(t *testing.T) {
	e := startEnv(t, func(o *Options) { o.Registration = RegistrationOpen })
	e.newUser("ann@x.test")
	b := &browser{e: e}
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw})); r.status != 200 {
		t.Fatal(r.status, string(r.body))
	}
	check := func(name string, n int, window time.Duration, send func(i int) answer) {
		t.Helper()
		for i := 1; i <= n; i++ {
			if r := send(i); r.status == 429 {
				t.Fatalf("%s: 429 at request %d of %d", name, i, n)
			}
		}
		r := send(n + 1)
		m := r.json(t)
		details, _ := m["error"].(map[string]any)["details"].(map[string]any)
		if r.status != 429 || r.code(t) != "RATE_LIMITED" || r.header.Get("Retry-After") == "" || details["retryAfter"] == nil {
			t.Fatalf("%s: request %d: %d %s %v", name, n+1, r.status, r.body, r.header)
		}
		if ra := int(details["retryAfter"].(float64)); ra < 1 || time.Duration(ra)*time.Second > window {
			t.Errorf("%s: retryAfter %d s in a %v window", name, ra, window)
		}
		e.clock.Advance(window)
		if r := send(n + 2); r.status == 429 {
			t.Fatalf("%s: still limited after the window", name)
		}
	}
	check("link", 5, 10*time.Minute, func(int) answer {
		return b.do("POST", "/auth/link", js(map[string]string{"invitation": "inv_nope"}))
	})
	check("register", 20, time.Hour, func(i int) answer {
		return (&browser{e: e}).do("POST", "/auth/register", js(map[string]string{"email": "u" + string(rune('a'+i)) + "@x.test", "password": "short"}))
	})
	// Logins that succeed: the failure throttle does not count them.
	check("login", 30, 10*time.Minute, func(int) answer {
		return (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw}))
	})
}

// TestAuthLimitsPerIPv6Prefix: the /auth/* limits and the failed-login
// delay of an address key an IPv6 client by its /64, as the API's limits
// do: a client cannot rotate past them through the addresses of its
// prefix; another /64 is another client.
func TestAuthLimitsPerIPv6Prefix(t *testing.T) {
	e := startEnvAPI(t, func(o *httpapi.GuardOptions) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, func(o *Options) { o.LoginLimit = httpapi.Limit{N: 3, Window: 10 * time.Minute} })
	e.newUser("ann@x.test")
	login := func(from, password string) answer {
		t.Helper()
		return (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": password}), "X-Forwarded-For", from)
	}
	for i, from := range []string{"2001:db8:7:1::1", "2001:db8:7:1::2", "2001:db8:7:1:ffff::3"} {
		if r := login(from, pw); r.status != 200 {
			t.Fatalf("login %d from %s: %d %s", i, from, r.status, r.body)
		}
	}
	if r := login("2001:db8:7:1::4", pw); r.status != 429 || r.code(t) != "RATE_LIMITED" {
		t.Fatalf("a 4th login from the /64: %d %s", r.status, r.body)
	}
	if r := login("2001:db8:7:2::1", pw); r.status != 200 {
		t.Fatalf("a login from another /64: %d %s", r.status, r.body)
	}

	// Failed logins from many addresses of one /64 add up to one
	// address's delay: after 5, the next attempt from the /64 waits, even
	// for another account; another /64 does not.
	e = startEnvAPI(t, func(o *httpapi.GuardOptions) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, nil)
	for _, email := range []string{"a@x.test", "b@x.test", "c@x.test", "d@x.test", "e@x.test", "f@x.test"} {
		e.newUser(email)
	}
	try := func(email, from string) answer {
		t.Helper()
		return (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": email, "password": "wrong password!"}), "X-Forwarded-For", from)
	}
	for i, email := range []string{"a@x.test", "b@x.test", "c@x.test", "d@x.test", "e@x.test"} {
		if r := try(email, fmt.Sprintf("2001:db8:9:1::%x", i+1)); r.status != 401 {
			t.Fatalf("failure %d: %d %s", i, r.status, r.body)
		}
	}
	if r := try("f@x.test", "2001:db8:9:1:abcd::1"); r.status != 429 {
		t.Fatalf("a 6th guess from the /64: %d %s, want 429 (the address's delay)", r.status, r.body)
	}
	if r := try("f@x.test", "2001:db8:9:2::1"); r.status != 401 {
		t.Fatalf("a guess from another /64: %d %s, want 401", r.status, r.body)
	}
}

// TestLoginThrottle: five wrong passwords in a row for one account make
// the next attempt wait 1 s, then 2 s, ...; during the wait even the
// right password is refused; a success clears the count.
func TestLoginThrottle(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	login := func(p string) answer {
		return (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": p}))
	}
	for i := range 5 {
		if r := login("wrong password!"); r.status != 401 {
			t.Fatalf("failure %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := login(pw); r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("right password during the wait: %d %s %v", r.status, r.body, r.header)
	}
	e.clock.Advance(time.Second)
	if r := login("wrong password!"); r.status != 401 {
		t.Fatalf("after the wait: %d", r.status)
	}
	if r := login(pw); r.status != 429 || r.header.Get("Retry-After") != "2" {
		t.Fatalf("after the 6th failure: %d %v", r.status, r.header)
	}
	e.clock.Advance(2 * time.Second)
	if r := login(pw); r.status != 200 {
		t.Fatalf("after the second wait: %d %s", r.status, r.body)
	}
	if r := login("wrong password!"); r.status != 401 {
		t.Fatalf("the count was not cleared: %d", r.status)
	}
}

// TestPasswordChange ends every session of the user; the browser that
// changed it gets a new one.
func TestPasswordChange(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	a, other := &browser{e: e}, &browser{e: e}
	for _, b := range []*browser{a, other} {
		if r := b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw})); r.status != 200 {
			t.Fatal(r.status)
		}
	}
	old := a.cookie
	if r := a.do("POST", "/auth/password", js(map[string]string{"current_password": "wrong one!!!!", "new_password": pw + "2"})); r.status != 400 {
		t.Fatalf("wrong current password: %d %s", r.status, r.body)
	}
	if r := a.do("POST", "/auth/password", js(map[string]string{"current_password": pw, "new_password": pw + "2"})); r.status != 200 || a.cookie == old {
		t.Fatalf("change: %d %s", r.status, r.body)
	}
	if r := a.do("GET", "/auth/session", ""); r.status != 200 {
		t.Fatalf("the changing browser's new session: %d", r.status)
	}
	if r := other.do("GET", "/auth/session", ""); r.status != 401 {
		t.Fatalf("another browser's session after the change: %d", r.status)
	}
	a.cookie = old
	if r := a.do("GET", "/auth/session", ""); r.status != 401 {
		t.Fatalf("the old session of the changing browser: %d", r.status)
	}
	if r := other.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw + "2"})); r.status != 200 {
		t.Fatalf("login with the new password: %d", r.status)
	}
}

// TestSessionTimeouts: a session ends after its idle timeout, and after
// its lifetime even when used.
func TestSessionTimeouts(t *testing.T) {
	e := startEnv(t, func(o *Options) { o.SessionIdle = time.Hour; o.SessionLifetime = 3 * time.Hour })
	e.newUser("ann@x.test")
	b := &browser{e: e}
	b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw}))
	for range 5 { // used every 50 minutes: alive until the lifetime ends
		e.clock.Advance(50 * time.Minute)
		r := b.do("GET", "/auth/session", "")
		if alive := e.clock.Now().Sub(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)) < 3*time.Hour; (r.status == 200) != alive {
			t.Fatalf("at %v: %d", e.clock.Now(), r.status)
		}
	}
	b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw}))
	e.clock.Advance(time.Hour)
	if r := b.do("GET", "/auth/session", ""); r.status != 401 {
		t.Fatalf("idle an hour: %d", r.status)
	}
}

// TestLink: a signed-in user joins another account with an invitation,
// once; the session then shows that account.
func TestLink(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	other, _ := e.db.CreateAccount(t.Context(), "Other", storage.PlanFree)
	token, _, _ := e.db.CreateInvite(t.Context(), other.ID, storage.RoleMember, "", storage.OperatorInviter, time.Hour)
	b := &browser{e: e}
	if r := b.do("POST", "/auth/link", js(map[string]string{"invitation": token})); r.status != 401 {
		t.Fatalf("link signed out: %d", r.status)
	}
	b.do("POST", "/auth/login", js(map[string]string{"email": "ann@x.test", "password": pw}))
	r := b.do("POST", "/auth/link", js(map[string]string{"invitation": token}))
	if m := r.json(t); r.status != 200 || m["account"] != other.ID || m["role"] != "member" || len(m["user"].(map[string]any)["accounts"].([]any)) != 2 {
		t.Fatalf("link: %d %s", r.status, r.body)
	}
	if r := b.do("POST", "/auth/link", js(map[string]string{"invitation": token})); r.status != 400 {
		t.Fatalf("second use: %d %s", r.status, r.body)
	}
}

// TestLoginThrottlePerAddress: one address guessing at many accounts slows
// down too, a success on its own account does not reset that, and an hour
// without failures does.
func TestLoginThrottlePerAddress(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	login := func(email, p string) answer {
		return (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": email, "password": p}))
	}
	for i := range 5 {
		if r := login("victim"+string(rune('a'+i))+"@x.test", "wrong password!"); r.status != 401 {
			t.Fatalf("guess %d: %d %s", i+1, r.status, r.body)
		}
	}
	if r := login("ann@x.test", pw); r.status != 429 {
		t.Fatalf("own account during the address's wait: %d", r.status)
	}
	e.clock.Advance(time.Second)
	if r := login("ann@x.test", pw); r.status != 200 {
		t.Fatalf("own account after the wait: %d %s", r.status, r.body)
	}
	if r := login("victimz@x.test", "wrong password!"); r.status != 401 {
		t.Fatalf("a guess after the wait: %d", r.status)
	}
	if r := login("victimy@x.test", "wrong password!"); r.status != 429 || r.header.Get("Retry-After") != "2" {
		t.Fatalf("the success reset the address's count: %d %v", r.status, r.header)
	}
	e.clock.Advance(time.Hour)
	if r := login("victimy@x.test", "wrong password!"); r.status != 401 {
		t.Fatalf("after an hour without failures: %d", r.status)
	}
	if r := login("victimx@x.test", "wrong password!"); r.status != 401 {
		t.Fatalf("the count did not start again: %d", r.status)
	}
}

// TestDummyHashAtNew: the dummy hash checked for unknown emails exists
// once New returns, at the configured cost, so the first login for an
// unknown email does the same work as any other (made at that login, it
// took a hash more: twice as long, which told that the email has no
// user). The logins that use it leave it as it is.
func TestDummyHashAtNew(t *testing.T) {
	e := startEnv(t, nil)
	d := e.web.hash.dummy
	if d == "" {
		t.Fatal("no dummy hash after New")
	}
	ok, stale, err := e.web.hash.verify(t.Context(), d, pw)
	if ok || stale || err != nil {
		t.Fatalf("the dummy hash %q: ok %v, stale %v (not the configured cost), %v", d, ok, stale, err)
	}
	if r := (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": "nobody@x.test", "password": pw})); r.status != 401 {
		t.Fatalf("unknown email: %d %s", r.status, r.body)
	}
	if e.web.hash.dummy != d {
		t.Error("a login remade the dummy hash")
	}
}

// TestDummyHashCostsNoHash: making the dummy hash at the default cost
// runs no Argon2id. It did, and every start of verifyd took a hash's
// memory (64 MiB): the Go heap's next goal doubled and the process kept
// some 60 MB more resident than before the dummy was made at start.
func TestDummyHashCostsNoHash(t *testing.T) {
	h, err := newHasher(DefaultArgon2, 1)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.makeDummy()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("making the dummy hash allocated %d bytes; an Argon2id hash at the default cost takes %d KiB", n, DefaultArgon2.MemoryKiB)
	}
	if !strings.Contains(h.dummy, fmt.Sprintf("m=%d,t=%d,p=%d$", DefaultArgon2.MemoryKiB, DefaultArgon2.Iterations, DefaultArgon2.Parallelism)) {
		t.Errorf("the dummy hash %q is not at the default cost", h.dummy)
	}
}
