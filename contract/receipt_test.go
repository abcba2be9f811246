package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// validate posts {"email": email} and wants a 200 receipt.
func validate(t testing.TB, c *client, email string) (*reply, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"email": email})
	r := c.post("/v1/validate", string(b)).want(t, 200)
	return r, r.obj(t)
}

// truth is what a correct verifier concludes of an address of the world,
// by the meaning of the verdicts (§2.3).
type truth struct {
	email   string
	status  string          // the verdict; "" when the meaning table does not decide it
	reasons []string        // acceptable checks.reason values; nil: any
	flags   map[string]bool // checks flags that must hold
}

// worldTruths are the addresses of the world a single validation and a
// batch both judge. §2.3, meaning of verdicts:
//
//	valid       "deliverable, the mailbox accepts mail"
//	risky       "accept-all or low confidence"
//	invalid     "undeliverable: rejected, or no mailbox"
//	disposable  "throwaway or temporary provider"
//	unknown     "could not be determined (temporary failure or timeout)"
//	spamtrap    "known trap address"
var worldTruths = []truth{
	// The MX accepts the mailbox: valid.
	{"ann@shop.test", "valid", nil, map[string]bool{"syntax": true, "mx": true, "is_catch_all": false, "is_disposable": false}},
	// The MX refuses it as unknown (550 5.1.1): invalid, no mailbox.
	// Decision: the reason is mailbox_not_found.
	{"zed@shop.test", "invalid", []string{"mailbox_not_found"}, map[string]bool{"syntax": true, "mx": true}},
	// The domain does not exist: invalid. Decision: domain_not_found;
	// §2.5 mx: "an MX host was resolved for the domain" (none was).
	{"x@gone.test", "invalid", []string{"domain_not_found"}, map[string]bool{"mx": false}},
	// The domain accepts every local part: risky, "accept-all".
	{"any@catch.test", "risky", nil, map[string]bool{"is_catch_all": true, "syntax": true, "mx": true}},
	// A role address.
	{"info@shop.test", "", nil, map[string]bool{"is_role_based": true}},
	// A disposable provider (mailinator.com).
	{"x@mailinator.com", "disposable", nil, map[string]bool{"is_disposable": true}},
	// The MX refuses the connection: could not be determined.
	{"x@refused.test", "unknown", []string{"connection_error", "timeout"}, nil},
	// A known trap (the operator's spamtrap list names traps.test).
	{"x@traps.test", "spamtrap", nil, nil},
	// A free mailbox provider (the operator's free list names
	// freemail.test) whose MX accepts the mailbox.
	{"ann@freemail.test", "valid", nil, map[string]bool{"is_free_provider": true}},
}

// truthProblems lists how a verdict, reason and flags differ from tr.
func truthProblems(tr truth, status, reason string, flags map[string]any) []string {
	var bad []string
	if tr.status != "" && status != tr.status {
		bad = append(bad, fmt.Sprintf("status %q, want %q", status, tr.status))
	}
	if tr.reasons != nil && !contains(tr.reasons, reason) {
		bad = append(bad, fmt.Sprintf("reason %q, want one of %q", reason, tr.reasons))
	}
	for k, want := range tr.flags {
		if got, ok := flags[k].(bool); !ok || got != want {
			bad = append(bad, fmt.Sprintf("%s is %v, want %v", k, flags[k], want))
		}
	}
	return bad
}

