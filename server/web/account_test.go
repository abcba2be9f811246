package web

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/storage"
)

// signIn signs a new browser in as email.
func (e *env) signIn(email string) *browser {
	e.t.Helper()
	b := &browser{e: e}
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": email, "password": pw})); r.status != 200 {
		e.t.Fatalf("login %s: %d %s", email, r.status, r.body)
	}
	return b
}

// addMember makes a user who is a member (not owner) of account.
func (e *env) addMember(email, account string) storage.User {
	e.t.Helper()
	h, _ := e.web.HashPassword(pw)
	token, _, _ := e.db.CreateInvite(context.Background(), account, storage.RoleMember, "", storage.OperatorInviter, time.Hour)
	u, _, err := e.db.RegisterWithInvite(context.Background(), email, h, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// TestDashboardRoles: members read, owners manage keys, webhooks and
// invitations, operators see the operator routes; each route answers
// for the session's account only.
func TestDashboardRoles(t *testing.T) {
	e := startEnv(t, nil)
	_, acct := e.newUser("owner@x.test")
	e.addMember("member@x.test", acct.ID)
	_, other := e.newUser("other@x.test")
	_, otherKey, _ := e.db.MintKey(t.Context(), other.ID, []string{"validate:read"}, "theirs")
	owner, member := e.signIn("owner@x.test"), e.signIn("member@x.test")

	for _, p := range []string{"/dashboard/api/account", "/dashboard/api/stats?days=7", "/dashboard/api/jobs", "/dashboard/api/members"} {
		if r := member.do("GET", p, ""); r.status != 200 {
			t.Errorf("member GET %s: %d %s", p, r.status, r.body)
		}
	}
	if r := member.do("GET", "/dashboard/api/account", ""); !strings.Contains(string(r.body), `"id":"`+acct.ID+`"`) ||
		strings.Contains(string(r.body), "whsec_") || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("account: %s %v", r.body, r.header)
	}
	if r := member.do("GET", "/dashboard/api/stats?days=0", ""); r.status != 400 {
		t.Errorf("days=0: %d", r.status)
	}
	for _, p := range []string{"/dashboard/api/keys", "/dashboard/api/invites", "/dashboard/api/webhook-secret"} {
		if r := member.do("GET", p, ""); r.status != 403 || !strings.Contains(string(r.body), `"reason":"not_owner"`) {
			t.Errorf("member GET %s: %d %s", p, r.status, r.body)
		}
		if r := owner.do("GET", p, ""); r.status != 200 {
			t.Errorf("owner GET %s: %d %s", p, r.status, r.body)
		}
	}
	if r := owner.do("GET", "/dashboard/api/operator/accounts", ""); r.status != 403 || !strings.Contains(string(r.body), "not_operator") {
		t.Errorf("owner GET operator route: %d %s", r.status, r.body)
	}
	if r := (&browser{e: e}).do("GET", "/dashboard/api/account", ""); r.status != 401 || r.code(t) != "UNAUTHORIZED" {
		t.Errorf("signed out: %d %s", r.status, r.body)
	}

	// Keys: minted on the session's account; another account's is not found.
	r := owner.do("POST", "/dashboard/api/keys", `{"scopes":["validate:read"],"label":"ci"}`)
	if m := r.json(t); r.status != 201 || m["account"] != acct.ID || !strings.HasPrefix(m["key"].(string), "svc_live_") {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	if r := owner.do("POST", "/dashboard/api/keys/"+otherKey.Prefix+"/revoke", "{}"); r.status != 404 {
		t.Errorf("revoke another account's key: %d %s", r.status, r.body)
	}
	if k, _ := e.db.LookupKey(t.Context(), otherKey.Prefix); k.Revoked {
		t.Fatal("another account's key was revoked")
	}

	// Invitations: by the owner, for the session's account, with the
	// owner named as their creator; revoked by id.
	r = owner.do("POST", "/dashboard/api/invites", `{"role":"member"}`)
	iv := r.json(t)
	if r.status != 201 || iv["account"] != acct.ID || !strings.HasPrefix(iv["token"].(string), "inv_") || iv["created_by"] == storage.OperatorInviter {
		t.Fatalf("invite: %d %s", r.status, r.body)
	}
	if r := owner.do("POST", "/dashboard/api/invites/"+iv["id"].(string)+"/revoke", "{}"); r.status != 200 {
		t.Fatalf("revoke invite: %d %s", r.status, r.body)
	}

	// Roles: the last owner stays; removing a member ends their access
	// at their next request, sessions and all.
	ownerID := owner.do("GET", "/auth/session", "").json(t)["user"].(map[string]any)["id"].(string)
	if r := owner.do("POST", "/dashboard/api/members/"+ownerID+"/role", `{"role":"member"}`); r.status != 409 {
		t.Errorf("demote the last owner: %d %s", r.status, r.body)
	}
	memberID := member.do("GET", "/auth/session", "").json(t)["user"].(map[string]any)["id"].(string)
	if r := member.do("POST", "/dashboard/api/members/"+ownerID+"/role", `{"role":""}`); r.status != 403 {
		t.Errorf("a member removes the owner: %d %s", r.status, r.body)
	}
	if r := owner.do("POST", "/dashboard/api/members/"+memberID+"/role", `{"role":""}`); r.status != 200 {
		t.Fatalf("remove member: %d %s", r.status, r.body)
	}
	if r := member.do("GET", "/dashboard/api/account", ""); r.status != 403 || !strings.Contains(string(r.body), "not_member") {
		t.Errorf("removed member: %d %s", r.status, r.body)
	}
	if r := member.do("GET", "/v1/balance", ""); r.status != 403 {
		t.Errorf("removed member on /v1: %d %s", r.status, r.body)
	}

	// Operators may act on any account and switch to it.
	u, _ := e.db.UserByEmail(t.Context(), "other@x.test")
	e.db.SetOperator(t.Context(), u.ID, true)
	op := e.signIn("other@x.test")
	if r := op.do("GET", "/dashboard/api/operator/accounts", ""); r.status != 200 || !strings.Contains(string(r.body), acct.ID) {
		t.Errorf("operator accounts: %d %s", r.status, r.body)
	}
	if r := op.do("POST", "/dashboard/api/operator/accounts/"+acct.ID+"/credits", `{"add":25,"note":"goodwill"}`); r.status != 200 {
		t.Errorf("operator credits: %d %s", r.status, r.body)
	}
	if cr, _ := e.db.Credits(t.Context(), acct.ID); cr.Balance != 25 {
		t.Errorf("balance after the operator's credits: %d", cr.Balance)
	}
	if r := op.do("POST", "/auth/account", js(map[string]string{"account": acct.ID})); r.status != 200 || r.json(t)["role"] != "operator" {
		t.Errorf("operator switch: %d %s", r.status, r.body)
	}
	if r := owner.do("POST", "/auth/account", js(map[string]string{"account": other.ID})); r.status != 404 {
		t.Errorf("owner switches to another's account: %d %s", r.status, r.body)
	}
}

// TestDashboardCSRF: every dashboard write and every /v1 write from a
// session needs the session's CSRF token and no cross-site signal; a
// cross-site HTML form (no custom header, a form body) is refused before
// anything changes.
func TestDashboardCSRF(t *testing.T) {
	e := startEnv(t, nil)
	_, acct := e.newUser("owner@x.test")
	b := e.signIn("owner@x.test")
	token := b.csrf
	keys := func() int {
		ks, _ := e.db.ListKeys(t.Context(), acct.ID)
		return len(ks)
	}
	n := keys()
	for _, tc := range []struct {
		name string
		hdr  []string
		csrf string
		body string
	}{
		{"form post", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.test", "Sec-Fetch-Site", "cross-site"}, "", "scopes=validate:read"},
		{"text/plain form", []string{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"}, "", `{"scopes":["validate:read"]}`},
		{"no token", nil, "", `{"scopes":["validate:read"]}`},
		{"wrong token", nil, token[:len(token)-2] + "AA", `{"scopes":["validate:read"]}`},
		{"other origin", []string{"Origin", "http://evil.test"}, token, `{"scopes":["validate:read"]}`},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, token, `{"scopes":["validate:read"]}`},
	} {
		b.csrf = tc.csrf
		r := b.do("POST", "/dashboard/api/keys", tc.body, tc.hdr...)
		if r.status != 403 || !strings.Contains(string(r.body), `"reason":"csrf"`) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if keys() != n {
		t.Fatal("a refused request minted a key")
	}
	// The /v1 routes: a session write without the token is refused
	// before it costs anything; reads need no token.
	b.csrf = ""
	if r := b.do("POST", "/v1/validate", `{"email":"ann@x.test"}`); r.status != 403 || !strings.Contains(string(r.body), "csrf") {
		t.Errorf("validate without the token: %d %s", r.status, r.body)
	}
	if r := b.do("POST", "/v1/validate", `{"email":"ann@x.test"}`, "Origin", "http://evil.test", "X-CSRF-Token", token); r.status != 403 {
		t.Errorf("validate from another origin: %d %s", r.status, r.body)
	}
	if r := b.do("GET", "/v1/balance", ""); r.status != 200 {
		t.Errorf("balance by session: %d %s", r.status, r.body)
	}
	b.csrf = token
	if r := b.do("POST", "/dashboard/api/keys", `{"scopes":["validate:read"]}`, "Origin", e.base, "Sec-Fetch-Site", "same-origin"); r.status != 201 || keys() != n+1 {
		t.Errorf("same-origin write: %d %s", r.status, r.body)
	}
	// After logout the old cookie is refused on /v1 as well.
	cookie := b.cookie
	b.do("POST", "/auth/logout", "{}")
	b.cookie = cookie
	if r := b.do("GET", "/v1/balance", ""); r.status != 401 {
		t.Errorf("balance with the ended session: %d %s", r.status, r.body)
	}
}

// TestPages: the pages need a session (else a redirect to /login with the
// way back), carry the security headers, and never redirect off-site.
func TestPages(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.base+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", "verifyd_session="+cookie)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get("/dashboard/keys", ""); r.StatusCode != 303 || r.Header.Get("Location") != "/login?next=%2Fdashboard%2Fkeys" {
		t.Errorf("signed out: %d %s", r.StatusCode, r.Header.Get("Location"))
	}
	b := e.signIn("ann@x.test")
	for _, p := range []string{"/dashboard", "/dashboard/validate", "/dashboard/batch", "/dashboard/history", "/dashboard/keys",
		"/dashboard/webhooks", "/dashboard/team", "/dashboard/settings", "/link"} {
		r := get(p, b.cookie)
		csp := r.Header.Get("Content-Security-Policy")
		if r.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", p, r.StatusCode, r.Header)
		}
	}
	if r := get("/dashboard/operator", b.cookie); r.StatusCode != 403 {
		t.Errorf("operator page for an owner: %d", r.StatusCode)
	}
	for next, want := range map[string]string{
		"/dashboard/batch":         "/dashboard/batch",
		"//evil.test/dashboard":    "/dashboard",
		"https://evil.test/x":      "/dashboard",
		"/\\evil.test":             "/dashboard",
		"/auth/logout":             "/dashboard",
		"/dashboard/../auth/login": "/dashboard",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
	if r := get("/login?next=//evil.test", b.cookie); r.Header.Get("Location") != "/dashboard" {
		t.Errorf("login with a session and an off-site next: %s", r.Header.Get("Location"))
	}
}

// TestRedirectsRelative: every redirect of the pages is a relative
// Location, whatever Host the request names; fasthttp's ctx.Redirect made
// it absolute with the client's Host, so Host: evil.test sent the browser
// to evil.test.
func TestRedirectsRelative(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	ann := e.signIn("ann@x.test")
	// A user in no account yet is sent to /link.
	h, err := e.web.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.CreateUser(t.Context(), "bob@x.test", h, false); err != nil {
		t.Fatal(err)
	}
	lone := e.signIn("bob@x.test")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		path, cookie, want string
	}{
		{"/dashboard", "", "/login?next=%2Fdashboard"},
		{"/dashboard/keys?x=1", "", "/login?next=%2Fdashboard%2Fkeys%3Fx%3D1"},
		{"/link", "", "/login?next=%2Flink"},
		{"/login", ann.cookie, "/dashboard"},
		{"/login?next=/dashboard/batch", ann.cookie, "/dashboard/batch"},
		{"/login?next=https://evil.test/x", ann.cookie, "/dashboard"},
		{"/dashboard", lone.cookie, "/link"},
	} {
		for _, host := range []string{"", "evil.test", "evil.test:443"} {
			req, _ := http.NewRequest("GET", e.base+tc.path, nil)
			if host != "" {
				req.Host = host
			}
			if tc.cookie != "" {
				req.Header.Set("Cookie", "verifyd_session="+tc.cookie)
			}
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != 303 || loc != tc.want || strings.Contains(loc, "evil.test") {
				t.Errorf("%s (Host %q): %d Location %q, want 303 %q", tc.path, host, resp.StatusCode, loc, tc.want)
			}
		}
	}
}

// TestReviewFixes: registration with a bad invitation does not tell
// whether an email has a user; a demoted owner's invitations are
// withdrawn; signing in again ends the browser's previous session;
// guesses sent at once take turns.
func TestReviewFixes(t *testing.T) {
	e := startEnv(t, nil)
	_, acct := e.newUser("owner@x.test")
	for _, email := range []string{"owner@x.test", "nobody@x.test"} {
		r := (&browser{e: e}).do("POST", "/auth/register", js(map[string]string{"email": email, "password": pw, "invitation": "inv_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}))
		if r.status != 400 || strings.Contains(string(r.body), "exists") {
			t.Errorf("register %s with a bad invitation: %d %s", email, r.status, r.body)
		}
	}

	b := e.signIn("owner@x.test")
	r := b.do("POST", "/dashboard/api/invites", `{"role":"owner"}`)
	if r.status != 201 {
		t.Fatalf("invite: %d %s", r.status, r.body)
	}
	u2 := e.addMember("second@x.test", acct.ID)
	if _, err := e.db.SetRole(t.Context(), acct.ID, u2.ID, storage.RoleOwner); err != nil {
		t.Fatal(err)
	}
	ownerID := b.do("GET", "/auth/session", "").json(t)["user"].(map[string]any)["id"].(string)
	b2 := e.signIn("second@x.test")
	if r := b2.do("POST", "/dashboard/api/members/"+ownerID+"/role", `{"role":"member"}`); r.status != 200 {
		t.Fatalf("demote: %d %s", r.status, r.body)
	}
	if ivs, _ := e.db.Invites(t.Context(), acct.ID); len(ivs) != 0 {
		t.Errorf("the demoted owner's invitations are still pending: %+v", ivs)
	}

	old := b.cookie
	if r := b.do("POST", "/auth/login", js(map[string]string{"email": "second@x.test", "password": pw})); r.status != 200 {
		t.Fatalf("login again: %d", r.status)
	}
	if _, err := e.db.LookupSession(t.Context(), old); err == nil {
		t.Error("the replaced session is still alive")
	}

	// begin/end: one check at a time per key.
	th := newThrottle(e.clock.Now, 5, time.Minute)
	if !th.begin("user|a", "ip|1") || th.begin("user|a", "ip|2") || th.begin("user|b", "ip|1") {
		t.Fatal("a second attempt of a key in flight was let through")
	}
	th.end("user|a", "ip|1")
	if !th.begin("user|a", "ip|2") {
		t.Fatal("a key was not given back")
	}
}

// TestContentTypes: the JSON writes of the account surface take
// application/json, with charset=utf-8 at most; a form's type (or none)
// is refused as cross-site (403), application/json with another charset
// or parameter answers 400 BAD_REQUEST in the envelope, as on /v1.
func TestContentTypes(t *testing.T) {
	e := startEnv(t, nil)
	_, acct := e.newUser("owner@x.test")
	b := e.signIn("owner@x.test")
	keys := func() int {
		ks, _ := e.db.ListKeys(t.Context(), acct.ID)
		return len(ks)
	}
	n := keys()
	mint := `{"scopes":["validate:read"]}`
	for _, ct := range []string{"application/json; charset=utf-16", "application/json;charset=UTF-16BE", "application/json; charset=utf-8; v=1", "application/json; q=1"} {
		r := b.do("POST", "/dashboard/api/keys", mint, "Content-Type", ct)
		if r.status != 400 || r.code(t) != "BAD_REQUEST" || !strings.Contains(string(r.body), `"path":"Content-Type"`) {
			t.Errorf("mint key as %q: %d %s, want 400", ct, r.status, r.body)
		}
		r = (&browser{e: e}).do("POST", "/auth/login", js(map[string]string{"email": "owner@x.test", "password": pw}), "Content-Type", ct)
		if r.status != 400 || r.code(t) != "BAD_REQUEST" {
			t.Errorf("login as %q: %d %s, want 400", ct, r.status, r.body)
		}
		// /v1 with the session: the CSRF token, then the type.
		if r := b.do("POST", "/v1/validate", `{"email":"ann@x.test"}`, "Content-Type", ct); r.status != 400 {
			t.Errorf("validate by session as %q: %d %s, want 400", ct, r.status, r.body)
		}
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"} {
		if r := b.do("POST", "/dashboard/api/keys", mint, "Content-Type", ct); r.status != 403 || !strings.Contains(string(r.body), `"reason":"csrf"`) {
			t.Errorf("mint key as %q: %d %s, want 403 csrf", ct, r.status, r.body)
		}
		if r := b.do("POST", "/v1/validate", `{"email":"ann@x.test"}`, "Content-Type", ct); r.status != 400 {
			t.Errorf("validate by session as %q: %d %s, want 400", ct, r.status, r.body)
		}
	}
	if keys() != n {
		t.Fatalf("a refused request minted a key: %d keys, then %d", n, keys())
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=\"UTF-8\""} {
		if r := b.do("POST", "/dashboard/api/keys", mint, "Content-Type", ct); r.status != 201 {
			t.Errorf("mint key as %q: %d %s", ct, r.status, r.body)
		}
	}
}

// TestDashboardQuery: the dashboard's JSON routes refuse a query
// parameter given twice (limit=1&limit=2 was read as its first value) or
// unknown, as /v1 does, and a given one that is empty; 400 in the
// envelope with details.issues naming it.
func TestDashboardQuery(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("owner@x.test")
	b := e.signIn("owner@x.test")
	const d = "/dashboard/api"
	for q, path := range map[string]string{
		d + "/stats?days=1&days=2":                "days",
		d + "/stats?days=":                        "days",
		d + "/stats?day=7":                        "day",
		d + "/jobs?limit=1&limit=2":               "limit",
		d + "/jobs?limit=":                        "limit",
		d + "/webhooks/attempts?limit=5&limit=5":  "limit",
		d + "/webhooks/outbox?limit=1&limit=abc":  "limit",
		d + "/webhooks/dead-letters?account=acct": "account",
		d + "/account?x=1":                        "x",
		d + "/keys?limit=1":                       "limit",
	} {
		r := b.do("GET", q, "")
		if r.status != 400 || r.code(t) != "BAD_REQUEST" || !strings.Contains(string(r.body), `"path":"`+path+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", q, r.status, r.body, path)
		}
	}
	if r := b.do("POST", d+"/keys?scopes=validate:write", `{"scopes":["validate:read"]}`); r.status != 400 || !strings.Contains(string(r.body), `"path":"scopes"`) {
		t.Errorf("POST keys with a query: %d %s", r.status, r.body)
	}
	// (The webhook routes' handlers are not wired in these tests: their
	// queries are checked above, before the handler.)
	for _, q := range []string{d + "/stats?days=7", d + "/stats", d + "/jobs?limit=10", d + "/account"} {
		if r := b.do("GET", q, ""); r.status != 200 {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
}

// TestBigCookie: the dashboard shares its host's cookies; a browser that
// carries 5,000 bytes of another application's next to the session
// still gets its pages and JSON (the server's 4 KiB read buffer answered
// a bare 400).
func TestBigCookie(t *testing.T) {
	e := startEnv(t, nil)
	e.newUser("ann@x.test")
	b := e.signIn("ann@x.test")
	cookie := "analytics=" + strings.Repeat("a", 5000) + "; verifyd_session=" + b.cookie
	for _, p := range []string{"/dashboard", "/dashboard/api/account", "/auth/session", "/v1/balance"} {
		if r := b.do("GET", p, "", "Cookie", cookie); r.status != 200 {
			t.Errorf("GET %s with a 5,000-byte cookie: %d %.200s", p, r.status, r.body)
		}
	}
	if r := b.do("POST", "/dashboard/api/keys", `{"scopes":["validate:read"]}`, "Cookie", cookie); r.status != 201 {
		t.Errorf("POST keys with a 5,000-byte cookie: %d %s", r.status, r.body)
	}
}

// TestRoot: GET / sends a browser to the dashboard (and on to /login);
// an API client gets the 404 envelope.
func TestRoot(t *testing.T) {
	e := startEnv(t, nil)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		accept string
		status int
	}{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", 303}, // Chromium
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 303},                       // Firefox
		{"TEXT/HTML; q=0.5", 303},
		{"", 404},
		{"*/*", 404}, // curl
		{"application/json", 404},
		{"text/html;q=0, */*", 404},
		{"text/html; q=0.000", 404},
	} {
		req, _ := http.NewRequest("GET", e.base+"/", nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Vary") != "Accept" {
			t.Errorf("Accept %q: %d (Vary %q), want %d", tc.accept, resp.StatusCode, resp.Header.Get("Vary"), tc.status)
			continue
		}
		switch tc.status {
		case 303:
			if loc := resp.Header.Get("Location"); loc != "/dashboard" {
				t.Errorf("Accept %q: Location %q", tc.accept, loc)
			}
		case 404:
			if !strings.Contains(string(body), `"code":"NOT_FOUND"`) {
				t.Errorf("Accept %q: body %s, want the NOT_FOUND envelope", tc.accept, body)
			}
		}
	}
}
