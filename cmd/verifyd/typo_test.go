package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
)

// TestDidYouMeanReceipt: a single validation whose domain takes no mail
// and is a typing slip of one that does carries did_you_mean, signed
// with the receipt (checked against the JWKS); the verdict stays the
// typed address's; a domain that receives mail gets none. The simulated
// world says which domains receive mail: gmail.com and gmsil.com do,
// gmail.co and gmial.com do not exist.
func TestDidYouMeanReceipt(t *testing.T) {
	run := startWorld(t, &world.World{
		Hosts: []*world.Host{{Name: "mx.gmail.com", IP: "127.71.1.1"}, {Name: "mx.gmsil.com", IP: "127.71.1.2"}},
		Domains: []*world.Domain{
			{Name: "gmail.com", MX: []world.MX{{Pref: 10, Host: "mx.gmail.com"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "gmsil.com", MX: []world.MX{{Pref: 10, Host: "mx.gmsil.com"}}, Mailboxes: map[string]world.MailboxState{"bob": world.MailboxOK}},
			{Name: "gmail.co", NXDomain: true},
			{Name: "gmial.com", NXDomain: true},
		},
	})
	in := startIn(t, t.TempDir(), worldConfig(run, "[rate_limits]\ndisabled = true\n"))
	c := &client{t: t, base: in.base, key: in.key}
	jwks := c.do("GET", "/.well-known/jwks.json", "", "").body
	for email, want := range map[string]*receipt.DidYouMean{
		"Ann@gmail.co":   {Email: "Ann@gmail.com", Reason: "tld_typo"},
		"ann@gmial.com":  {Email: "ann@gmail.com", Reason: "domain_typo"},
		"ann.@gmail.com": {Email: "ann@gmail.com", Reason: "local_part_typo"},
		"ann@gmsil.com":  nil, // receives mail
		"ann@gmail.com":  nil,
	} {
		r := c.do("POST", "/v1/validate", c.key, `{"email":"`+email+`"}`)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", email, r.status, r.body)
		}
		if _, err := receipt.Verify(r.body, jwks); err != nil {
			t.Fatalf("%s: the receipt's signature: %v", email, err)
		}
		var rec receipt.Receipt
		if err := json.Unmarshal(r.body, &rec); err != nil {
			t.Fatal(err)
		}
		switch {
		case want == nil && rec.DidYouMean != nil:
			t.Errorf("%s: did_you_mean %+v, want none", email, rec.DidYouMean)
		case want != nil && (rec.DidYouMean == nil || *rec.DidYouMean != *want):
			t.Errorf("%s: did_you_mean %+v, want %+v (receipt %s)", email, rec.DidYouMean, want, r.body)
		}
		if want != nil && (rec.Status == "valid" || rec.Status == "risky") {
			t.Errorf("%s: %s: a suggestion must not change the verdict", email, rec.Status)
		}
	}
	// A cache: true hit serves the suggestion with the cached receipt.
	r := c.do("POST", "/v1/validate", c.key, `{"email":"ann@gmial.com","cache":true}`)
	var rec receipt.Receipt
	if err := json.Unmarshal(r.body, &rec); err != nil || r.status != 200 {
		t.Fatalf("cache: true: %d %s %v", r.status, r.body, err)
	}
	if !rec.Cached || rec.DidYouMean == nil || rec.DidYouMean.Email != "ann@gmail.com" {
		t.Errorf("cache: true hit: cached %v, did_you_mean %+v", rec.Cached, rec.DidYouMean)
	}
	if _, err := receipt.Verify(r.body, jwks); err != nil {
		t.Errorf("the cached receipt's signature: %v", err)
	}
}

// TestDidYouMeanBatch: a batch job's suggestions are its own download,
// GET /v1/jobs/{id}/suggestions.csv (results.csv keeps spec §4.4's ten
// columns): the addresses with one, in upload order, with the address
// meant, the reason and the verdict; none for the others.
func TestDidYouMeanBatch(t *testing.T) {
	run := startWorld(t, &world.World{
		Hosts: []*world.Host{{Name: "mx.gmail.com", IP: "127.71.1.1"}, {Name: "mx.gmsil.com", IP: "127.71.1.2"}, {Name: "mx.yahoo.com", IP: "127.71.1.3"}},
		Domains: []*world.Domain{
			{Name: "gmail.com", MX: []world.MX{{Pref: 10, Host: "mx.gmail.com"}}, Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
			{Name: "yahoo.com", MX: []world.MX{{Pref: 10, Host: "mx.yahoo.com"}}, Mailboxes: map[string]world.MailboxState{"carol": world.MailboxOK}},
			{Name: "gmsil.com", MX: []world.MX{{Pref: 10, Host: "mx.gmsil.com"}}, Mailboxes: map[string]world.MailboxState{"bob": world.MailboxOK}},
			{Name: "gmail.co", NXDomain: true},
			{Name: "yahoo.con", NXDomain: true},
		},
	})
	in := startIn(t, t.TempDir(), batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	emails := []string{"ann@gmail.com", "dan@gmail.co", "bob@gmsil.com", "carol@yahoo.con", "zed@gmsil.com"}
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, emails, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, id, time.Minute)
	s := c.do("GET", "/v1/jobs/"+id+"/suggestions.csv", c.key, "")
	want := "email,did_you_mean,reason,status\r\n" +
		"dan@gmail.co,dan@gmail.com,tld_typo,invalid\r\n" +
		"carol@yahoo.con,carol@yahoo.com,tld_typo,invalid\r\n"
	if s.status != 200 || string(s.body) != want {
		t.Errorf("suggestions.csv: %d\n%s\nwant\n%s", s.status, s.body, want)
	}
	if cd := s.header.Get("Content-Disposition"); cd != `attachment; filename="job-`+id+`-suggestions.csv"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	// results.csv is unchanged: its ten columns.
	res := c.do("GET", "/v1/jobs/"+id+"/results.csv", c.key, "")
	if head, _, _ := strings.Cut(string(res.body), "\r\n"); head != "email,status,score,is_disposable,is_role_based,is_catch_all,is_free_provider,mx_host,latency_ms,probed_at" {
		t.Errorf("results.csv's header: %q", head)
	}
}

// TestDidYouMeanAccountDomains: once an account validated an address at
// its customer's domain, a slip of that domain is suggested to it, in a
// single validation and in a batch job, and not to another account (which
// never validated there); probe.did_you_mean = false turns suggestions
// off. The world says what takes mail: northwind.test does, its slips do
// not exist.
func TestDidYouMeanAccountDomains(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.northwindtraders.test", IP: "127.71.2.1"}},
		Domains: []*world.Domain{
			{Name: "northwindtraders.test", MX: []world.MX{{Pref: 10, Host: "mx.northwindtraders.test"}},
				Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK, "bob": world.MailboxOK}},
			{Name: "northwindtrders.test", NXDomain: true},
			{Name: "northwindtradrs.test", NXDomain: true},
			{Name: "gmail.co", NXDomain: true},
		},
	}
	run := startWorld(t, w)
	dir := t.TempDir()
	in := startIn(t, dir, batchConfig(run, "", ""))
	c := &client{t: t, base: in.base, key: in.key}
	dym := func(key, email string) string {
		t.Helper()
		r := c.do("POST", "/v1/validate", key, `{"email":"`+email+`"}`)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", email, r.status, r.body)
		}
		var rec receipt.Receipt
		if err := json.Unmarshal(r.body, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.DidYouMean == nil {
			return ""
		}
		return rec.DidYouMean.Email
	}
	if got := dym(c.key, "ann@northwindtrders.test"); got != "" {
		t.Errorf("before the account validated at northwindtraders.test: did_you_mean %q", got)
	}
	if got := dym(c.key, "ann@northwindtraders.test"); got != "" {
		t.Errorf("a valid address: did_you_mean %q", got)
	}
	// The account's domains were read (and found none) a moment ago: they
	// are read again after a minute. A second account reads its own now.
	ac := adminClient(t, in)
	acct, err := ac.CreateAccount(t.Context(), adminapi.CreateAccount{Name: "other", Plan: "enterprise", Credits: 10})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ac.MintKey(t.Context(), acct.ID, adminapi.MintKey{Scopes: []string{"validate:read", "validate:write"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := dym(other.Token, "bob@northwindtrders.test"); got != "" {
		t.Errorf("another account: did_you_mean %q, want none (it never validated at northwindtraders.test)", got)
	}
	stopVerifyd(t, in)

	// A restart starts with no account read: the history is what counts.
	in = startIn(t, dir, batchConfig(run, "", ""))
	c.base = in.base
	if got, want := dym(c.key, "bob@northwindtrders.test"), "bob@northwindtraders.test"; got != want {
		t.Errorf("after validating at northwindtraders.test: did_you_mean %q, want %q", got, want)
	}
	r := c.do("POST", "/v1/batch", c.key, batchBody(t, []string{"bob@northwindtraders.test", "carl@northwindtradrs.test"}, nil))
	if r.status != 202 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	id := r.json(t)["job_id"].(string)
	waitDone(t, c, c.key, id, time.Minute)
	s := c.do("GET", "/v1/jobs/"+id+"/suggestions.csv", c.key, "")
	if want := "email,did_you_mean,reason,status\r\ncarl@northwindtradrs.test,carl@northwindtraders.test,domain_typo,invalid\r\n"; string(s.body) != want {
		t.Errorf("suggestions.csv: %d\n%s\nwant\n%s", s.status, s.body, want)
	}
	stopVerifyd(t, in)

	// Turned off.
	in = startIn(t, dir, strings.Replace(batchConfig(run, "", ""), "[probe]\n", "[probe]\ndid_you_mean = false\n", 1))
	c.base = in.base
	for _, e := range []string{"bob@northwindtrders.test", "ann@gmail.co"} {
		if got := dym(c.key, e); got != "" {
			t.Errorf("probe.did_you_mean = false: %s: did_you_mean %q", e, got)
		}
	}
}
