package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/verifyd/verifyd/server/admin/adminapi"
)

// TestAPIScopesRevocationAndCredits uses the admin socket, as an operator
// would with verifyctl, to mint a read-only key (403 with missingScope on a
// write), revoke a key (401), and run an account out of credits (400 with
// currentCredits).
func TestAPIScopesRevocationAndCredits(t *testing.T) {
	run := testWorld(t, 0)
	dir := t.TempDir()
	in := startIn(t, dir, worldConfig(run, ""))
	sock := filepath.Join(dir, "data", "admin.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v %v", fi, err)
	}
	adm := adminapi.NewClient(sock)
	defer adm.Close()
	ctx := context.Background()
	acct, err := adm.CreateAccount(ctx, adminapi.CreateAccount{Name: "acme", Plan: "enterprise", Credits: 2})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := adm.MintKey(ctx, acct.ID, adminapi.MintKey{Scopes: []string{"validate:read"}})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := adm.MintKey(ctx, acct.ID, adminapi.MintKey{Scopes: []string{"validate:read", "validate:write"}})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, base: in.base}
	body := `{"email":"ann@shop.test"}`

	if d := c.do("POST", "/v1/validate", ro.Token, body).wantError(t, 403, "FORBIDDEN"); d["missingScope"] != "validate:write" {
		t.Errorf("missingScope %v", d)
	}
	if r := c.do("GET", "/v1/balance", ro.Token, ""); r.status != 200 {
		t.Errorf("read-only key on a read route: %d", r.status)
	}
	wo, err := adm.MintKey(ctx, acct.ID, adminapi.MintKey{Scopes: []string{"validate:write"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.do("GET", "/v1/results", wo.Token, "").wantError(t, 403, "FORBIDDEN"); d["missingScope"] != "validate:read" {
		t.Errorf("missingScope %v", d)
	}

	// Two credits: two validations, then 400 with currentCredits.
	for i := range 2 {
		if r := c.do("POST", "/v1/validate", rw.Token, body); r.status != 200 {
			t.Fatalf("validation %d: %d %s", i, r.status, r.body)
		}
	}
	if d := c.do("POST", "/v1/validate", rw.Token, body).wantError(t, 400, "BAD_REQUEST"); d["currentCredits"] != float64(0) {
		t.Errorf("currentCredits %v", d)
	}
	if m := c.do("GET", "/v1/balance", rw.Token, "").json(t); m["credits"] != float64(0) {
		t.Errorf("balance %v after running out", m["credits"])
	}
	// Insufficient credits are not recorded under an Idempotency-Key:
	// after a top-up, the same key is processed (then replayed).
	c.do("POST", "/v1/validate", rw.Token, body, "Idempotency-Key", "short-of-credits").wantError(t, 400, "BAD_REQUEST")
	one := int64(1)
	if _, err := adm.AdjustCredits(ctx, acct.ID, adminapi.AdjustCredits{Add: &one}); err != nil {
		t.Fatal(err)
	}
	for i, replay := range []string{"", "true"} {
		r := c.do("POST", "/v1/validate", rw.Token, body, "Idempotency-Key", "short-of-credits")
		if r.status != 200 || r.header.Get("Idempotent-Replay") != replay {
			t.Fatalf("after a top-up, try %d: %d %s (replay %q)", i, r.status, r.body, r.header.Get("Idempotent-Replay"))
		}
	}

	// Revoked: 401 from then on.
	if _, err := adm.RevokeKey(ctx, rw.Prefix); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/balance", rw.Token, "").wantError(t, 401, "UNAUTHORIZED")

	// Another account's key sees its own balance, not acme's.
	if m := c.do("GET", "/v1/balance", in.key, "").json(t); m["credits"] != float64(1000) {
		t.Errorf("demo balance %v", m["credits"])
	}
}
