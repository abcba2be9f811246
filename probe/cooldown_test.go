package probe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
)

// cooldownWorld: a greylister that keeps a pair waiting ten minutes, a
// host that refuses one client address by policy, a host that refuses
// every client by policy, and a host that answers every connection 421.
func cooldownWorld() *world.World {
	ok := map[string]world.MailboxState{"ann": world.MailboxOK, "bob": world.MailboxOK}
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.grey.test", IP: "127.81.0.1"},
			{Name: "mx.picky.test", IP: "127.81.0.2", BlockedClients: []string{"127.0.0.2"}},
			{Name: "mx.block.test", IP: "127.81.0.3"},
			{Name: "mx.busy.test", IP: "127.81.0.4", Mode: world.HostBusy},
		},
		Domains: []*world.Domain{
			{Name: "grey.test", MX: []world.MX{{Pref: 10, Host: "mx.grey.test"}}, Policy: world.PolicyGreylist,
				GreylistDelay: world.Duration(10 * time.Minute), Mailboxes: ok},
			{Name: "picky.test", MX: []world.MX{{Pref: 10, Host: "mx.picky.test"}}, Mailboxes: ok},
			{Name: "block.test", MX: []world.MX{{Pref: 10, Host: "mx.block.test"}}, Policy: world.PolicyReject, Mailboxes: ok},
			{Name: "busy.test", MX: []world.MX{{Pref: 10, Host: "mx.busy.test"}}, Mailboxes: ok},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		panic(err)
	}
	return w
}

// realtime validates email as POST /v1/validate does, with a 15 s budget,
// and reports whether the answer came before the budget ran out (the
// failure this guards against is waiting the budget out).
func realtime(t *testing.T, e *env, email string) (*Result, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	r := e.engine.Verify(ctx, email)
	t.Logf("%s: %s/%s in %v from %v", email, r.Status, r.Reason, time.Since(start).Round(time.Millisecond), r.Egress)
	return r, ctx.Err() == nil
}

// TestRealtimeKnownCooldown: a real-time validation that finds every
// usable egress address cooling for the MX beyond its budget answers at
// once (no session, the budget unspent), unknown with the reason of the
// cooldown's cause: timeout after greylisting, smtp_rejected after a policy
// block, connection_error after a busy host.
func TestRealtimeKnownCooldown(t *testing.T) {
	e := startEnv(t, cooldownWorld(), envOptions{egress: egress.Options{
		Addresses: egressPool[:2], GreylistCooldown: time.Minute, MaxCooldown: 30 * time.Minute}})
	for _, tc := range []struct {
		domain   string
		sessions int // the first validations' sessions: one per address
		reason   Reason
	}{
		{"grey.test", 2, ReasonTimeout},
		{"block.test", 2, ReasonSMTPRejected},
		{"busy.test", 2, ReasonConnection},
	} {
		e.run.Log().Reset()
		// The first validations cool both addresses for the MX.
		for _, local := range []string{"ann", "bob"} {
			if r, inBudget := realtime(t, e, local+"@"+tc.domain); r.Status != StatusUnknown || r.Reason != tc.reason || !inBudget {
				t.Fatalf("%s@%s: %s/%s, answered within the budget %v", local, tc.domain, r.Status, r.Reason, inBudget)
			}
		}
		e.run.Log().Wait(tc.sessions, 10*time.Second)
		before := e.run.Log().Len()
		// Both addresses cool for ten minutes or more: no session, an answer
		// at once, the cause as the reason, and when to come back.
		r, inBudget := realtime(t, e, "nobody@"+tc.domain)
		if r.Status != StatusUnknown || r.Reason != tc.reason || !inBudget || r.RetryAt.IsZero() {
			t.Errorf("nobody@%s with every address cooling: %s/%s, within the budget %v, retry at %v",
				tc.domain, r.Status, r.Reason, inBudget, r.RetryAt)
		}
		if n := e.run.Log().Len(); n != before {
			t.Errorf("nobody@%s: %d sessions made while every address was cooling", tc.domain, n-before)
		}
	}
}

// TestRealtimePolicyTriesAnotherAddress: a 5.7.x refusal is a block of
// the egress address, not an answer about the mailbox; a real-time
// validation asks again at once from another healthy address. A batch
// keeps deferring: it comes back later rather than spend addresses.
func TestRealtimePolicyTriesAnotherAddress(t *testing.T) {
	e := startEnv(t, cooldownWorld(), envOptions{egress: egress.Options{
		Addresses: egressPool[:2], GreylistCooldown: time.Minute, MaxCooldown: 30 * time.Minute}})
	r, inBudget := realtime(t, e, "ann@picky.test")
	if r.Status != StatusValid || !inBudget || r.Egress != egressPool[1] {
		t.Fatalf("ann@picky.test: %s/%s from %v, within the budget %v; want valid from %v", r.Status, r.Reason, r.Egress, inBudget, egressPool[1])
	}
	e.run.Log().Wait(2, 10*time.Second)
	ss := e.run.Log().Sessions()
	if len(ss) != 2 || ss[0].Client != "127.0.0.2" || ss[0].Rcpts[0].Enhanced != "5.7.1" || ss[1].Client != "127.0.0.3" {
		t.Fatalf("sessions %+v: want a 5.7.1 to 127.0.0.2, then 127.0.0.3", ss)
	}
	if _, ok := e.pool.CooldownCause(egressPool[0], netip.MustParseAddr("127.81.0.2")); !ok {
		t.Error("the blocked address is not cooling for the host")
	}

	// Every address blocked: unknown/smtp_rejected, each tried once.
	e.run.Log().Reset()
	r, inBudget = realtime(t, e, "ann@block.test")
	if r.Status != StatusUnknown || r.Reason != ReasonSMTPRejected || !inBudget {
		t.Fatalf("ann@block.test: %s/%s within the budget %v", r.Status, r.Reason, inBudget)
	}
	e.run.Log().Wait(2, 10*time.Second)
	if ss := e.run.Log().Sessions(); len(ss) != 2 || ss[0].Client == ss[1].Client {
		t.Errorf("sessions %+v: want one from each address", ss)
	}

	// A batch of a blocked host defers (unknown with RetryAt, for the job
	// to come back), as it always has.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := e.engine.VerifyDomain(ctx, []string{"bob@block.test"}, netip.Addr{})
	if rs[0].Evidence.SMTP != SMTPGreylisted || rs[0].RetryAt.IsZero() {
		t.Errorf("batch after the blocks: %v, retry at %v; want a deferral", rs[0].Evidence.SMTP, rs[0].RetryAt)
	}
}