// TestSpec2_1ValidationRequestRules checks the body rules of POST
// /v1/validate.
//
// §2.1: email "string, email format", "yes" (required), "max 320
// characters"; cache "boolean", "no"; "No other properties are
// allowed." §4.1: "400: invalid body (details.issues)". §7:
// "issues (array of items with path and message) for validation".
//
// Decision: missing, non-string, empty or over-320 email, an email
// without "@", an unknown property and a non-boolean cache are 400 with
// details.issues; an address that has "@" but is otherwise malformed is
// judged by the engine: a 200 receipt, status invalid, checks.reason
// syntax_error, checks.syntax false.
func TestSpec2_1ValidationRequestRules(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	c := newClient(t, a.mint(t))
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." +
		strings.Repeat("d", 63) + "." + strings.Repeat("e", 53) + ".gone.test"
	if len(long) != 320 {
		t.Fatalf("test bug: %d characters", len(long))
	}
	for _, tc := range []struct{ name, body string }{
		{"no email", `{}`},
		{"email null", `{"email":null}`},
		{"email a number", `{"email":42}`},
		{"email an array", `{"email":["ann@shop.test"]}`},
		{"email empty", `{"email":""}`},
		{"email without @", `{"email":"ann.shop.test"}`},
		{"email of 321 characters", `{"email":"a` + long + `"}`},
		{"another property", `{"email":"ann@shop.test","colour":"blue"}`},
		{"cache a string", `{"email":"ann@shop.test","cache":"true"}`},
		{"cache a number", `{"email":"ann@shop.test","cache":1}`},
		{"cache null", `{"email":"ann@shop.test","cache":null}`},
		{"body an array", `[{"email":"ann@shop.test"}]`},
		{"body not JSON", `email=ann@shop.test`},
		{"body empty", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c.post("/v1/validate", tc.body).wantError(t, 400, "BAD_REQUEST")
			if err := issuesErr(d); err != nil {
				t.Errorf("%v: %v", err, d)
			}
		})
	}
	// Nothing above was charged.
	if got := balance(t, c); got != 100 {
		t.Errorf("balance %d after refused bodies, want 100", got)
	}
	t.Run("320 characters is allowed", func(t *testing.T) {
		_, m := validate(t, c, long)
		if p := receiptProblems(m); len(p) > 0 {
			t.Error(p)
		}
	})
	t.Run("cache true and false are allowed", func(t *testing.T) {
		for _, b := range []string{`{"email":"ann@shop.test","cache":false}`, `{"email":"ann@shop.test","cache":true}`} {
			c.post("/v1/validate", b).want(t, 200)
		}
	})
	t.Run("malformed address with @ is a receipt", func(t *testing.T) {
		for _, e := range []string{"bad address@shop.test", "ann@@shop.test", "@shop.test", "ann@"} {
			_, m := validate(t, c, e)
			checks := obj(m["checks"])
			if m["status"] != "invalid" || checks["reason"] != "syntax_error" || checks["syntax"] != false {
				t.Errorf("%s: status %v, reason %v, syntax %v; want invalid, syntax_error, false", e, m["status"], checks["reason"], checks["syntax"])
			}
			if p := receiptProblems(m); len(p) > 0 {
				t.Errorf("%s: %v", e, p)
			}
		}
	})
}

// issuesErr checks details.issues: §7 "issues (array of items with path
// and message)".
func issuesErr(d map[string]any) error {
	is, ok := d["issues"].([]any)
	if !ok || len(is) == 0 {
		return fmt.Errorf("details.issues is not a non-empty array")
	}
	for _, i := range is {
		m := obj(i)
		if _, ok := m["path"].(string); !ok {
			return fmt.Errorf("issue %v has no string path", show(i))
		}
		if msg, ok := m["message"].(string); !ok || msg == "" {
			return fmt.Errorf("issue %v has no message", show(i))
		}
	}
	return nil
}

