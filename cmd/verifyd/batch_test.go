package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/webhook"
	"github.com/verifyd/verifyd/server/webhook/hookapi"
	"github.com/verifyd/verifyd/server/webhook/webhooktest"
	"github.com/verifyd/verifyd/storage"
	"github.com/verifyd/verifyd/storage/pebble"
)

// batchWorld is a small world for the batch tests, on its own loopback
// subnet: one domain of each kind a batch meets, and a greylisting one.
func batchWorld(t *testing.T, latency time.Duration) *world.Running {
	t.Helper()
	d := world.Duration(latency)
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.shop.test", IP: "127.72.0.1", Latency: d, Aliases: []string{"hooks.shop.test"}},
			{Name: "mx.catch.test", IP: "127.72.0.2", Latency: d},
			{Name: "mx.mailinator.com", IP: "127.72.0.3"},
			{Name: "mx.grey.test", IP: "127.72.0.4", Latency: d},
			{Name: "mx.gmail.com", IP: "127.72.0.5", Latency: d},
		},
		Domains: []*world.Domain{
			{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK, "info": world.MailboxOK}},
			{Name: "catch.test", MX: []world.MX{{Pref: 10, Host: "mx.catch.test"}}, Policy: world.PolicyCatchAll},
			{Name: "mailinator.com", MX: []world.MX{{Pref: 10, Host: "mx.mailinator.com"}}, Policy: world.PolicyCatchAll},
			{Name: "grey.test", MX: []world.MX{{Pref: 10, Host: "mx.grey.test"}}, Policy: world.PolicyGreylist,
				GreylistDelay: world.Duration(time.Second), Mailboxes: map[string]world.MailboxState{"dan": world.MailboxOK, "eve": world.MailboxOK}},
			{Name: "gone.test", NXDomain: true},
			// A provider and a slip of it that does not exist: did you mean.
			{Name: "gmail.com", MX: []world.MX{{Pref: 10, Host: "mx.gmail.com"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "gmail.co", NXDomain: true},
		},
	}
	return startWorld(t, w)
}

// hookPort is the receiver's port.
func hookPort(h *webhooktest.Receiver) string {
	_, p, _ := net.SplitHostPort(h.Listener.Addr().String())
	return p
}

// adminClient talks to the instance's admin socket.
func adminClient(t *testing.T, in *instance) *adminapi.Client {
	c := adminapi.NewClient(filepath.Join(in.dir, "data", "admin.sock"))
	t.Cleanup(c.Close)
	return c
}

// demoAccount is the account the first start created.
func demoAccount(t *testing.T, ac *adminapi.Client) adminapi.Account {
	t.Helper()
	as, err := ac.Accounts(context.Background())
	if err != nil || len(as) == 0 {
		t.Fatalf("accounts: %v, %v", as, err)
	}
	return as[0]
}

