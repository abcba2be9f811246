package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
)

// apiDoc is openapi.json, decoded, with its schemas compiled on demand.
type apiDoc struct {
	t        *testing.T
	paths    map[string]map[string]struct{ Responses map[string]apiResponse }
	compiler *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
	covered  map[string]bool // "METHOD path" exercised
}

type apiResponse struct {
	Content map[string]json.RawMessage `json:"content"`
}

func loadAPIDoc(t *testing.T, raw []byte) *apiDoc {
	t.Helper()
	var d struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct{ Responses map[string]apiResponse }
	}
	if err := json.Unmarshal(raw, &d); err != nil || !strings.HasPrefix(d.OpenAPI, "3.1.") {
		t.Fatalf("openapi.json: %v (openapi %q)", err, d.OpenAPI)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("file:///openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return &apiDoc{t: t, paths: d.Paths, compiler: c, cache: map[string]*jsonschema.Schema{}, covered: map[string]bool{}}
}

// pointer escapes a JSON pointer token (RFC 6901 §3).
func pointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// check validates one real answer against the documented operation:
// its status must be documented, its content type one of the
// documented ones, and a JSON body must validate against the schema.
func (d *apiDoc) check(method, tmpl string, status int, ctype string, body []byte) {
	d.t.Helper()
	m := strings.ToLower(method)
	op, ok := d.paths[tmpl][m]
	if !ok {
		d.t.Errorf("%s %s: not in openapi.json", method, tmpl)
		return
	}
	d.covered[method+" "+tmpl] = true
	code := fmt.Sprint(status)
	resp, ok := op.Responses[code]
	if !ok {
		d.t.Errorf("%s %s answered %d, which openapi.json does not list: %.300s", method, tmpl, status, body)
		return
	}
	if len(resp.Content) == 0 {
		if len(body) > 0 {
			d.t.Errorf("%s %s %d: a body where none is documented: %.200s", method, tmpl, status, body)
		}
		return
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	if _, ok := resp.Content[mt]; !ok {
		d.t.Errorf("%s %s %d: content type %q, documented %v", method, tmpl, status, ctype, slices.Sorted(maps.Keys(resp.Content)))
		return
	}
	if !strings.Contains(mt, "json") {
		return
	}
	loc := "file:///openapi.json#/paths/" + pointer(tmpl) + "/" + m + "/responses/" + code + "/content/" + pointer(mt) + "/schema"
	sch, ok := d.cache[loc]
	if !ok {
		var err error
		if sch, err = d.compiler.Compile(loc); err != nil {
			d.t.Fatalf("compile %s: %v", loc, err)
		}
		d.cache[loc] = sch
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		d.t.Errorf("%s %s %d: not JSON: %v: %.200s", method, tmpl, status, err, body)
		return
	}
	if err := sch.Validate(inst); err != nil {
		d.t.Errorf("%s %s %d: the answer does not match openapi.json: %v\n%.600s", method, tmpl, status, err, body)
	}
}

// TestOpenAPI: the document in the repository is what verifyd serves;
// every route of the router is documented and every documented route is
// routed; and real answers of every operation, errors included, validate
// against the documented schemas.
func TestOpenAPI(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "server", "openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	run := batchWorld(t, 0)
	dir := t.TempDir()
	in := startIn(t, dir, batchConfig(run, `retry_schedule = ["100ms"]
give_up_after = "500ms"
`, "")+inviteAuth)
	ctx := context.Background()
	ac := adminClient(t, in)
	doc := loadAPIDoc(t, raw)

	// The routes, both ways.
	var routes map[string][]string
	if err := ac.Do(ctx, http.MethodGet, "/v1/http-routes", nil, &routes); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for method, paths := range routes {
		for _, p := range paths {
			served[method+" "+p] = true
		}
	}
	documented := map[string]bool{}
	for p, ops := range doc.paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	var missing, extra []string
	for r := range served {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !served[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("routes served but not documented: %q\ndocumented but not served: %q", missing, extra)
	}

	// A session for the account surface; an operator, to see it all.
	acct := demoAccount(t, ac)
	iv, err := ac.CreateInvite(ctx, acct.ID, adminapi.CreateInvite{Role: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	var cookie, csrf string
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, tmpl, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, in.base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if cookie != "" {
			req.Header.Set("Cookie", "verifyd_session="+cookie)
		}
		if csrf != "" && method != "GET" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i+1] == "" {
				req.Header.Del(hdr[i])
			} else {
				req.Header.Set(hdr[i], hdr[i+1])
			}
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, c := range resp.Cookies() {
			if c.Name == "verifyd_session" {
				cookie = c.Value
			}
		}
		doc.check(method, tmpl, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		if strings.Contains(resp.Header.Get("Content-Type"), "json") && (resp.StatusCode == 200 || resp.StatusCode == 201) {
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				if tok, ok := m["csrf_token"].(string); ok {
					csrf = tok
				}
			}
		}
		return resp.StatusCode, b
	}
	key := "Bearer " + in.key
	bearer := func(method, tmpl, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		saved := cookie
		cookie = ""
		defer func() { cookie = saved }()
		return call(method, tmpl, path, body, append([]string{"Authorization", key}, hdr...)...)
	}
	pages := []string{"/dashboard", "/dashboard/validate", "/dashboard/batch", "/dashboard/history", "/dashboard/accuracy", "/dashboard/keys",
		"/dashboard/webhooks", "/dashboard/team", "/dashboard/settings", "/dashboard/operator", "/link"}

	// Signed out.
	call("GET", "/healthz", "/healthz", "")
	call("GET", "/readyz", "/readyz", "")
	if st, b := call("GET", "/openapi.json", "/openapi.json", ""); st != 200 || !bytes.Equal(b, raw) {
		t.Fatal("GET /openapi.json is not the repository's server/openapi/openapi.json")
	}
	call("GET", "/.well-known/jwks.json", "/.well-known/jwks.json", "")
	call("GET", "/v1/keys", "/v1/keys?alg=EdDSA", "")
	call("GET", "/v1/balance", "/v1/balance", "")
	call("POST", "/v1/validate", "/v1/validate", `{"email":"ann@shop.test"}`, "Authorization", "Bearer svc_live_nope")
	call("GET", "/auth/session", "/auth/session", "")
	call("POST", "/auth/login", "/auth/login", `{"email":"nobody@x.test","password":"wrong wrong wrong"}`)
	call("POST", "/auth/register", "/auth/register", `{"email":"x@x.test"}`)
	call("POST", "/auth/logout", "/auth/logout", "{}")
	call("GET", "/login", "/login", "")
	call("GET", "/docs", "/docs", "")
	call("GET", "/register", "/register?invitation=x", "")
	for _, p := range pages {
		call("GET", p, p, "")
	}
	call("GET", "/favicon.ico", "/favicon.ico", "")
	call("GET", "/", "/", "")
	call("GET", "/", "/", "", "Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	call("GET", "/assets/{name}", "/assets/nope.js", "")
	if st, _ := call("GET", "/dashboard/api/account", "/dashboard/api/account", ""); st != 401 {
		t.Fatalf("dashboard API signed out: %d", st)
	}

	// The API with a key.
	bearer("POST", "/v1/validate", "/v1/validate", `{"email":"ann@shop.test"}`)
	bearer("POST", "/v1/validate", "/v1/validate", `{"email":"ann@shop.test","extra":1}`)
	bearer("GET", "/v1/balance", "/v1/balance", "")
	bearer("GET", "/v1/results", "/v1/results?limit=1", "")
	bearer("GET", "/v1/results", "/v1/results?kind=nope", "")
	hook := webhooktest.New(t, 500)
	st, b := bearer("POST", "/v1/batch", "/v1/batch", batchBody(t, []string{"ann@shop.test", "bob@shop.test", "x@gone.test"}, map[string]any{"webhookUrl": hook.URL}))
	if st != 202 {
		t.Fatalf("batch: %d %s", st, b)
	}
	var job struct {
		ID string `json:"job_id"`
	}
	json.Unmarshal(b, &job)
	bearer("GET", "/v1/jobs/{id}/results.csv", "/v1/jobs/"+job.ID+"/results.csv", "")
	waitDone(t, &client{t: t, base: in.base}, in.key, job.ID, 30*time.Second)
	bearer("GET", "/v1/jobs/{id}", "/v1/jobs/"+job.ID, "")
	bearer("GET", "/v1/jobs/{id}", "/v1/jobs/00000000-0000-4000-8000-000000000000", "")
	bearer("GET", "/v1/jobs/{id}/results.csv", "/v1/jobs/"+job.ID+"/results.csv", "")
	bearer("GET", "/v1/jobs/{id}/suggestions.csv", "/v1/jobs/"+job.ID+"/suggestions.csv", "")
	bearer("GET", "/v1/jobs/{id}/suggestions.csv", "/v1/jobs/00000000-0000-4000-8000-000000000000/suggestions.csv", "")
	nd := []string{"Content-Type", "application/x-ndjson"}
	if st, b := bearer("POST", "/v1/outcomes", "/v1/outcomes", `{"event_id":"o1","email":"ann@shop.test","event":"delivered","time":"2030-01-01T00:00:00Z"}`+"\n", nd...); st != 200 {
		t.Fatalf("outcomes: %d %s", st, b)
	}
	bearer("POST", "/v1/outcomes", "/v1/outcomes", `{"event_id":"o2","email":"ann@shop.test","event":"opened"}`+"\n", nd...)
	bearer("POST", "/v1/outcomes", "/v1/outcomes", "x", "Content-Type", "text/plain")
	call("POST", "/v1/outcomes/{platform}", "/v1/outcomes/sendgrid?account=acct_nosuchaccount0000000", "[]")
	call("POST", "/v1/outcomes/{platform}", "/v1/outcomes/sendgrid", "[]")
	call("POST", "/v1/outcomes/{platform}", "/v1/outcomes/sparkpost?account=x", "[]")
	bearer("GET", "/v1/accuracy", "/v1/accuracy", "")
	bearer("GET", "/v1/accuracy", "/v1/accuracy?top=0", "")

	// The account surface.
	const pw = "a long enough password"
	if st, b := call("POST", "/auth/register", "/auth/register", `{"email":"ann@example.test","password":"`+pw+`","invitation":"`+iv.Token+`"}`); st != 201 {
		t.Fatalf("register: %d %s", st, b)
	}
	call("GET", "/auth/session", "/auth/session", "")
	call("POST", "/auth/link", "/auth/link", `{"invitation":"inv_nope"}`)
	call("POST", "/auth/password", "/auth/password", `{"current_password":"wrong wrong wrong","new_password":"another long password"}`)
	call("POST", "/auth/account", "/auth/account", `{"account":"acct_nope"}`)
	call("POST", "/auth/account", "/auth/account", `{"account":"`+acct.ID+`"}`)
	call("POST", "/v1/validate", "/v1/validate", `{"email":"ann@shop.test"}`, "X-CSRF-Token", "")
	call("POST", "/v1/validate", "/v1/validate", `{"email":"info@shop.test"}`)
	call("GET", "/dashboard/api/operator/egress", "/dashboard/api/operator/egress", "")
	call("GET", "/dashboard/api/operator/accuracy", "/dashboard/api/operator/accuracy?days=7", "")
	us, _ := ac.Users(ctx)
	if _, err := ac.SetOperator(ctx, us[0].ID, true); err != nil {
		t.Fatal(err)
	}
	if st, b := call("GET", "/dashboard/api/operator/accuracy", "/dashboard/api/operator/accuracy?days=7&top=3", ""); st != 200 {
		t.Fatalf("every account's accuracy: %d %s", st, b)
	}
	for _, p := range pages {
		call("GET", p, p, "")
	}
	call("GET", "/login", "/login?next=/dashboard/batch", "")
	st, b = call("GET", "/dashboard", "/dashboard", "")
	if m := regexp.MustCompile(`/assets/app\.[0-9a-f]+\.js`).Find(b); st != 200 || m == nil {
		t.Fatalf("overview: %d, no script in %.300s", st, b)
	} else {
		call("GET", "/assets/{name}", string(m), "")
	}
	const d = "/dashboard/api"
	for _, p := range []string{"/account", "/stats", "/jobs", "/members", "/invites", "/keys", "/webhook-secret",
		"/webhooks/outbox", "/webhooks/dead-letters", "/webhooks/attempts", "/operator/egress", "/operator/accounts"} {
		call("GET", d+p, d+p, "")
	}
	call("GET", d+"/stats", d+"/stats?days=400", "")
	_, b = call("POST", d+"/keys", d+"/keys", `{"scopes":["validate:read"],"label":"ci"}`)
	var k struct{ Prefix string }
	json.Unmarshal(b, &k)
	call("POST", d+"/keys", d+"/keys", `{"scopes":[]}`)
	call("POST", d+"/keys/{prefix}/revoke", d+"/keys/"+k.Prefix+"/revoke", "{}")
	call("POST", d+"/keys/{prefix}/revoke", d+"/keys/"+k.Prefix+"/revoke", "{}")
	call("POST", d+"/keys", d+"/keys", `{"scopes":["validate:read"]}`, "X-CSRF-Token", "wrong")
	_, b = call("POST", d+"/invites", d+"/invites", `{"role":"member","email":"bob@example.test"}`)
	var inv struct{ ID string }
	json.Unmarshal(b, &inv)
	call("POST", d+"/invites/{invite}/revoke", d+"/invites/"+inv.ID+"/revoke", "{}")
	call("POST", d+"/invites/{invite}/revoke", d+"/invites/nope/revoke", "{}")
	call("POST", d+"/members/{user}/role", d+"/members/"+us[0].ID+"/role", `{"role":"member"}`)
	call("POST", d+"/members/{user}/role", d+"/members/nope/role", `{"role":"member"}`)
	call("POST", d+"/members/{user}/role", d+"/members/"+us[0].ID+"/role", `{"role":"owner"}`)
	call("POST", d+"/webhook-secret/rotate", d+"/webhook-secret/rotate", "{}")
	call("POST", d+"/outcomes/delete", d+"/outcomes/delete", "{}")
	call("GET", d+"/outcome-settings", d+"/outcome-settings", "")
	call("POST", d+"/outcome-settings", d+"/outcome-settings", `{"mailgun_key":"key-1","postmark_user":"verifyd","postmark_password":"a long enough password"}`)
	call("POST", d+"/outcome-settings", d+"/outcome-settings", `{"sendgrid_key":"not a key"}`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, b := call("GET", d+"/webhooks/dead-letters", d+"/webhooks/dead-letters", "")
		var l struct{ Events []struct{ ID string } }
		json.Unmarshal(b, &l)
		if len(l.Events) == 1 {
			call("POST", d+"/webhooks/events/{id}/resend", d+"/webhooks/events/"+l.Events[0].ID+"/resend", "{}")
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
	}
	call("GET", d+"/webhooks/outbox", d+"/webhooks/outbox", "")
	call("GET", d+"/webhooks/attempts", d+"/webhooks/attempts?limit=5", "")
	call("POST", d+"/webhooks/events/{id}/resend", d+"/webhooks/events/nope/resend", "{}")
	call("POST", d+"/webhooks/test", d+"/webhooks/test", "{}")
	call("POST", d+"/webhooks/test", d+"/webhooks/test", `{"url":"http://elsewhere.test/"}`)
	call("POST", d+"/operator/egress/{addr}/drain", d+"/operator/egress/127.0.0.2/drain", "{}")
	call("POST", d+"/operator/egress/{addr}/enable", d+"/operator/egress/127.0.0.2/enable", "{}")
	call("POST", d+"/operator/egress/{addr}/drain", d+"/operator/egress/127.9.9.9/drain", "{}")
	call("POST", d+"/operator/egress/{addr}/enable", d+"/operator/egress/nope/enable", "{}")
	call("POST", d+"/operator/accounts/{id}/credits", d+"/operator/accounts/"+acct.ID+"/credits", `{"add":10,"note":"openapi test"}`)
	call("POST", d+"/operator/accounts/{id}/credits", d+"/operator/accounts/acct_nope/credits", `{"add":10}`)
	call("POST", "/v1/batch", "/v1/batch", `{"emails":["ann@shop.test"]}`)
	call("POST", "/auth/logout", "/auth/logout", "{}")
	call("POST", "/auth/login", "/auth/login", `{"email":"ann@example.test","password":"`+pw+`"}`)
	call("POST", "/auth/password", "/auth/password", `{"current_password":"`+pw+`","new_password":"another long password"}`)
	call("POST", "/auth/link", "/auth/link", `{"invitation":"inv_nope"}`)

	var notCovered []string
	for r := range documented {
		if !doc.covered[r] {
			notCovered = append(notCovered, r)
		}
	}
	sort.Strings(notCovered)
	if len(notCovered) > 0 {
		t.Errorf("documented operations no answer was checked against: %q", notCovered)
	}
}