// issuePaths are the paths of details.issues.
func issuePaths(d map[string]any) []string {
	var ps []string
	is, _ := d["issues"].([]any)
	for _, i := range is {
		if p, ok := obj(i)["path"].(string); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// balance is GET /v1/balance's credits.
func balance(t testing.TB, c *client) int64 {
	t.Helper()
	r := c.get("/v1/balance").want(t, 200)
	return mustInt(t, r.obj(t)["credits"], "credits")
}

// TestSpec2_4ReceiptFields checks every receipt's fields and types.
//
// §2.4: "All of these are top-level fields. kid and sig are not
// nested." "All fields of the receipt are required." score "integer", "0
// to 100"; probed_at "ISO 8601 UTC with milliseconds". §2.5 "Required
// keys: syntax, mx, is_disposable, is_role_based, is_free_provider,
// is_catch_all, auth."; reason "checks.reason enumeration", "optional".
// §2.6 the auth keys' types, "All keys are optional."
//
// Decision: a key with no value is omitted, never null: a receipt holds
// no null anywhere.
func TestSpec2_4ReceiptFields(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	c := newClient(t, a.mint(t))
	for _, tr := range worldTruths {
		t.Run(tr.email, func(t *testing.T) {
			r, m := validate(t, c, tr.email)
			for _, p := range receiptProblems(m) {
				t.Error(p)
			}
			if bytes.Contains(r.body, []byte("null")) {
				if path := findNull(m, ""); path != "" {
					t.Errorf("%s is null: an optional key without a value must be left out: %s", path, r)
				}
			}
			// §1.5 "Format: JSON, UTF-8"
			if mt := mediaType(r.header.Get("Content-Type")); mt != "application/json" {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
		})
	}
}

// findNull is the path of the first null in v, or "".
func findNull(v any, path string) string {
	switch v := v.(type) {
	case nil:
		return path
	case map[string]any:
		for k, e := range v {
			if p := findNull(e, strings.TrimPrefix(path+"."+k, ".")); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := findNull(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestSpec2_4ReceiptSignature checks that each receipt verifies, with the
// suite's own RFC 8785 and Ed25519, against the published key set, and
// that a changed receipt does not.
//
// §2.4 sig: "base64url Ed25519 signature over the canonical receipt: all
// keys sorted, sig itself omitted. It verifies against the published
// public key set identified by kid."
//
// Decision: the key set is at GET /.well-known/jwks.json and GET
// /v1/keys, without authentication.
func TestSpec2_4ReceiptSignature(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	c := newClient(t, a.mint(t))
	var receipts [][]byte
	for _, tr := range worldTruths {
		r, _ := validate(t, c, tr.email)
		receipts = append(receipts, r.body)
		if err := verifyReceipt(t, c, r.body); err != nil {
			t.Errorf("%s: %v\n%s", tr.email, err, r.body)
		}
	}
	// A cached receipt is signed too.
	r := c.post("/v1/validate", `{"email":"ann@shop.test","cache":true}`).want(t, 200)
	if err := verifyReceipt(t, c, r.body); err != nil {
		t.Errorf("cached receipt: %v\n%s", err, r.body)
	}

	// The two key set locations serve the same keys, without a key.
	anon := c.with("")
	wk := fetchKeys(t, anon, "/.well-known/jwks.json")
	v1 := fetchKeys(t, anon, "/v1/keys")
	if len(wk) != len(v1) {
		t.Errorf("/.well-known/jwks.json has %d keys, /v1/keys %d", len(wk), len(v1))
	}
	for kid, k := range wk {
		if !k.Equal(v1[kid]) {
			t.Errorf("kid %s differs between /.well-known/jwks.json and /v1/keys", kid)
		}
	}

	// Any change to any member breaks the signature.
	for _, change := range []struct {
		name string
		edit func(m map[string]any)
	}{
		{"score", func(m map[string]any) { m["score"] = json.Number("1") }},
		{"status", func(m map[string]any) { m["status"] = "invalid" }},
		{"email", func(m map[string]any) { m["email"] = "bob@shop.test" }},
		{"checks.mx", func(m map[string]any) { obj(m["checks"])["mx"] = false }},
		{"credits_remaining", func(m map[string]any) { m["credits_remaining"] = json.Number("100000") }},
		{"cached", func(m map[string]any) { m["cached"] = true }},
		{"a new member", func(m map[string]any) { m["note"] = "x" }},
	} {
		changed, err := parseJSON(receipts[0])
		if err != nil {
			t.Fatal(err)
		}
		change.edit(changed.(map[string]any))
		b, _ := json.Marshal(changed)
		if err := verifyReceipt(t, c, b); err == nil {
			t.Errorf("a receipt with %s changed still verifies: the check cannot fail", change.name)
		}
	}
}

// kidForm is §9's "a value of the form v1".
var kidForm = regexp.MustCompile(`^v[0-9]+$`)

// TestSpec2_4SigningKeyRotation rotates the signing key (with verifyctl,
// as the operator does) and checks that receipts signed before still
// verify and new ones name the new key. It runs alone (not parallel):
// receipts of other tests must not straddle the rotation.
//
// §2.4 sig: "It verifies against the published public key set
// identified by kid." §9: "The signing key in use is named by kid in
// each receipt".
//
// Decision: after `verifyctl signing-keys rotate` the old key stays
// published, so old receipts still verify, and new receipts carry the
// new kid.
func TestSpec2_4SigningKeyRotation(t *testing.T) {
	a := newAccount(t, "enterprise", 10)
	c := newClient(t, a.mint(t))
	before, m1 := validate(t, c, "ann@shop.test")
	if err := verifyReceipt(t, c, before.body); err != nil {
		t.Fatal(err)
	}
	ctl(t, "signing-keys", "rotate")
	after, m2 := validate(t, c, "ann@shop.test")
	if m1["kid"] == m2["kid"] {
		t.Errorf("kid %v before and after the rotation", m1["kid"])
	}
	keys := fetchKeys(t, c, "/.well-known/jwks.json")
	for _, m := range []map[string]any{m1, m2} {
		kid, _ := m["kid"].(string)
		if _, ok := keys[kid]; !ok {
			t.Errorf("kid %s is not published after the rotation", kid)
		}
		if !kidForm.MatchString(kid) {
			t.Errorf("kid %q is not of the form v1", kid)
		}
	}
	for _, r := range []*reply{before, after} {
		if err := verifyReceipt(t, c, r.body); err != nil {
			t.Errorf("%v\n%s", err, r.body)
		}
	}
}

// TestSpec2_3VerdictsFromTheWorld checks the verdict of each address of
// the world against the meaning table of §2.3 (worldTruths), including
// a host that greylists beyond the real-time budget.
//
// §2.3 unknown: "could not be determined (temporary failure or timeout)".
func TestSpec2_3VerdictsFromTheWorld(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	c := newClient(t, a.mint(t))
	all := append(worldTruths[:len(worldTruths):len(worldTruths)],
		// Greylisted for an hour: a temporary failure beyond the budget.
		truth{"ann@grey.test", "unknown", []string{"timeout", "connection_error"}, nil})
	for _, tr := range all {
		t.Run(tr.email, func(t *testing.T) {
			t.Parallel()
			_, m := validate(t, c, tr.email)
			checks := obj(m["checks"])
			s, _ := m["status"].(string)
			reason, _ := checks["reason"].(string)
			for _, p := range truthProblems(tr, s, reason, checks) {
				t.Errorf("%s: %s", tr.email, p)
			}
		})
	}
}

// TestSpec2_4ReceiptEmailCase checks that the case of an address does not
// change its verdict.
//
// Decision (§2.2 "Lower-cased and de-duplicated by the service" applied
// to single validations): a single /v1/validate gives the same verdict
// for any case of the address; the receipt's email echoes the local part
// as the client sent it, with the domain lower-cased.
func TestSpec2_4ReceiptEmailCase(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 100)
	c := newClient(t, a.mint(t))
	for _, tc := range []struct{ lower, local, domain string }{
		{"ann@shop.test", "Ann", "Shop.TEST"},
		{"ann@shop.test", "ANN", "shop.test"},
		{"zed@shop.test", "Zed", "SHOP.test"},
		{"x@gone.test", "X", "Gone.Test"},
	} {
		_, want := validate(t, c, tc.lower)
		spelled := tc.local + "@" + tc.domain
		_, got := validate(t, c, spelled)
		if got["status"] != want["status"] || obj(got["checks"])["reason"] != obj(want["checks"])["reason"] {
			t.Errorf("%s: %v/%v, but %s: %v/%v", spelled, got["status"], obj(got["checks"])["reason"],
				tc.lower, want["status"], obj(want["checks"])["reason"])
		}
		if e := tc.local + "@" + strings.ToLower(tc.domain); got["email"] != e {
			t.Errorf("%s: receipt email %v, want %s", spelled, got["email"], e)
		}
	}
}

// TestSpec4_1ValidateAnswer checks the 200 of POST /v1/validate beyond the
// receipt: the X-Credits-Remaining header.
//
// §4.1: "200: the service (2.4). Headers: X-Credits-Remaining (integer,
// balance after the validation; set on the fresh-probe path)".
func TestSpec4_1ValidateAnswer(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 30)
	c := newClient(t, a.mint(t))
	for i, e := range []string{"ann@shop.test", "x@gone.test", "any@catch.test"} {
		r, m := validate(t, c, e)
		h := r.header.Get("X-Credits-Remaining")
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			t.Fatalf("%s: X-Credits-Remaining %q is not an integer", e, h)
		}
		if want := int64(30 - 1 - i); n != want || mustInt(t, m["credits_remaining"], "credits_remaining") != want {
			t.Errorf("%s: X-Credits-Remaining %d, credits_remaining %v, want %d", e, n, m["credits_remaining"], want)
		}
		if r.header.Get("Idempotent-Replay") != "" {
			t.Errorf("%s: a first answer has Idempotent-Replay %q", e, r.header.Get("Idempotent-Replay"))
		}
	}
	if b := balance(t, c); b != 27 {
		t.Errorf("balance %d, want 27", b)
	}
}

// TestSpec9Versioning checks §9.
//
// §9: "All paths carry the major version prefix /v1." "The signing key in
// use is named by kid in each receipt (a value of the form v1 is used)."
// §1: "All API paths are under /v1."
//
// Decision: "of the form v1" is "v" and a number.
func TestSpec9Versioning(t *testing.T) {
	t.Parallel()
	a := newAccount(t, "enterprise", 10)
	c := newClient(t, a.mint(t))
	_, m := validate(t, c, "ann@shop.test")
	if kid, _ := m["kid"].(string); !kidForm.MatchString(kid) {
		t.Errorf("kid %q is not of the form v1", kid)
	}
	// The API is not served without the prefix.
	for _, p := range []struct{ method, path, body string }{
		{"POST", "/validate", `{"email":"ann@shop.test"}`},
		{"POST", "/batch", `{"emails":["ann@shop.test"]}`},
		{"GET", "/balance", ""},
		{"GET", "/results", ""},
		{"POST", "/v2/validate", `{"email":"ann@shop.test"}`},
	} {
		var body []byte
		if p.body != "" {
			body = []byte(p.body)
		}
		r := c.req(p.method, p.path, body)
		if r.status < 400 {
			t.Errorf("%s is served without the /v1 prefix", r)
		}
	}
	// The paths the API hands out are under /v1.
	r := c.post("/v1/batch", `{"emails":["x@gone.test"]}`).want(t, 202)
	acc := r.obj(t)
	if su, _ := acc["status_url"].(string); !strings.HasPrefix(su, "/v1/") {
		t.Errorf("status_url %q is not under /v1", su)
	}
	job := waitJob(t, c.key, acc["job_id"].(string))
	if ru, _ := job["results_url"].(string); !strings.HasPrefix(ru, "/v1/") {
		t.Errorf("results_url %q is not under /v1", ru)
	}
}
