package probe

import (
	"context"
	"testing"
	"time"

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
			// A slip registered to catch mistyped mail: it takes mail,
			// and the disposable list has it.
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
		"ann@gmaill.com":   "ann@gmail.com", // takes mail, but on the disposable list
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
