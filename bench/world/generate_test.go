package world

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestGenerateCountsAndDeterminism(t *testing.T) {
	o := GenOptions{
		Domains: 2000, Seed: 7, CatchAll: 0.05, Greylist: 0.03, Tarpit: 0.01,
		NullMX: 0.01, NXDomain: 0.02, STARTTLS: 0.3, Auth: 0.5, RoleMailbox: true,
		Latency: Duration(100 * time.Millisecond),
	}
	w, exp, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Domains) != 2000 {
		t.Fatalf("domains = %d", len(w.Domains))
	}
	if len(exp) != 2000*10 {
		t.Fatalf("expectations = %d", len(exp))
	}
	count := map[Policy]int{}
	tarpit, nullMX, nx, tls := 0, 0, 0, 0
	for _, d := range w.Domains {
		count[d.Policy]++
		if d.NXDomain {
			nx++
		}
		if len(d.MX) == 1 && d.MX[0].Host == "." {
			nullMX++
		}
	}
	for _, h := range w.Hosts {
		if h.Mode == HostTarpit {
			tarpit++
		}
		if h.TLS != "" {
			tls++
		}
		if h.Latency.D() != 100*time.Millisecond {
			t.Fatalf("host %s latency %s", h.Name, h.Latency.D())
		}
	}
	if count[PolicyCatchAll] != 100 || count[PolicyGreylist] != 60 || tarpit != 20 || nullMX != 20 || nx != 40 {
		t.Fatalf("behaviour counts: %v tarpit=%d nullmx=%d nx=%d", count, tarpit, nullMX, nx)
	}
	if tls < len(w.Hosts)*25/100 || tls > len(w.Hosts)*35/100 {
		t.Fatalf("STARTTLS on %d of %d hosts, want about 30%%", tls, len(w.Hosts))
	}
	w2, exp2, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exp, exp2) || len(w2.Hosts) != len(w.Hosts) || w2.Hosts[5].IP != w.Hosts[5].IP {
		t.Fatal("same seed gave a different world")
	}
	o.Seed = 8
	_, exp3, _ := Generate(o)
	if reflect.DeepEqual(exp, exp3) {
		t.Fatal("another seed gave the same world")
	}
}

