package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// authCall posts or gets an /auth/* endpoint with a session cookie and CSRF
// token, and returns the status, the body and the new cookie, if any.
func authCall(t *testing.T, base, method, path, body, cookie, csrf string) (int, map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.Header.Set("Cookie", "verifyd_session="+cookie)
	}
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, c := range resp.Cookies() {
		if c.Name == "verifyd_session" {
			cookie = c.Value
		}
	}
	return resp.StatusCode, m, cookie
}

// TestAuthSurvivesKill: an operator's invitation (the admin API behind
// verifyctl accounts invite), a registration with it, a login and a
// logout; then kill -9. After the restart the session is still signed in,
// the ended one still ended, and the invitation still used.
func TestAuthSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	cfg := inviteAuth
	in := startIn(t, dir, cfg)
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	iv, err := ac.CreateInvite(context.Background(), acct.ID, adminapi.CreateInvite{Role: "owner"})
	if err != nil || !strings.HasPrefix(iv.Token, "inv_") {
		t.Fatalf("invite: %+v %v", iv, err)
	}
	const pw = "a long enough password"
	reg := `{"email":"ann@example.test","password":"` + pw + `","invitation":"` + iv.Token + `"}`
	st, m, kept := authCall(t, in.base, "POST", "/auth/register", reg, "", "")
	if st != 201 || kept == "" || m["account"] != acct.ID || m["role"] != "owner" {
		t.Fatalf("register: %d %v", st, m)
	}
	st, m, ended := authCall(t, in.base, "POST", "/auth/login", `{"email":"ann@example.test","password":"`+pw+`"}`, "", "")
	if st != 200 || ended == kept {
		t.Fatalf("login: %d %v", st, m)
	}
	if st, _, _ := authCall(t, in.base, "POST", "/auth/logout", "{}", ended, m["csrf_token"].(string)); st != 204 {
		t.Fatalf("logout: %d", st)
	}

	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	in.cmd.Wait()
	in = startIn(t, dir, cfg)
	if st, m, _ := authCall(t, in.base, "GET", "/auth/session", "", kept, ""); st != 200 || m["user"].(map[string]any)["email"] != "ann@example.test" {
		t.Fatalf("the session after kill -9: %d %v", st, m)
	}
	if st, _, _ := authCall(t, in.base, "GET", "/auth/session", "", ended, ""); st != 401 {
		t.Fatalf("the logged-out session after kill -9: %d", st)
	}
	if st, _, _ := authCall(t, in.base, "POST", "/auth/register", strings.Replace(reg, "ann@", "bob@", 1), "", ""); st != 400 {
		t.Fatalf("the used invitation after kill -9: %d", st)
	}
	us, err := adminClient(t, in).Users(context.Background())
	if err != nil || len(us) != 1 || us[0].Email != "ann@example.test" || len(us[0].Accounts) != 1 {
		t.Fatalf("users after kill -9: %+v %v", us, err)
	}
}
