package probe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/probe/typo"
)

// TestDidYouMean: the engine suggests the address meant when the domain
// typed receives no mail (NXDOMAIN here) and a typing slip of it does
// (its MX routes), and never when the domain typed receives mail, even
// one slip from a provider, or when the candidate receives none either.
// The verdict stays what it is. The world is the oracle of what receives
// mail: gmail.com and two look-alikes with MX, nothing else.
func TestDidYouMean(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.gmail.com", IP: "127.82.0.1"}, {Name: "mx.gmsil.com", IP: "127.82.0.2"},
			{Name: "mx.ymail.co", IP: "127.82.0.3"}, {Name: "mx.gmaill.com", IP: "127.82.0.4"}},
		Domains: []*world.Domain{
			{Name: "gmail.com", MX: mx("mx.gmail.com"), Mailboxes: ok("ann")},
			// Slips that do not exist.
			{Name: "gmial.com", NXDomain: true},
			{Name: "gmail.co", NXDomain: true},
			{Name: "hotmail.con", NXDomain: true},
			// A real domain one slip from gmail.com (a beside s): it
			// receives mail, so ann@gmsil.com is what was meant, whatever
			// its verdict.
			{Name: "gmsil.com", MX: mx("mx.gmsil.com"), Mailboxes: ok("bob")},
			{Name: "ymail.co", MX: mx("mx.ymail.co"), Mailboxes: ok("ann")},
			// A slip registered to catch mistyped mail (a typo trap): it
			// takes mail, and the disposable list has it; it is never
			// corrected (the issue's "never suggest for a domain that
			// receives mail"): its verdict is disposable.
			{Name: "gmaill.com", MX: mx("mx.gmaill.com"), Policy: world.PolicyCatchAll},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, w, envOptions{})
	eng := e.engineWith(t, e.res, func(o *Options) { o.Typos = typo.Shipped() })
	for email, want := range map[string]string{
		"ann@gmial.com":    "ann@gmail.com", // NXDOMAIN, a transposition of gmail.com (and disposable-listed)
		"Ann.B@gmial.com":  "Ann.B@gmail.com",
		"ann@gmail.co":     "ann@gmail.com", // NXDOMAIN, a TLD slip
		"ann@gmaill.com":   "",              // takes mail (and is on the disposable list)
		"ann@hotmail.con":  "",              // hotmail.com receives no mail in this world
		"ann@gmsil.com":    "",              // receives mail (its mailbox does not exist: invalid, no suggestion)
		"ann@ymail.co":     "",              // receives mail
		"ann@gmail.com":    "",
		"ann@nothing.test": "",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := eng.Verify(ctx, email)
		cancel()
		got := ""
		if r.DidYouMean != nil {
			got = r.DidYouMean.Email
		}
		if got != want {
			t.Errorf("%s: did you mean %q (%s/%s), want %q", email, got, r.Status, r.Reason, want)
		}
		if email == "ann@gmail.co" && (r.Status != StatusInvalid || r.Reason != ReasonDomainNotFound) {
			t.Errorf("%s: %s/%s: a suggestion must not change the verdict (invalid/domain_not_found)", email, r.Status, r.Reason)
		}
	}
	// Without Typos: none.
	if r := e.engine.Verify(context.Background(), "ann@gmial.com"); r.DidYouMean != nil {
		t.Errorf("an engine without Options.Typos suggested %+v", r.DidYouMean)
	}
}

