package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
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
		"Ann@gmail.co":  {Email: "Ann@gmail.com", Reason: "tld_typo"},
		"ann@gmial.com": {Email: "ann@gmail.com", Reason: "domain_typo"},
		"ann@gmsil.com": nil, // receives mail
		"ann@gmail.com": nil,
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
