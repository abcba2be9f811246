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
// both (in Postfix's words for check_client_access, "Client host rejected:
// Access denied": about the client), and a host that answers every
// connection 421.
func cooldownWorld() *world.World {
	ok := map[string]world.MailboxState{"ann": world.MailboxOK, "bob": world.MailboxOK}
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.grey.test", IP: "127.81.0.1"},
			{Name: "mx.picky.test", IP: "127.81.0.2", BlockedClients: []string{"127.0.0.2"}},
			{Name: "mx.block.test", IP: "127.81.0.3", BlockedClients: []string{"127.0.0.2", "127.0.0.3"}},
			{Name: "mx.busy.test", IP: "127.81.0.4", Mode: world.HostBusy},
		},
		Domains: []*world.Domain{
			{Name: "grey.test", MX: []world.MX{{Pref: 10, Host: "mx.grey.test"}}, Policy: world.PolicyGreylist,
				GreylistDelay: world.Duration(10 * time.Minute), Mailboxes: ok},
			{Name: "picky.test", MX: []world.MX{{Pref: 10, Host: "mx.picky.test"}}, Mailboxes: ok},
			{Name: "block.test", MX: []world.MX{{Pref: 10, Host: "mx.block.test"}}, Mailboxes: ok},
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

// TestCooledPairNeverAnswers: an (egress, MX) pair cooling after a policy
// block turns no answer into unknown while another egress address can
// ask: a real-time validation and a batch both go out from the other
// address and give the mailbox's own verdict, whichever address cools.
func TestCooledPairNeverAnswers(t *testing.T) {
	host := netip.MustParseAddr("127.81.6.1")
	for _, cooled := range egressPool[:2] {
		t.Run(cooled.String(), func(t *testing.T) { cooledPair(t, host, cooled) })
	}
}

func cooledPair(t *testing.T, host, cooled netip.Addr) {
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mx.plain-cool.test", IP: host.String()}},
		domain: &world.Domain{Name: "plain-cool.test", MX: mx("mx.plain-cool.test"), Mailboxes: ok("ann", "bob")}}})
	e := startEnv(t, w, envOptions{egress: egress.Options{
		Addresses: egressPool[:2], GreylistCooldown: 10 * time.Minute, MaxCooldown: 30 * time.Minute}})
	l, err := e.pool.AcquireFrom(context.Background(), host, cooled)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(egress.OutcomePolicy)
	if _, ok := e.pool.CooldownCause(cooled, host); !ok {
		t.Fatalf("%s is not cooling for the host", cooled)
	}
	other := egressPool[0]
	if cooled == other {
		other = egressPool[1]
	}
	r, inBudget := realtime(t, e, "ann@plain-cool.test")
	if r.Status != StatusValid || !inBudget || r.Egress != other {
		t.Errorf("real time, %s cooling: %s/%s from %v; want valid from %v", cooled, r.Status, r.Reason, r.Egress, other)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rs := e.engine.VerifyDomain(ctx, []string{"bob@plain-cool.test", "zed@plain-cool.test"}, netip.Addr{})
	cancel()
	if rs[0].Status != StatusValid || rs[1].Status != StatusInvalid || rs[0].Egress != other {
		t.Errorf("batch, %s cooling: %s/%s and %s/%s from %v; want valid and invalid from %v", cooled,
			rs[0].Status, rs[0].Reason, rs[1].Status, rs[1].Reason, rs[0].Egress, other)
	}
}

// TestKnownGoodControl: a host refuses one egress address with a policy
// code and no words that say why (550 5.7.1 Access denied), postmaster
// included.
// postmaster refused alike says nothing (many domains have none): the
// refusal gives unknown / smtp_rejected and blames no egress address. Once
// the host has accepted a recipient of the domain from the prober, that
// known-good recipient refused alike shows the refusal is about the
// prober: the address cools for the host, and another address answers.
func TestKnownGoodControl(t *testing.T) {
	blocked, welcome := egressPool[0], egressPool[1]
	host := netip.MustParseAddr("127.81.6.2")
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mx.known-good.test", IP: host.String(),
		BlockedClients: []string{blocked.String()}, BlockedReply: "550 5.7.1 Access denied"}},
		domain: &world.Domain{Name: "known-good.test", MX: mx("mx.known-good.test"), Mailboxes: ok("ann")}}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: []netip.Addr{blocked},
		GreylistCooldown: 10 * time.Minute, MaxCooldown: 30 * time.Minute}})
	use := func(addrs ...netip.Addr) {
		if _, _, err := e.pool.SetAddresses(addrs); err != nil {
			t.Fatal(err)
		}
	}

	// No known-good recipient yet: the control tells nothing.
	r, _ := realtime(t, e, "zed@known-good.test")
	if r.Status != StatusUnknown || r.Reason != ReasonSMTPRejected {
		t.Fatalf("zed, no known-good recipient: %s/%s, want unknown/smtp_rejected", r.Status, r.Reason)
	}
	if _, cooling := e.pool.CooldownCause(blocked, host); cooling {
		t.Fatal("a policy code alone, postmaster refused alike, cooled the egress address")
	}

	// The host accepts ann from the welcome address: a known-good recipient.
	use(welcome)
	if r, _ := realtime(t, e, "ann@known-good.test"); r.Status != StatusValid {
		t.Fatalf("ann from %s: %s/%s", welcome, r.Status, r.Reason)
	}
	// From the blocked address, ann is refused alike: about the prober.
	use(blocked)
	r, _ = realtime(t, e, "zed@known-good.test")
	if r.Status != StatusUnknown || r.Reason != ReasonSMTPRejected {
		t.Fatalf("zed from the blocked address alone: %s/%s, want unknown/smtp_rejected", r.Status, r.Reason)
	}
	if cause, cooling := e.pool.CooldownCause(blocked, host); !cooling || cause != egress.OutcomePolicy {
		t.Fatalf("the blocked address: cooling %v, cause %v; want a policy block", cooling, cause)
	}
	// With both: the blocked address cools, the welcome one answers.
	use(blocked, welcome)
	r, _ = realtime(t, e, "zed@known-good.test")
	if r.Status != StatusInvalid || r.Egress != welcome {
		t.Fatalf("zed with both addresses: %s/%s from %v, want invalid from %v", r.Status, r.Reason, r.Egress, welcome)
	}
}
