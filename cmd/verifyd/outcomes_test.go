package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
)

// outcomesWorld has a domain with a dozen mailboxes, a catch-all and an
// unknown domain.
func outcomesWorld(t *testing.T) *world.Running {
	t.Helper()
	boxes := map[string]world.MailboxState{"ann": world.MailboxOK, "bob": world.MailboxOK, "carl": world.MailboxOK}
	for i := range 10 {
		boxes[fmt.Sprintf("u%d", i)] = world.MailboxOK
	}
	return startWorld(t, &world.World{
		Hosts: []*world.Host{
			{Name: "mx.shop.test", IP: "127.73.0.1"},
			{Name: "mx.catch.test", IP: "127.73.0.2"},
		},
		Domains: []*world.Domain{
			{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}}, Mailboxes: boxes},
			{Name: "catch.test", MX: []world.MX{{Pref: 10, Host: "mx.catch.test"}}, Policy: world.PolicyCatchAll},
		},
	})
}

// jsonLines renders outcomes as POST /v1/outcomes' JSON lines.
func jsonLines(rows ...map[string]any) string {
	var b strings.Builder
	for _, r := range rows {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func ev(id, email, event, at string, extra ...any) map[string]any {
	m := map[string]any{"event_id": id, "email": email, "event": event, "time": at}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// TestOutcomesEndToEnd: outcomes posted with an outcomes:write key are
// matched to the account's verdicts and stored once each; the answer
// counts them. A "no such mailbox" bounce of an address verifyd called
// valid makes its next verdicts invalid, cached or fresh, with the
// evidence in the signed receipt; two such bounces of one domain make its
// valid addresses risky (catch_all) until deliveries outnumber them. Bad
// bodies are refused whole, each problem named by line.
func TestOutcomesEndToEnd(t *testing.T) {
	run := outcomesWorld(t)
	in := startIn(t, t.TempDir(), worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	minted, err := ac.MintKey(context.Background(), acct.ID, adminapi.MintKey{Scopes: []string{"outcomes:write"}, Label: "sending platform"})
	if err != nil {
		t.Fatal(err)
	}
	okey := minted.Token
	vkey, err := ac.MintKey(context.Background(), acct.ID, adminapi.MintKey{Scopes: []string{"validate:read", "validate:write"}})
	if err != nil {
		t.Fatal(err)
	}
	validate := func(email string, cache bool) map[string]any {
		t.Helper()
		r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":%q,"cache":%t}`, email, cache))
		if r.status != 200 {
			t.Fatalf("validate %s: %d %s", email, r.status, r.body)
		}
		if _, err := receipt.Verify(r.body, c.do("GET", "/.well-known/jwks.json", "", "").body); err != nil {
			t.Fatalf("receipt of %s: %v\n%s", email, err, r.body)
		}
		return r.json(t)
	}
	post := func(key, ctype, body string) reply {
		t.Helper()
		return c.do("POST", "/v1/outcomes", key, body, "Content-Type", ctype)
	}

	for _, e := range []string{"ann@shop.test", "bob@shop.test", "carl@shop.test", "zed@shop.test", "any@catch.test"} {
		validate(e, false)
	}
	// The scopes keep apart: the outcomes key cannot validate, the
	// validation key cannot report outcomes.
	c.do("POST", "/v1/validate", okey, `{"email":"ann@shop.test"}`).wantError(t, 403, "FORBIDDEN")
	post(vkey.Token, "application/x-ndjson", jsonLines(ev("x", "ann@shop.test", "delivered", "2030-01-01T00:00:00Z"))).wantError(t, 403, "FORBIDDEN")

	// Times after the validations, whatever today is.
	// Outcomes happen now: after the verdicts they follow, before the
	// accuracy that counts them (which leaves out the future).
	at := func(int) string { return time.Now().UTC().Format(time.RFC3339Nano) }
	body := jsonLines(
		ev("e1", "ann@shop.test", "delivered", at(1)),
		ev("e2", "Bob@Shop.test", "hard_bounce", at(2), "smtp_code", 550, "enhanced_code", "5.1.1", "diagnostic", "550 5.1.1 <bob@shop.test>: Recipient address rejected: User unknown"),
		ev("e3", "zed@shop.test", "delivered", at(3)),
		ev("e4", "any@catch.test", "hard_bounce", at(4), "diagnostic", "smtp; 550 5.1.1 user unknown"),
		ev("e5", "nobody@elsewhere.test", "soft_bounce", at(5)),
	)
	r := post(okey, "application/x-ndjson", body)
	if r.status != 200 {
		t.Fatalf("POST /v1/outcomes: %d %s", r.status, r.body)
	}
	want := `{"received":5,"stored":5,"duplicates":0,"matched":4,"unmatched":1,"bounced":2,"false_negatives":1}`
	if string(r.body) != want {
		t.Fatalf("summary %s, want %s", r.body, want)
	}
	// The accuracy they measure.
	acc := c.do("GET", "/v1/accuracy?days=7", c.key, "")
	if acc.status != 200 {
		t.Fatalf("accuracy: %d %s", acc.status, acc.body)
	}
	var rep struct {
		Outcomes, Matched, Unmatched, FalseNegatives int
		Confusion                                    map[string]map[string]int
		PrecisionValid                               *float64                        `json:"precision_valid"`
		CatchAll                                     struct{ Outcomes, Bounced int } `json:"catch_all"`
		Reliability                                  []struct{ Deliverable, Bounced int }
	}
	if err := json.Unmarshal(acc.body, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Outcomes != 5 || rep.Matched != 4 || rep.Unmatched != 1 || rep.Confusion["valid"]["delivered"] != 1 ||
		rep.Confusion["valid"]["hard_bounce"] != 1 || rep.Confusion["invalid"]["delivered"] != 1 || rep.Confusion["risky"]["hard_bounce"] != 1 ||
		rep.PrecisionValid == nil || *rep.PrecisionValid != 0.5 || rep.CatchAll.Outcomes != 1 || rep.CatchAll.Bounced != 1 || len(rep.Reliability) != 10 {
		t.Fatalf("accuracy %s", acc.body)
	}
	c.do("GET", "/v1/accuracy?days=0", c.key, "").wantError(t, 400, "BAD_REQUEST")
	c.do("GET", "/v1/accuracy", okey, "").wantError(t, 403, "FORBIDDEN")
	// A retry stores nothing again.
	if r := post(okey, "application/x-ndjson", body); string(r.body) != `{"received":5,"stored":0,"duplicates":5,"matched":0,"unmatched":0,"bounced":0,"false_negatives":0}` {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}

	// Bob: the cached valid verdict is now invalid, and says why.
	m := validate("bob@shop.test", true)
	l, _ := m["learned"].(map[string]any)
	if m["status"] != "invalid" || m["cached"] != true || m["checks"].(map[string]any)["reason"] != "mailbox_not_found" ||
		l["kind"] != "address_bounced" || l["was"] != "valid" || l["enhanced_code"] != "5.1.1" || l["at"] == nil {
		t.Fatalf("cache: true after the bounce: %v", m)
	}
	// A fresh probe still sees bob accepted at RCPT; the bounce decides.
	m = validate("bob@shop.test", false)
	if l, _ := m["learned"].(map[string]any); m["status"] != "invalid" || m["cached"] != false || l["kind"] != "address_bounced" {
		t.Fatalf("a fresh probe after the bounce: %v", m)
	}
	// A batch job weighs the bounce the same way.
	r = c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"bob@shop.test", "ann@shop.test"}, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	job := waitDone(t, c, c.key, id, 60*time.Second)
	bd := job["breakdown"].(map[string]any)
	if inv := bd["invalid"].(map[string]any); inv["count"] != 1.0 || fmt.Sprint(inv["reasons"]) != "map[mailbox_not_found:1]" ||
		bd["valid"].(map[string]any)["count"] != 1.0 {
		t.Fatalf("the batch after bob's bounce: %v", bd)
	}
	// The catch-all's bounced address too (it was risky).
	if m := validate("any@catch.test", false); m["status"] != "invalid" {
		t.Fatalf("the catch-all's bounced address: %v", m)
	}
	// Ann delivered: still valid; one bounce does not make shop.test a
	// domain that bounces.
	if m := validate("ann@shop.test", false); m["status"] != "valid" || m["learned"] != nil {
		t.Fatalf("ann after one bounce of her domain: %v", m)
	}

	// A second "no such mailbox" bounce of shop.test: 2 of 3 outcomes.
	r = post(okey, "text/csv", "event_id,email,event,time,enhanced_code\ne6,carl@shop.test,hard_bounce,"+at(6)+",5.1.1\n")
	if r.status != 200 || !strings.Contains(string(r.body), `"bounced":1`) {
		t.Fatalf("CSV: %d %s", r.status, r.body)
	}
	m = validate("ann@shop.test", false)
	if l, _ := m["learned"].(map[string]any); m["status"] != "risky" || m["checks"].(map[string]any)["reason"] != "catch_all" ||
		m["checks"].(map[string]any)["is_catch_all"] != true || l["kind"] != "domain_bounces" || l["was"] != "valid" || l["bounced"] != 2.0 {
		t.Fatalf("ann after two bounces of her domain: %v", m)
	}
	// Evidence otherwise: ten deliveries to shop.test addresses verifyd
	// accepted bring the share of bounces under 0.2.
	var rows []map[string]any
	for i := range 10 {
		e := fmt.Sprintf("u%d@shop.test", i)
		validate(e, false) // risky now: still an accepted address
		rows = append(rows, ev(fmt.Sprintf("d%d", i), e, "delivered", at(10+i)))
	}
	if r := post(okey, "application/x-ndjson", jsonLines(rows...)); r.status != 200 || !strings.Contains(string(r.body), `"matched":10`) {
		t.Fatalf("deliveries: %d %s", r.status, r.body)
	}
	if m := validate("ann@shop.test", false); m["status"] != "valid" || m["learned"] != nil {
		t.Fatalf("ann after ten deliveries: %v", m)
	}

	// Bad bodies: refused whole, each problem named by its line.
	d := post(okey, "application/x-ndjson", jsonLines(
		ev("g1", "ann@shop.test", "delivered", at(30)),
		ev("", "ann@shop.test", "opened", "yesterday"),
	)+`{"event_id":"g3","email":"ann@shop.test","event":"delivered","time":"`+at(31)+`","colour":"red"}`+"\nnot json\n").wantError(t, 400, "BAD_REQUEST")
	issues := fmt.Sprint(d["issues"])
	for _, w := range []string{"lines[2].event_id", "lines[2].event", "lines[2].time", "lines[3]", "unknown field", "lines[4]"} {
		if !strings.Contains(issues, w) {
			t.Errorf("issues %s lack %s", issues, w)
		}
	}
	if r := post(okey, "application/x-ndjson", jsonLines(ev("g1", "ann@shop.test", "delivered", at(30)))); !strings.Contains(string(r.body), `"stored":1`) {
		t.Errorf("the valid line of a refused body was stored: %s", r.body)
	}
	d = post(okey, "text/csv", "event_id,email,event,when\ng9,ann@shop.test,delivered,"+at(32)+"\n").wantError(t, 400, "BAD_REQUEST")
	if !strings.Contains(fmt.Sprint(d["issues"]), "lines[1].when") {
		t.Errorf("an unknown CSV column: %v", d)
	}
	post(okey, "text/plain", "x").wantError(t, 400, "BAD_REQUEST")
	post(okey, "application/x-ndjson", "\n\n").wantError(t, 400, "BAD_REQUEST")
}

// TestCalibrationEndToEnd: once an account has enough outcomes, its
// scores are the measured probability of delivery: a catch-all address
// the engine scores 55 whose like bounced 6 times in 10 is scored 48
// (4 delivered of 10, drawn toward 0.545 by 10 pseudo-outcomes: 0.4725
// at the bucket's midpoint, 54.5), the receipt names the model and keeps
// the raw score, and GET /v1/accuracy shows the model.
func TestCalibrationEndToEnd(t *testing.T) {
	run := outcomesWorld(t)
	in := startIn(t, t.TempDir(), worldConfig(run, `[rate_limits]
disabled = true
[outcomes]
refit_every = "200ms"
calibration_min_outcomes = 20
`))
	c := &client{t: t, base: in.base, key: in.key}
	validate := func(email string) map[string]any {
		t.Helper()
		r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":%q}`, email))
		if r.status != 200 {
			t.Fatalf("validate %s: %d %s", email, r.status, r.body)
		}
		return r.json(t)
	}
	var rows []map[string]any
	for i := range 10 {
		e := fmt.Sprintf("u%d@shop.test", i)
		if m := validate(e); m["status"] != "valid" || m["calibration"] != nil {
			t.Fatalf("before any outcome: %v", m)
		}
		rows = append(rows, ev("v"+e, e, "delivered", time.Now().UTC().Format(time.RFC3339Nano)))
	}
	for i := range 10 {
		e := fmt.Sprintf("c%d@catch.test", i)
		if m := validate(e); m["status"] != "risky" || m["score"] != 55.0 {
			t.Fatalf("a catch-all address: %v", m)
		}
		event := "delivered"
		if i < 6 {
			event = "hard_bounce"
		}
		rows = append(rows, ev("c"+e, e, event, time.Now().UTC().Format(time.RFC3339Nano), "enhanced_code", "5.1.1"))
	}
	r := c.do("POST", "/v1/outcomes", c.key, jsonLines(rows...), "Content-Type", "application/x-ndjson")
	if r.status != 200 || !strings.Contains(string(r.body), `"matched":20`) {
		t.Fatalf("outcomes: %d %s", r.status, r.body)
	}
	// The next fit takes them (refit_every 200ms).
	var m map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m = validate("other@catch.test")
		if m["calibration"] != nil || time.Now().After(deadline) {
			break
		}
	}
	cal, _ := m["calibration"].(map[string]any)
	score, _ := m["score"].(float64)
	if cal == nil || cal["raw_score"] != 55.0 || cal["outcomes"] != 20.0 || !strings.HasSuffix(cal["model"].(string), "/20") ||
		score != 48 || m["status"] != "risky" {
		t.Fatalf("a calibrated receipt: score %v, calibration %v", m["score"], cal)
	}
	if _, err := receipt.Verify(c.do("POST", "/v1/validate", c.key, `{"email":"u1@shop.test"}`).body, c.do("GET", "/.well-known/jwks.json", "", "").body); err != nil {
		t.Fatal(err)
	}
	var acc struct {
		Calibration *struct {
			Model    string
			Outcomes int
			Scores   []int
		}
	}
	if err := json.Unmarshal(c.do("GET", "/v1/accuracy", c.key, "").body, &acc); err != nil {
		t.Fatal(err)
	}
	if acc.Calibration == nil || acc.Calibration.Outcomes != 20 || len(acc.Calibration.Scores) != 11 || acc.Calibration.Scores[10] < 90 {
		t.Fatalf("accuracy's calibration %+v", acc.Calibration)
	}
}

// TestFleetOutcomes: in a fleet, what one box learns the others use. An
// account's first outcomes, reported to box 1, make the bounced address
// invalid on box 0 within outcomes.domains_refresh (box 0 reads no
// evidence for an account it knows to have none, docs/outcomes.md); a
// later bounce counts on box 0 at once (the evidence is in the shared
// database, read for every validation of the account); the domain box 1
// found to bounce what it accepts reaches box 0 within
// outcomes.domains_refresh, and box 0 calibrates its scores on the
// outcomes box 1 stored.
func TestFleetOutcomes(t *testing.T) {
	run := outcomesWorld(t)
	dsn, _ := fleetDB(t)
	boxes := startBoxes(t, 2, dsn, worldConfig(run, "[rate_limits]\ndisabled = true\n[outcomes]\ndomains_refresh = \"200ms\"\n"+
		"refit_every = \"200ms\"\ncalibration_min_outcomes = 2\n"))
	key := boxes[0].key
	c0 := &client{t: t, base: boxes[0].base, key: key}
	c1 := &client{t: t, base: boxes[1].base, key: key}
	validate := func(c *client, email string) map[string]any {
		t.Helper()
		r := c.do("POST", "/v1/validate", key, fmt.Sprintf(`{"email":%q}`, email))
		if r.status != 200 {
			t.Fatalf("validate %s: %d %s", email, r.status, r.body)
		}
		return r.json(t)
	}
	for _, e := range []string{"ann@shop.test", "bob@shop.test", "carl@shop.test", "u0@shop.test"} {
		validate(c0, e)
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	r := c1.do("POST", "/v1/outcomes", key, jsonLines(
		ev("f1", "bob@shop.test", "hard_bounce", now(), "enhanced_code", "5.1.1"),
		ev("f2", "carl@shop.test", "hard_bounce", now(), "enhanced_code", "5.1.1"),
	), "Content-Type", "application/x-ndjson")
	if r.status != 200 || !strings.Contains(string(r.body), `"bounced":2`) {
		t.Fatalf("outcomes on box 1: %d %s", r.status, r.body)
	}
	reported := time.Now()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if m := validate(c0, "bob@shop.test"); m["status"] == "invalid" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("box 0 never learned bob bounced on box 1: %v", m)
		}
	}
	t.Logf("box 0 learned the account's first bounce %v after box 1 took it (domains_refresh 200ms)", time.Since(reported).Round(time.Millisecond))
	// The account has evidence now: a later bounce counts on box 0 at
	// once.
	if r := c1.do("POST", "/v1/outcomes", key, jsonLines(ev("f3", "u0@shop.test", "hard_bounce", now(), "enhanced_code", "5.1.1")),
		"Content-Type", "application/x-ndjson"); r.status != 200 {
		t.Fatalf("u0's outcome on box 1: %d %s", r.status, r.body)
	}
	if m := validate(c0, "u0@shop.test"); m["status"] != "invalid" {
		t.Fatalf("box 0 right after box 1 learned u0 bounced: %v", m)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := validate(c0, "ann@shop.test")
		if l, _ := m["learned"].(map[string]any); m["status"] == "risky" && l["kind"] == "domain_bounces" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("box 0 never learned what box 1 found of shop.test: %v", m)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := validate(c0, "carl@shop.test")
		if cal, _ := m["calibration"].(map[string]any); cal != nil && cal["outcomes"] == 2.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("box 0 never calibrated on the outcomes box 1 stored: %v", m)
		}
	}
}

// TestPlatformOutcomes: the sending platforms' webhooks, each checked by
// the platform's own scheme against the account's settings (set on the
// admin socket): a SendGrid bounce signed with the account's P-256 key
// is stored and learned from, the same body altered is refused; a
// Mailgun event with a good HMAC is taken once, its replay refused;
// Postmark with the right basic-auth password is taken, a wrong one
// refused; an unknown account and a platform the account has not set up
// answer 401 alike.
func TestPlatformOutcomes(t *testing.T) {
	run := outcomesWorld(t)
	in := startIn(t, t.TempDir(), worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	c := &client{t: t, base: in.base, key: in.key}
	ac := adminClient(t, in)
	acct := demoAccount(t, ac)
	for _, e := range []string{"ann@shop.test", "bob@shop.test"} {
		if r := c.do("POST", "/v1/validate", c.key, fmt.Sprintf(`{"email":%q}`, e)); r.status != 200 {
			t.Fatalf("validate: %d %s", r.status, r.body)
		}
	}
	sg, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&sg.PublicKey)
	sgKey, mgKey, pmPass := base64.StdEncoding.EncodeToString(der), "key-0123456789abcdef", "a long postmark password"
	set := map[string]any{"sendgrid_key": sgKey, "mailgun_key": mgKey, "postmark_user": "verifyd", "postmark_password": pmPass}
	var view adminapi.OutcomeSettings
	if err := ac.Do(context.Background(), "PUT", "/v1/accounts/"+acct.ID+"/outcome-settings", set, &view); err != nil {
		t.Fatal(err)
	}
	if !view.MailgunKeySet || !view.PostmarkPasswordSet || view.SendGridKey != sgKey || len(view.SESTopics) != 0 {
		t.Fatalf("settings %+v", view)
	}
	post := func(platform, account, body string, hdr ...string) reply {
		t.Helper()
		return c.do("POST", "/v1/outcomes/"+platform+"?account="+account, "", body, append([]string{"Content-Type", "application/json"}, hdr...)...)
	}

	// SendGrid: a hard bounce of bob, signed. Its time is whole seconds:
	// now, truncated, is then at least 1.1 s after the verdicts (and
	// Mailgun's event below, 0.75 s before now, after them too).
	time.Sleep(2100 * time.Millisecond)
	now := time.Now().Unix()
	body := fmt.Sprintf(`[{"email":"bob@shop.test","timestamp":%d,"event":"bounce","type":"bounce","status":"5.1.1","reason":"550 5.1.1 <bob@shop.test>: Recipient address rejected: User unknown","sg_event_id":"sg-1","sg_message_id":"m1"}]`, now)
	sign := func(body string) []string {
		ts := fmt.Sprint(now)
		h := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, sg, h[:])
		if err != nil {
			t.Fatal(err)
		}
		return []string{"X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig), "X-Twilio-Email-Event-Webhook-Timestamp", ts}
	}
	hdr := sign(body)
	post("sendgrid", acct.ID, strings.Replace(body, "bob@", "ann@", 1), hdr...).wantError(t, 401, "UNAUTHORIZED")
	post("sendgrid", acct.ID, body).wantError(t, 401, "UNAUTHORIZED")
	r := post("sendgrid", acct.ID, body, hdr...)
	if r.status != 200 || !strings.Contains(string(r.body), `"stored":1`) || !strings.Contains(string(r.body), `"bounced":1`) {
		t.Fatalf("sendgrid: %d %s", r.status, r.body)
	}
	if m := c.do("POST", "/v1/validate", c.key, `{"email":"bob@shop.test"}`).json(t); m["status"] != "invalid" {
		t.Fatalf("bob after SendGrid's bounce: %v", m)
	}

	// Mailgun: ann delivered; the same token again is a replay.
	mac := hmac.New(sha256.New, []byte(mgKey))
	fmt.Fprintf(mac, "%d%s", now, "token-1")
	mg := fmt.Sprintf(`{"signature":{"timestamp":"%d","token":"token-1","signature":"%x"},"event-data":{"event":"delivered","recipient":"ann@shop.test","timestamp":%d.25,"id":"mg-1","delivery-status":{"code":250,"message":"OK"}}}`,
		now, mac.Sum(nil), now-1) // a second earlier: after ann's verdict, before the accuracy below
	if r := post("mailgun", acct.ID, mg); r.status != 200 || !strings.Contains(string(r.body), `"matched":1`) {
		t.Fatalf("mailgun: %d %s", r.status, r.body)
	}
	post("mailgun", acct.ID, mg).wantError(t, 401, "UNAUTHORIZED")

	// Postmark: basic auth.
	pm := fmt.Sprintf(`{"RecordType":"Delivery","MessageID":"pm-1","Recipient":"ann@shop.test","DeliveredAt":%q,"Details":"smtp;250 2.0.0 OK"}`,
		time.Now().UTC().Format(time.RFC3339))
	auth := func(pw string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("verifyd:"+pw)) }
	post("postmark", acct.ID, pm, "Authorization", auth("the wrong password")).wantError(t, 401, "UNAUTHORIZED")
	if r := post("postmark", acct.ID, pm, "Authorization", auth(pmPass)); r.status != 200 || !strings.Contains(string(r.body), `"stored":1`) {
		t.Fatalf("postmark: %d %s", r.status, r.body)
	}

	// Refused alike: no such account, a platform not set up (SES), no
	// account at all; an unknown platform is not found.
	post("postmark", "acct_nosuchaccount0000000", pm, "Authorization", auth(pmPass)).wantError(t, 401, "UNAUTHORIZED")
	post("ses", acct.ID, `{"Type":"Notification"}`).wantError(t, 401, "UNAUTHORIZED")
	c.do("POST", "/v1/outcomes/postmark", "", pm, "Authorization", auth(pmPass)).wantError(t, 400, "BAD_REQUEST")
	post("sparkpost", acct.ID, "{}").wantError(t, 404, "NOT_FOUND")
	// The outcomes count as the account's.
	var acc struct{ Outcomes, Matched int }
	if err := json.Unmarshal(c.do("GET", "/v1/accuracy", c.key, "").body, &acc); err != nil || acc.Outcomes != 3 || acc.Matched != 3 {
		t.Fatalf("accuracy after the platforms' outcomes: %+v %v", acc, err)
	}
}