func batchBody(t *testing.T, emails []string, extra map[string]any) string {
	m := map[string]any{"emails": emails}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitDone polls GET /v1/jobs/{id} until the job has ended.
func waitDone(t *testing.T, c *client, key, id string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.do("GET", "/v1/jobs/"+id, key, "")
		if r.status != 200 {
			t.Fatalf("GET job: %d %s", r.status, r.body)
		}
		m := r.json(t)
		if st := m["status"]; st == "completed" || st == "failed" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not done in %v: %s", id, within, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func balance(t *testing.T, c *client, key string) int {
	t.Helper()
	m := c.do("GET", "/v1/balance", key, "").json(t)
	return int(m["credits"].(float64))
}

// batchConfig is the configuration of the batch tests, with more lines
// for [webhooks] and [jobs].
func batchConfig(run *world.Running, webhooks, jobs string) string {
	return worldConfig(run, `
[rate_limits]
disabled = true
[webhooks]
allow_private = true
timeout = "5s"
`+webhooks+`
[jobs]
retry_window = "30s"
`+jobs)
}

// TestBatchEndToEnd: a batch with duplicates and mixed case reserves the
// unique count (compared lower-cased; each kept in its first spelling), replays on its Idempotency-Key, completes, uses exactly
// its credits, and its CSV holds the world's expected verdicts; the
// webhook arrives once with a valid signature; another account gets 404.
func TestBatchEndToEnd(t *testing.T) {
	run := batchWorld(t, 0)
	in := startIn(t, t.TempDir(), batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	hook := webhooktest.New(t, 200)

	upload := []string{
		"Ann@Shop.test", "ann@shop.test", "ANN@SHOP.TEST", "info@shop.test", "zed@shop.test",
		"Any@Catch.test", "any@catch.test", `"john,doe"@catch.test`, `"say \"hi\""@catch.test`,
		"x@mailinator.com", "x@gone.test", "not an address@", "dan@grey.test", "Dan@Grey.test",
	}
	// Lower-cased and de-duplicated (spec §2.2), in the order of their
	// first place.
	unique := []string{"ann@shop.test", "info@shop.test", "zed@shop.test", "any@catch.test", `"john,doe"@catch.test`,
		`"say \"hi\""@catch.test`, "x@mailinator.com", "x@gone.test", "not an address@", "dan@grey.test"}
	body := batchBody(t, upload, map[string]any{"listName": "March signups", "webhookUrl": hook.URL + "/hooks/verifyd?token=t1"})
	r := c.do("POST", "/v1/batch", c.key, body, "Idempotency-Key", "batch-key-0001")
	if r.status != 202 {
		t.Fatalf("POST /v1/batch: %d %s", r.status, r.body)
	}
	acc := r.json(t)
	id, _ := acc["job_id"].(string)
	if !storage.ValidUUID(id) || acc["status"] != "queued" || acc["credits_reserved"] != float64(len(unique)) ||
		acc["status_url"] != "/v1/jobs/"+id || r.header.Get("Location") != "/v1/jobs/"+id {
		t.Fatalf("202 body %s (Location %q)", r.body, r.header.Get("Location"))
	}
	if p, _ := acc["progress"].(map[string]any); p["processed"] != 0.0 || p["total"] != float64(len(unique)) {
		t.Fatalf("progress %v", acc["progress"])
	}
	if b := balance(t, c, c.key); b != 1000-len(unique) {
		t.Errorf("balance after the reservation %d, want %d", b, 1000-len(unique))
	}
	// A replay returns the same job and reserves nothing more.
	again := c.do("POST", "/v1/batch", c.key, body, "Idempotency-Key", "batch-key-0001")
	if again.status != 202 || string(again.body) != string(r.body) || again.header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %s replay=%q", again.status, again.body, again.header.Get("Idempotent-Replay"))
	}
	c.do("POST", "/v1/batch", c.key, batchBody(t, upload[:3], nil), "Idempotency-Key", "batch-key-0001").wantError(t, 409, "CONFLICT")
	if b := balance(t, c, c.key); b != 1000-len(unique) {
		t.Errorf("balance after the replay %d, want %d", b, 1000-len(unique))
	}

	job := waitDone(t, c, c.key, id, 60*time.Second)
	if job["status"] != "completed" || job["started_at"] == nil || job["completed_at"] == nil ||
		job["results_url"] != "/v1/jobs/"+id+"/results.csv" || job["credits_reserved"] != float64(len(unique)) {
		t.Fatalf("completed job %v", job)
	}
	if p := job["progress"].(map[string]any); p["processed"] != float64(len(unique)) || p["total"] != float64(len(unique)) {
		t.Fatalf("progress %v", p)
	}
	for _, k := range []string{"job_id", "status", "progress", "credits_reserved", "created_at", "started_at", "completed_at", "results_url"} {
		if _, ok := job[k]; !ok {
			t.Errorf("job lacks %s", k)
		}
	}
	if b := balance(t, c, c.key); b != 1000-len(unique) {
		t.Errorf("balance after completion %d, want %d (one credit per address, nothing refunded)", b, 1000-len(unique))
	}
	led, err := ac.Ledger(context.Background(), acct.ID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range led.Entries {
		if e.Ref == id {
			kinds = append(kinds, fmt.Sprintf("%s %d", e.Kind, e.Amount))
		}
	}
	slices.Sort(kinds)
	if want := []string{fmt.Sprintf("reserve %d", len(unique)), fmt.Sprintf("use %d", len(unique))}; !slices.Equal(kinds, want) {
		t.Errorf("ledger entries of the job %q, want %q", kinds, want)
	}

	// The CSV.
	csvr := c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "")
	if csvr.status != 200 || !strings.HasPrefix(csvr.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(csvr.header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(csvr.header.Get("Content-Disposition"), `.csv"`) {
		t.Fatalf("results.csv: %d %v", csvr.status, csvr.header)
	}
	rows, err := csv.NewReader(strings.NewReader(string(csvr.body))).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, csvr.body)
	}
	if strings.Join(rows[0], ",") != "email,status,score,is_disposable,is_role_based,is_catch_all,is_free_provider,mx_host,latency_ms,probed_at" {
		t.Fatalf("header %q", rows[0])
	}
	if len(rows) != len(unique)+1 {
		t.Fatalf("%d rows, want %d", len(rows)-1, len(unique))
	}
	for i, row := range rows[1:] {
		email := row[0]
		if email != unique[i] {
			t.Errorf("row %d is %q, want %q (upload order)", i, email, unique[i])
		}
		want := run.World.Expect(email)
		switch {
		case strings.HasSuffix(email, "@mailinator.com"):
			want.Status = world.StatusDisposable
		}
		if row[1] != want.Status {
			t.Errorf("%s: status %s, want %s", email, row[1], want.Status)
		}
		for j := 3; j <= 6; j++ {
			if row[j] != "true" && row[j] != "false" {
				t.Errorf("%s: column %s is %q", email, rows[0][j], row[j])
			}
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", row[9]); err != nil {
			t.Errorf("%s: probed_at %q", email, row[9])
		}
		flag := func(col int, want bool) {
			if row[col] != strconv.FormatBool(want) {
				t.Errorf("%s: %s %s, want %v", email, rows[0][col], row[col], want)
			}
		}
		flag(3, email == "x@mailinator.com")
		flag(4, email == "info@shop.test")
		flag(5, strings.HasSuffix(email, "@catch.test"))
		if strings.HasSuffix(email, "@shop.test") && row[7] != "mx.shop.test" {
			t.Errorf("%s: mx_host %q", email, row[7])
		}
	}
	if !strings.Contains(string(csvr.body), "\"\"\"john,doe\"\"@catch.test\",risky,") {
		t.Errorf("a comma and quotes in an address are not quoted per RFC 4180:\n%s", csvr.body)
	}

	// The breakdown: every verdict, its count and its reasons, as the
	// rows and the world say.
	wantBreak := map[string]map[string]float64{}
	for _, st := range []string{"valid", "invalid", "risky", "unknown", "disposable", "spamtrap"} {
		wantBreak[st] = map[string]float64{}
	}
	for _, row := range rows[1:] {
		wantBreak[row[1]][rowReason(run, row)]++
	}
	gotBreak, _ := job["breakdown"].(map[string]any)
	if len(gotBreak) != len(wantBreak) {
		t.Fatalf("breakdown %v: want the %d verdicts", job["breakdown"], len(wantBreak))
	}
	for st, reasons := range wantBreak {
		v, _ := gotBreak[st].(map[string]any)
		var n float64
		for _, k := range reasons {
			n += k
		}
		if v["count"] != n || fmt.Sprint(v["reasons"]) != fmt.Sprint(reasons) {
			t.Errorf("breakdown of %s: %v; want count %v, reasons %v", st, v, n, reasons)
		}
	}
	if job["list_name"] != "March signups" {
		t.Errorf("list_name %v", job["list_name"])
	}

	// Filtered downloads: the rows of the verdicts asked, in upload order.
	fr := c.do("GET", "/v1/jobs/"+id+"/results.csv?status=valid,risky", c.key, "")
	if fr.status != 200 || !strings.Contains(fr.header.Get("Content-Disposition"), `filename="job-`+id+`-valid-risky.csv"`) {
		t.Fatalf("results.csv?status=valid,risky: %d %v %s", fr.status, fr.header, fr.body)
	}
	frows, err := csv.NewReader(strings.NewReader(string(fr.body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var wantRows [][]string
	for _, row := range rows[1:] {
		if row[1] == "valid" || row[1] == "risky" {
			wantRows = append(wantRows, row)
		}
	}
	if len(wantRows) == 0 || len(wantRows) == len(rows)-1 || !slices.EqualFunc(frows[1:], wantRows, slices.Equal) || !slices.Equal(frows[0], rows[0]) {
		t.Errorf("status=valid,risky gave\n%q\nwant the header and\n%q", frows, wantRows)
	}
	for _, q := range []string{"status=", "status=valid,", "status=VALID", "status=valid&status=risky", "format=xlsx"} {
		d := c.do("GET", "/v1/jobs/"+id+"/results.csv?"+q, c.key, "").wantError(t, 400, "BAD_REQUEST")
		if is, _ := d["issues"].([]any); len(is) != 1 {
			t.Errorf("results.csv?%s: details %v; want one issue", q, d)
		}
	}

	// History rows of kind batch, with the job id.
	h := c.do("GET", "/v1/results?kind=batch&limit=200", c.key, "").json(t)
	hrows := h["results"].([]any)
	if len(hrows) != len(unique) {
		t.Fatalf("%d batch history rows, want %d", len(hrows), len(unique))
	}
	for _, x := range hrows {
		if m := x.(map[string]any); m["kind"] != "batch" || m["job_id"] != id {
			t.Errorf("history row %v", m)
		}
	}

	// The webhook: once, signed with the account's secret.
	sec, err := ac.WebhookSecret(context.Background(), acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	// batch.completed arrives once; reputation.warning events (an egress
	// address hit the world's greylisting) may arrive too.
	completed := func() []webhooktest.Request {
		var out []webhooktest.Request
		for _, r := range hook.Requests() {
			if r.Header.Get("X-SVC-Event") == "batch.completed" {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, func() bool { return len(completed()) >= 1 })
	time.Sleep(500 * time.Millisecond)
	got := completed()
	if len(got) != 1 {
		t.Fatalf("%d batch.completed webhook requests, want 1", len(got))
	}
	for _, r := range hook.Requests() {
		if e := r.Header.Get("X-SVC-Event"); e != "batch.completed" && e != "reputation.warning" {
			t.Errorf("unexpected webhook event %q", e)
		}
		if !webhook.Verify(sec.Secret, r.Body, r.Header.Get("X-SVC-Signature")) {
			t.Errorf("%s: X-SVC-Signature does not verify", r.Header.Get("X-SVC-Event"))
		}
	}
	if !webhook.Verify(sec.Secret, got[0].Body, got[0].Header.Get("X-SVC-Signature")) {
		t.Errorf("X-SVC-Signature %q does not verify", got[0].Header.Get("X-SVC-Signature"))
	}
	var ev map[string]any
	if err := json.Unmarshal(got[0].Body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["event"] != "batch.completed" || ev["job_id"] != id || ev["processed"] != float64(len(unique)) ||
		ev["completed_at"] != job["completed_at"] || ev["results_url"] != job["results_url"] {
		t.Errorf("event %s (job %v)", got[0].Body, job)
	}
	if s := ev["successful"].(float64); s != float64(len(unique)) {
		t.Errorf("successful %v, want %d (no unknown verdict in this world)", s, len(unique))
	}
	if got[0].Header.Get("X-SVC-Event-Id") == "" || got[0].Header.Get("X-SVC-Timestamp") == "" {
		t.Errorf("headers %v", got[0].Header)
	}

	// Another account sees nothing; results before completion are 400.
	other, err := ac.CreateAccount(context.Background(), adminapi.CreateAccount{Name: "other", Plan: "enterprise", Credits: 10})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ac.MintKey(context.Background(), other.ID, adminapi.MintKey{Scopes: []string{"validate:read", "validate:write"}})
	if err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/jobs/"+id, ok.Token, "").wantError(t, 404, "NOT_FOUND")
	c.do("GET", "/v1/jobs/"+id+"/results.csv", ok.Token, "").wantError(t, 404, "NOT_FOUND")
	c.do("GET", "/v1/jobs/00000000-0000-4000-8000-000000000000", c.key, "").wantError(t, 404, "NOT_FOUND")
	c.do("GET", "/v1/jobs/not-a-uuid", c.key, "").wantError(t, 404, "NOT_FOUND")

	r = c.do("POST", "/v1/batch", ok.Token, batchBody(t, []string{"eve@grey.test"}, nil))
	if r.status != 202 {
		t.Fatalf("second job: %d %s", r.status, r.body)
	}
	grey := r.json(t)["job_id"].(string)
	d := c.do("GET", "/v1/jobs/"+grey+"/results.csv", ok.Token, "").wantError(t, 400, "BAD_REQUEST")
	if d["status"] != "queued" && d["status"] != "running" {
		t.Errorf("details %v", d)
	}
	if m := c.do("GET", "/v1/jobs/"+grey, ok.Token, "").json(t); m["results_url"] != nil || m["completed_at"] != nil {
		t.Errorf("a job in progress: %v", m)
	}
	waitDone(t, c, ok.Token, grey, 60*time.Second)

	// A batch result serves a later validation with cache: true, signed
	// then, and costs that validation's credit.
	before := balance(t, c, c.key)
	cv := c.do("POST", "/v1/validate", c.key, `{"email":"ANN@shop.test","cache":true}`)
	if m := cv.json(t); cv.status != 200 || m["cached"] != true || m["status"] != "valid" || m["email"] != "ANN@shop.test" {
		t.Fatalf("cache: true after the batch: %d %s", cv.status, cv.body)
	}
	verifyWithPython(t, c, cv.body)
	if b := balance(t, c, c.key); b != before-1 {
		t.Errorf("balance %d after a cached validation, want %d", b, before-1)
	}

	// Scope: a read-only key cannot post a batch.
	ro, _ := ac.MintKey(context.Background(), other.ID, adminapi.MintKey{Scopes: []string{"validate:read"}})
	if d := c.do("POST", "/v1/batch", ro.Token, batchBody(t, []string{"a@b.test"}, nil)).wantError(t, 403, "FORBIDDEN"); d["missingScope"] != "validate:write" {
		t.Errorf("403 details %v", d)
	}
}

// TestBatchRequestErrors: bodies the schema refuses, credits short, and a
// body over 8 MB refused from its Content-Length, before it is read.
func TestBatchRequestErrors(t *testing.T) {
	run := batchWorld(t, 0)
	in := startIn(t, t.TempDir(), batchConfig(run, "", "")+"[limits]\nbatch_max_emails = 1000\n")
	c := &client{t: t, base: in.base, key: in.key}
	for _, b := range []string{`{}`, `{"emails":[]}`, `{"emails":"a@b.test"}`, `{"emails":[1]}`, `{"emails":[""]}`,
		`{"emails":["a@b.test"],"x":1}`, `{"emails":["a@b.test"],"listName":"` + strings.Repeat("l", 201) + `"}`,
		`{"emails":["a@b.test"],"webhookUrl":"not a url"}`, `{"emails":["` + strings.Repeat("a", 321) + `"]}`, `nope`,
		`{"emails":["nope"]}`, `{"emails":["a@b.test"],"listName":"a\u0000b"}`, `{"emails":["a@b.test"],"listName":"\udc00"}`} {
		d := c.do("POST", "/v1/batch", c.key, b).wantError(t, 400, "BAD_REQUEST")
		if is, _ := d["issues"].([]any); len(is) == 0 {
			t.Errorf("%.60s: no details.issues: %v", b, d)
		}
	}
	// A body not declared JSON: 400, an issue naming Content-Type; two
	// Idempotency-Key lines: 400.
	if d := c.do("POST", "/v1/batch", c.key, `{"emails":["a@b.test"]}`, "Content-Type", "text/plain").wantError(t, 400, "BAD_REQUEST"); fmt.Sprint(d["issues"]) != fmt.Sprint([]any{map[string]any{"path": "Content-Type", "message": `must be application/json (optionally with charset=utf-8), not "text/plain"`}}) {
		t.Errorf("a body not declared JSON: details %v, want one issue about Content-Type", d)
	}
	req, _ := http.NewRequest("POST", in.base+"/v1/batch", strings.NewReader(`{"emails":["a@b.test"]}`))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", "batch-twice-0001")
	req.Header.Add("Idempotency-Key", "batch-twice-0002")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("two Idempotency-Key lines: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("u%d@shop.test", i)
	}
	c.do("POST", "/v1/batch", c.key, batchBody(t, many, nil)).wantError(t, 400, "BAD_REQUEST")

	// Insufficient credits: 1000 unique addresses against 1000 − 1.
	c.do("POST", "/v1/validate", c.key, `{"email":"ann@shop.test"}`)
	d := c.do("POST", "/v1/batch", c.key, batchBody(t, many[:1000], nil)).wantError(t, 400, "BAD_REQUEST")
	if d["currentCredits"] != 999.0 || d["needed"] != 1000.0 || d["deltaShortfall"] != 1.0 {
		t.Errorf("insufficient credits details %v", d)
	}
	if b := balance(t, c, c.key); b != 999 {
		t.Errorf("balance %d after a refused batch", b)
	}
	// Duplicates count once: 999 unique of 1000 rows fit.
	rows := append(slices.Clone(many[:999]), strings.ToUpper(many[0]))
	if r := c.do("POST", "/v1/batch", c.key, batchBody(t, rows, nil)); r.status != 202 || r.json(t)["credits_reserved"] != 999.0 {
		t.Fatalf("999 unique: %d %s", r.status, r.body)
	}
	// Insufficient credits are not recorded under an Idempotency-Key:
	// after a top-up, the retry with the same key is processed.
	short := batchBody(t, many[:10], nil)
	c.do("POST", "/v1/batch", c.key, short, "Idempotency-Key", "short-of-credits-1").wantError(t, 400, "BAD_REQUEST")
	ten := int64(10)
	ac := adminClient(t, in)
	if _, err := ac.AdjustCredits(context.Background(), demoAccount(t, ac).ID, adminapi.AdjustCredits{Add: &ten}); err != nil {
		t.Fatal(err)
	}
	if r := c.do("POST", "/v1/batch", c.key, short, "Idempotency-Key", "short-of-credits-1"); r.status != 202 || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("the retry after a top-up: %d %s (replay %q)", r.status, r.body, r.header.Get("Idempotent-Replay"))
	}

	// Over 8 MB: refused from the Content-Length, without the body.
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", c.key, 9<<20)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a 9 MB Content-Length without its body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"BAD_REQUEST"`) {
		t.Fatalf("9 MB body: %d %s", resp.StatusCode, b)
	}
}

// TestBatchWebhookRetriesAndDeadLetter: a receiver that always fails gets
// the event again on the (shortened) schedule until the window closes,
// then never again: the event is in the dead-letter queue.
func TestBatchWebhookRetriesAndDeadLetter(t *testing.T) {
	run := batchWorld(t, 0)
	dir := t.TempDir()
	in := startIn(t, dir, batchConfig(run, `retry_schedule = ["300ms", "600ms"]
give_up_after = "3s"
`, ""))
	c := &client{t: t, base: in.base, key: in.key}
	hook := webhooktest.New(t, 503)
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"ann@shop.test"}, map[string]any{"webhookUrl": hook.URL}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, id, 30*time.Second)
	// Wait for the dead-letter queue, not for a span of real time: on a
	// loaded machine every attempt may come late, never early.
	ac := adminClient(t, in)
	deadline := time.Now().Add(60 * time.Second)
	var created time.Time
	for {
		dl, err := hookapi.DeadLetters(context.Background(), ac, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(dl) == 1 {
			created = dl[0].CreatedAt
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not dead-lettered in 60 s; %d attempts", len(hook.Requests()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := hook.Requests()
	time.Sleep(time.Second)
	if n := len(hook.Requests()); n != len(got) {
		t.Fatalf("%d attempts after the event was dead-lettered", n-len(got))
	}
	// Attempts at 0, 0.3, 0.9, 1.5, 2.1, 2.7 s and a last one at 3 s:
	// every gap at least its scheduled delay, except the last, cut to
	// the window. Late attempts (a loaded machine) make fewer of them.
	if len(got) < 4 || len(got) > 7 {
		t.Fatalf("%d attempts, want 4 to 7", len(got))
	}
	for i := 1; i < len(got); i++ {
		gap := got[i].At.Sub(got[i-1].At)
		want := 600 * time.Millisecond
		if i == 1 {
			want = 300 * time.Millisecond
		}
		if i == len(got)-1 {
			if end := got[i].At.Sub(created); end < 3*time.Second-50*time.Millisecond {
				t.Errorf("last attempt %v after the event was created, before the 3 s window ends", end)
			}
			continue
		}
		if gap < want-50*time.Millisecond {
			t.Errorf("attempt %d came %v after the previous one, before its %v", i+1, gap, want)
		}
		if h := got[i].Header.Get("X-SVC-Delivery-Attempt"); h != strconv.Itoa(i+1) || got[i].Header.Get("X-SVC-Event-Id") != got[0].Header.Get("X-SVC-Event-Id") {
			t.Errorf("attempt %d: header %q, event id %q", i+1, h, got[i].Header.Get("X-SVC-Event-Id"))
		}
	}
	// Stop verifyd and read the dead-letter queue from its data.
	stopVerifyd(t, in)
	db, err := pebble.Open(filepath.Join(dir, "data", "db"), pebble.Options{PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dl, _ := db.DeadLetters(t.Context(), "", 0)
	if len(dl) != 1 || dl[0].Attempts != len(got) || dl[0].LastStatus != 503 || dl[0].Type != "batch.completed" {
		t.Fatalf("dead letters %+v", dl)
	}
	if out, _ := db.OutboxEvents(t.Context(), "", 0); len(out) != 0 {
		t.Errorf("outbox %+v", out)
	}
}

// stopVerifyd stops an instance with SIGTERM and waits for it.
func stopVerifyd(t *testing.T, in *instance) {
	t.Helper()
	in.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- in.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("verifyd exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("verifyd did not stop")
	}
}

// TestBatchSSRFGuard: with webhooks.allow_private off, a webhookUrl whose
// host is an internal address in any spelling a browser reads as one
// (literal, 127.1, 0x7f.1, 2130706433, localhost) is refused at POST time,
// no connection ever tried; a name that resolves (on resolver.upstreams,
// the world's DNS) to loopback is refused at delivery: the event is
// dead-lettered with the reason.
func TestBatchSSRFGuard(t *testing.T) {
	run := batchWorld(t, 0)
	dir := t.TempDir()
	in := startIn(t, dir, strings.Replace(batchConfig(run, "", ""), "allow_private = true", "allow_private = false", 1))
	c := &client{t: t, base: in.base, key: in.key}
	hook := webhooktest.New(t, 200)
	p := hookPort(hook)
	for _, u := range []string{"http://10.0.0.1/hook", "http://127.0.0.1:" + p + "/hook", "http://[::1]/x", "http://169.254.169.254/latest/meta-data/",
		"http://localhost:" + p + "/hook", "http://2130706433:" + p + "/", "http://0x7f.1:" + p + "/", "http://127.1:" + p + "/",
		"http://0177.0.0.1:" + p + "/", "http://api.localhost:" + p + "/"} {
		d := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"ann@shop.test"}, map[string]any{"webhookUrl": u})).wantError(t, 400, "BAD_REQUEST")
		is, _ := d["issues"].([]any)
		if len(is) != 1 || is[0].(map[string]any)["path"] != "webhookUrl" || !strings.Contains(is[0].(map[string]any)["message"].(string), "refused") {
			t.Errorf("%s: %v", u, d)
		}
	}
	if b := balance(t, c, c.key); b != 1000 {
		t.Errorf("refused uploads reserved credits: balance %d", b)
	}
	// hooks.shop.test is an alias of mx.shop.test (127.72.0.1) in the
	// world's DNS; the system resolver has never heard of it.
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"ann@shop.test"}, map[string]any{"webhookUrl": "http://hooks.shop.test:" + p + "/hook"}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	waitDone(t, c, c.key, r.json(t)["job_id"].(string), 30*time.Second)
	ac := adminClient(t, in)
	var dl []hookapi.Event
	waitFor(t, func() bool {
		var err error
		dl, err = hookapi.DeadLetters(context.Background(), ac, "", 0)
		return err == nil && len(dl) > 0
	})
	if len(dl) != 1 || !strings.Contains(dl[0].LastError, "loopback") || !strings.Contains(dl[0].LastError, "127.72.0.1") {
		t.Fatalf("dead letters %+v", dl)
	}
	if n := len(hook.Requests()); n != 0 {
		t.Fatalf("the receiver on loopback got %d requests through the guard", n)
	}
}

// crashWorld: 120 accepting domains with 10 mailboxes each and latency
// per reply, so that a 1,200-address job at low concurrency runs for
// seconds.
func crashWorld(t *testing.T, latency time.Duration) (*world.Running, []string) {
	t.Helper()
	w := &world.World{}
	var addrs []string
	for d := range 120 {
		host := fmt.Sprintf("mx.c%d.test", d)
		w.Hosts = append(w.Hosts, &world.Host{Name: host, IP: fmt.Sprintf("127.73.%d.%d", d/200, d%200+1), Latency: world.Duration(latency)})
		dom := &world.Domain{Name: fmt.Sprintf("c%d.test", d), MX: []world.MX{{Pref: 10, Host: host}}, Mailboxes: map[string]world.MailboxState{}}
		for m := range 10 {
			dom.Mailboxes[fmt.Sprintf("m%d", m)] = world.MailboxOK
			addrs = append(addrs, fmt.Sprintf("m%d@c%d.test", m, d))
		}
		w.Domains = append(w.Domains, dom)
	}
	return startWorld(t, w), addrs
}

// TestBatchCrashResume kills verifyd with SIGKILL in the middle of a job,
// restarts it, and shows that the job resumes where it stopped: every
// address ends with exactly one result, none judged before the kill is
// probed again (the world's session log has no RCPT for it after the
// restart), and the credits are settled once.
func TestBatchCrashResume(t *testing.T) {
	run, addrs := crashWorld(t, 25*time.Millisecond)
	dir := t.TempDir()
	cfg := batchConfig(run, "", "concurrency = 6\n")
	in := startIn(t, dir, cfg)
	c := &client{t: t, base: in.base, key: in.key}
	key := in.key
	hook := webhooktest.New(t, 200)
	ac := adminClient(t, in)
	more := int64(1000)
	if _, err := ac.AdjustCredits(context.Background(), demoAccount(t, ac).ID, adminapi.AdjustCredits{Add: &more}); err != nil {
		t.Fatal(err)
	}
	r := c.do("POST", "/v1/batch", key, batchBody(t, addrs, map[string]any{"webhookUrl": hook.URL}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitFor(t, func() bool {
		m := c.do("GET", "/v1/jobs/"+id, key, "").json(t)
		return m["progress"].(map[string]any)["processed"].(float64) >= float64(len(addrs))/4
	})
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	in.cmd.Wait()

	// What survived the kill.
	db, err := pebble.Open(filepath.Join(dir, "data", "db"), pebble.Options{PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := db.Job(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	judged := map[string]bool{}
	db.JobResults(t.Context(), id, func(r storage.Result) error { judged[r.Email] = true; return nil })
	db.Close()
	if mid.Status != storage.JobRunning || mid.Processed != len(judged) || mid.Processed == 0 || mid.Processed == len(addrs) {
		t.Fatalf("after the kill: %s, %d processed, %d results stored", mid.Status, mid.Processed, len(judged))
	}
	t.Logf("%d of %d addresses judged before the kill", len(judged), len(addrs))

	restart := time.Now()
	in2 := startIn(t, dir, cfg)
	c2 := &client{t: t, base: in2.base}
	job := waitDone(t, c2, key, id, 120*time.Second)
	if job["status"] != "completed" || job["progress"].(map[string]any)["processed"] != float64(len(addrs)) {
		t.Fatalf("resumed job %v", job)
	}
	for _, s := range run.Log().Sessions() {
		if s.Start.Before(restart) {
			continue
		}
		for _, rc := range s.Rcpts {
			if judged[strings.ToLower(rc.Addr)] {
				t.Fatalf("%s was judged before the kill and probed again after the restart", rc.Addr)
			}
		}
	}
	if b := balance(t, c2, key); b != 2000-len(addrs) {
		t.Errorf("balance %d, want %d: every address charged once", b, 2000-len(addrs))
	}
	csvr := c2.do("GET", "/v1/jobs/"+id+"/results.csv", key, "")
	rows, err := csv.NewReader(strings.NewReader(string(csvr.body))).ReadAll()
	if err != nil || len(rows) != len(addrs)+1 {
		t.Fatalf("CSV: %d rows, %v", len(rows)-1, err)
	}
	seen := map[string]bool{}
	for i, row := range rows[1:] {
		if row[0] != addrs[i] || seen[row[0]] || row[1] != "valid" {
			t.Fatalf("row %d: %q (want %s, valid, once)", i, row, addrs[i])
		}
		seen[row[0]] = true
	}
	waitFor(t, func() bool { return len(hook.Requests()) == 1 })
}

// TestBatchFairnessEndToEnd: a small job posted after a big one finishes
// while the big one is still running.
func TestBatchFairnessEndToEnd(t *testing.T) {
	run, addrs := crashWorld(t, 40*time.Millisecond)
	in := startIn(t, t.TempDir(), batchConfig(run, "", "concurrency = 3\n"))
	c := &client{t: t, base: in.base, key: in.key}
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, addrs[:900], nil))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	big := r.json(t)["job_id"].(string)
	waitFor(t, func() bool {
		return c.do("GET", "/v1/jobs/"+big, c.key, "").json(t)["status"] == "running"
	})
	r = c.do("POST", "/v1/batch", c.key, batchBody(t, addrs[1190:], nil))
	small := r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, small, 60*time.Second)
	m := c.do("GET", "/v1/jobs/"+big, c.key, "").json(t)
	p := m["progress"].(map[string]any)
	t.Logf("small job done; big job at %v of %v", p["processed"], p["total"])
	if m["status"] != "running" || p["processed"].(float64) > 0.75*p["total"].(float64) {
		t.Fatalf("the small job waited for the big one: %v", m)
	}
}