// TestDidYouMeanAccountTargets: an account's own domains (WithTypoTargets)
// are targets too, asked for only when a suggestion is looked for. A
// parked domain, which the parked-domain guidance (internet.nl's how-to)
// has publish a null MX (RFC 7505), takes no mail and gets a suggestion; one whose MX takes
// mail gets none.
func TestDidYouMeanAccountTargets(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.northwindtraders.com", IP: "127.82.1.1"}, {Name: "mx.parking.test", IP: "127.82.1.2"}},
		Domains: []*world.Domain{
			{Name: "northwindtraders.com", MX: mx("mx.northwindtraders.com"), Mailboxes: ok("ann")},
			{Name: "northwindtrders.com", NXDomain: true},
			// Parked as internet.nl's how-to says: null MX.
			{Name: "northwindtradres.com", MX: []world.MX{{Pref: 0, Host: "."}}},
			// Parked behind a service whose MX takes every address.
			{Name: "nortwindtraders.com", MX: mx("mx.parking.test"), Policy: world.PolicyCatchAll},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, w, envOptions{})
	eng := e.engineWith(t, e.res, func(o *Options) { o.Typos = typo.Shipped() })
	calls := 0
	targets := WithTypoTargets(context.Background(), func(context.Context) []string {
		calls++
		return []string{"northwindtraders.com", "example.test"}
	})
	// What a suggestion costs an address whose domain takes mail: no
	// look at the account's domains, no DNS query of a candidate (the
	// first validation here, so nothing is cached yet).
	before := e.run.DNS.Queries()
	if r := eng.Verify(targets, "ann@nortwindtraders.com"); r.DidYouMean != nil || calls != 0 {
		t.Errorf("a domain that takes mail: did you mean %+v, targets asked %d times", r.DidYouMean, calls)
	}
	for _, q := range []uint16{dns.TypeMX, dns.TypeA, dns.TypeAAAA} {
		if n := e.run.DNS.QueryCount("northwindtraders.com", q); n != 0 {
			t.Errorf("the candidate northwindtraders.com was looked up (%s: %d queries) for an address whose domain takes mail", dns.TypeToString[q], n)
		}
	}
	t.Logf("ann@nortwindtraders.com: %d DNS queries", e.run.DNS.Queries()-before)
	for _, c := range []struct {
		ctx         context.Context
		email, want string
		asked       bool
	}{
		{targets, "ann@northwindtrders.com", "ann@northwindtraders.com", true},
		{targets, "ann@northwindtradres.com", "ann@northwindtraders.com", true},
		{targets, "ann@nortwindtraders.com", "", false}, // receives mail
		{targets, "ann@northwindtraders.com", "", false},
		{context.Background(), "ann@northwindtrders.com", "", false},
	} {
		calls = 0
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		r := eng.Verify(ctx, c.email)
		cancel()
		got := ""
		if r.DidYouMean != nil {
			got = r.DidYouMean.Email
		}
		if got != c.want {
			t.Errorf("%s: did you mean %q (%s/%s), want %q", c.email, got, r.Status, r.Reason, c.want)
		}
		if (calls > 0) != c.asked {
			t.Errorf("%s: the account's targets asked %d times, want asked: %v", c.email, calls, c.asked)
		}
	}
}

// TestDidYouMeanLocalPart: stray dots in the local part (RFC 5322 allows
// a dot only between two other characters: the verdict is invalid
// syntax) of a large provider's address get the mailbox meant, by
// Google's and Microsoft's rules for a local part (letters, digits, dots
// between them); at any other domain, or when the provider's domain
// takes no mail, none.
func TestDidYouMeanLocalPart(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.gmail.com", IP: "127.82.2.1"}, {Name: "mx.outlook.com", IP: "127.82.2.2"}, {Name: "mx.shop.test", IP: "127.82.2.3"}},
		Domains: []*world.Domain{
			{Name: "gmail.com", MX: mx("mx.gmail.com"), Mailboxes: ok("ann")},
			{Name: "outlook.com", MX: mx("mx.outlook.com"), Mailboxes: ok("ann.lee")},
			{Name: "shop.test", MX: mx("mx.shop.test"), Mailboxes: ok("ann")},
			{Name: "gmial.com", NXDomain: true},
			{Name: "yahoo.com", NXDomain: true}, // in this world
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, w, envOptions{})
	eng := e.engineWith(t, e.res, func(o *Options) { o.Typos = typo.Shipped() })
	for email, want := range map[string]struct {
		email  string
		local  bool
		domain typo.Kind
	}{
		"ann.@gmail.com":       {"ann@gmail.com", true, ""},
		".ann@gmail.com":       {"ann@gmail.com", true, ""},
		"Ann..Lee@outlook.com": {"Ann.Lee@outlook.com", true, ""},
		"ann.@gmial.com":       {"ann@gmail.com", true, typo.Transposition}, // and the domain slipped
		"ann.@shop.test":       {},                                          // not a provider
		"ann.@yahoo.com":       {},                                          // the provider takes no mail here
		"ann@@gmail.com":       {},                                          // not a dot
		"...@gmail.com":        {},                                          // nothing left
	} {
		r := eng.Verify(context.Background(), email)
		if r.Status != StatusInvalid || r.Reason != ReasonSyntax {
			t.Errorf("%s: %s/%s, want invalid/syntax", email, r.Status, r.Reason)
		}
		switch d := r.DidYouMean; {
		case want.email == "" && d != nil:
			t.Errorf("%s: did you mean %+v, want none", email, d)
		case want.email != "" && (d == nil || d.Email != want.email || !d.Local || d.Slip != want.domain):
			t.Errorf("%s: did you mean %+v, want %s (local, slip %q)", email, d, want.email, want.domain)
		}
	}
	// A batch's addresses the same.
	rs := eng.VerifyDomain(context.Background(), []string{"ann.@gmail.com", "ann@gmail.com"}, netip.Addr{})
	if d := rs[0].DidYouMean; d == nil || d.Email != "ann@gmail.com" {
		t.Errorf("batch: ann.@gmail.com: did you mean %+v", d)
	}
	if rs[1].DidYouMean != nil {
		t.Errorf("batch: ann@gmail.com: did you mean %+v", rs[1].DidYouMean)
	}
}