func TestGenerateExpectationMix(t *testing.T) {
	w, exp, err := Generate(GenOptions{
		Domains: 500, Seed: 3, CatchAll: 0.1, Greylist: 0.1, Reject: 0.1, Tarpit: 0.1,
		Refuse: 0.05, Busy: 0.05, NullMX: 0.05, NoMX: 0.05, ImplicitMX: 0.05, NXDomain: 0.05,
		ServFail: 0.05, MailboxFull: 0.05, MailboxDisabled: 0.05, RoleMailbox: true,
		DisposableDomains: []string{"mailinator.com"}, Spamtraps: []string{"trap@acme0.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	roles := 0
	for _, e := range exp {
		got[e.Status+"/"+e.Reason]++
		if e.Role {
			roles++
		}
		if e.Reason == ReasonCatchAll && !e.CatchAll {
			t.Fatalf("%s: catch_all flag %v with reason %s", e.Email, e.CatchAll, e.Reason)
		}
	}
	for _, want := range []string{
		"valid/ok", "invalid/mailbox_not_found", "risky/catch_all", "unknown/smtp_rejected",
		"unknown/timeout", "unknown/connection_error", "invalid/no_mx_record",
		"invalid/domain_not_found", "invalid/smtp_rejected", "risky/smtp_rejected",
		"disposable/disposable_domain", "spamtrap/", "valid/role_based",
	} {
		if got[want] == 0 {
			t.Errorf("no expectation %s in %v", want, got)
		}
	}
	if roles != 501 {
		t.Errorf("role addresses = %d, want one per domain (501)", roles)
	}
	if d := w.Domain("MAILINATOR.COM."); d == nil || len(d.MX) != 1 {
		t.Errorf("disposable domain not made: %+v", d)
	}
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	_, _, err := Generate(GenOptions{CatchAll: 0.7, Greylist: 0.6, Tarpit: -0.1, MailboxesPerDomain: 20})
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"add up to", "tarpit fraction", "mailboxes per domain"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

func TestExpectTable(t *testing.T) {
	w := &World{
		Hosts: []*Host{
			{Name: "mx.ok.test", IP: "127.9.0.1"},
			{Name: "mx.dead.test", IP: "127.9.0.2", Mode: HostRefuse},
			{Name: "mx2.dead.test", IP: "127.9.0.3"},
			{Name: "mx.pit.test", IP: "127.9.0.4", Mode: HostTarpit},
			{Name: "a.implicit.test", IP: "127.9.0.5"},
		},
		Domains: []*Domain{
			{Name: "ok.test", MX: []MX{{10, "mx.ok.test"}}, Mailboxes: map[string]MailboxState{"ann": MailboxOK, "full": MailboxFull, "off": MailboxDisabled, "grey": MailboxGreylist}},
			{Name: "fallback.test", MX: []MX{{20, "mx2.dead.test"}, {10, "mx.dead.test"}}, Mailboxes: map[string]MailboxState{"bob": MailboxOK}},
			{Name: "alldead.test", MX: []MX{{10, "mx.dead.test"}}},
			{Name: "pit.test", MX: []MX{{10, "mx.pit.test"}}},
			{Name: "catch.test", MX: []MX{{10, "mx.ok.test"}}, Policy: PolicyCatchAll},
			{Name: "block.test", MX: []MX{{10, "mx.ok.test"}}, Policy: PolicyReject},
			{Name: "null.test", MX: []MX{{0, "."}}},
			{Name: "bare.test"},
			{Name: "implicit.test", A: []string{"127.9.0.5"}, Mailboxes: map[string]MailboxState{"cy": MailboxOK}},
			{Name: "gone.test", NXDomain: true},
			{Name: "broken.test", DNSFault: DNSFaultServFail},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ email, status, reason string }{
		{"ann@ok.test", StatusValid, ReasonOK},
		{"ANN@OK.TEST", StatusValid, ReasonOK},
		{"grey@ok.test", StatusValid, ReasonOK},
		{"zed@ok.test", StatusInvalid, ReasonMailboxNotFound},
		{"full@ok.test", StatusRisky, ReasonSMTPRejected},
		{"off@ok.test", StatusInvalid, ReasonSMTPRejected},
		{"bob@fallback.test", StatusValid, ReasonOK},
		{"x@alldead.test", StatusUnknown, ReasonConnection},
		{"x@pit.test", StatusUnknown, ReasonTimeout},
		{"x@catch.test", StatusRisky, ReasonCatchAll},
		{"x@block.test", StatusUnknown, ReasonSMTPRejected},
		{"x@null.test", StatusInvalid, ReasonNoMX},
		{"x@bare.test", StatusInvalid, ReasonNoMX},
		{"cy@implicit.test", StatusValid, ReasonOK},
		{"x@gone.test", StatusInvalid, ReasonDomainNotFound},
		{"x@broken.test", StatusUnknown, ReasonConnection},
		{"x@elsewhere.test", StatusUnknown, ReasonConnection},
		{"nobody", StatusInvalid, ReasonSyntax},
	} {
		e := w.Expect(tc.email)
		if e.Status != tc.status || e.Reason != tc.reason {
			t.Errorf("Expect(%q) = %s/%s, want %s/%s", tc.email, e.Status, e.Reason, tc.status, tc.reason)
		}
	}
}

func TestWorldFileRoundTrip(t *testing.T) {
	w, exp, err := Generate(GenOptions{Domains: 50, Seed: 1, Auth: 1, CatchAll: 0.1, Latency: Duration(5 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wp, ep := filepath.Join(dir, "w.json"), filepath.Join(dir, "e.jsonl")
	if err := w.Save(wp); err != nil {
		t.Fatal(err)
	}
	if err := WriteExpectations(ep, exp); err != nil {
		t.Fatal(err)
	}
	w2, err := Load(wp)
	if err != nil {
		t.Fatal(err)
	}
	exp2, err := ReadExpectations(ep)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exp, exp2) {
		t.Fatal("expectations changed in the file")
	}
	if !reflect.DeepEqual(w.Domains, w2.Domains) || !reflect.DeepEqual(w.Hosts, w2.Hosts) {
		t.Fatal("world changed in the file")
	}
	for _, e := range exp {
		if got := w2.Expect(e.Email); got.Status != e.Status || got.Reason != e.Reason {
			t.Fatalf("%s: loaded world expects %s/%s, generated %s/%s", e.Email, got.Status, got.Reason, e.Status, e.Reason)
		}
	}
}

func TestParseRejectsUnknownFieldsAndBadValues(t *testing.T) {
	_, err := Parse([]byte(`{"hosts":[{"name":"mx.a.test","ip":"10.0.0.1","mode":"sleepy"}],"domains":[{"name":"a.test","polcy":"x"}]}`))
	if err == nil || !strings.Contains(err.Error(), "polcy") {
		t.Fatalf("unknown field not reported: %v", err)
	}
	_, err = Parse([]byte(`{"hosts":[{"name":"mx.a.test","ip":"10.0.0.1","mode":"sleepy"}],"domains":[{"name":"a.test","policy":"maybe"}]}`))
	for _, want := range []string{"not an IPv4 loopback", "unknown mode", "unknown policy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
