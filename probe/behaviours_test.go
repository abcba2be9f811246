package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/resolver"
)

// behaviour is one way a real mail server or DNS zone behaves, modelled in
// the world, with the verdict a careful verifier gives (probe/README.md,
// "Real servers").
type behaviour struct {
	name   string
	hosts  []*world.Host
	domain *world.Domain
	email  string
	status Status
	reason Reason
	// catchAll is checks.is_catch_all; tls, the TLS version the session
	// must have negotiated ("" for none).
	catchAll bool
	tls      string
	// provider is the label the MX must be recognised as ("" to skip).
	provider string
}

func mx(hosts ...string) []world.MX {
	out := make([]world.MX, len(hosts))
	for i, h := range hosts {
		out[i] = world.MX{Pref: uint16(10 * (i + 1)), Host: h}
	}
	return out
}

func ok(names ...string) map[string]world.MailboxState {
	m := map[string]world.MailboxState{}
	for _, n := range names {
		m[n] = world.MailboxOK
	}
	return m
}

// behaviours is the table. Each gets its own domain and host(s) on
// 127.81.0.0/24.
func behaviours() []behaviour {
	host := func(name, ip string, mod func(*world.Host)) *world.Host {
		h := &world.Host{Name: name, IP: ip}
		if mod != nil {
			mod(h)
		}
		return h
	}
	simple := func(name, ip string, mod func(*world.Host), dmod func(*world.Domain), email string, st Status, re Reason) behaviour {
		h := host("mx."+name, ip, mod)
		d := &world.Domain{Name: name, MX: mx(h.Name), Mailboxes: ok("ann")}
		if dmod != nil {
			dmod(d)
		}
		return behaviour{name: name, hosts: []*world.Host{h}, domain: d, email: email + "@" + name, status: st, reason: re}
	}
	bs := []behaviour{
		// --- accepts every recipient
		func() behaviour {
			b := simple("acceptall.test", "127.81.0.1", nil, func(d *world.Domain) { d.Policy = world.PolicyCatchAll }, "nobody", StatusRisky, ReasonCatchAll)
			b.catchAll = true
			return b
		}(),
		func() behaviour {
			b := simple("firstn.test", "127.81.0.2", func(h *world.Host) { h.AcceptFirst = 3 }, nil, "nobody", StatusRisky, ReasonCatchAll)
			b.catchAll = true
			return b
		}(),
		// --- defers or refuses unknown senders
		simple("defer-ehlo.test", "127.81.0.3", func(h *world.Host) { h.Mode = world.HostDeferEHLO }, nil, "ann", StatusUnknown, ReasonConnection),
		simple("defer-mail.test", "127.81.0.4", func(h *world.Host) { h.MailPolicy = world.MailDefer }, nil, "ann", StatusUnknown, ReasonTimeout),
		simple("blocked.test", "127.81.0.5", func(h *world.Host) { h.Mode = world.HostBlocked }, nil, "ann", StatusUnknown, ReasonSMTPRejected),
		simple("busy.test", "127.81.0.6", func(h *world.Host) { h.Mode = world.HostBusy }, nil, "ann", StatusUnknown, ReasonConnection),
		// --- reply formats
		simple("multiline.test", "127.81.0.7", func(h *world.Host) { h.Replies = world.RepliesMultiline }, nil, "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("multiline-ok.test", "127.81.0.8", func(h *world.Host) { h.Replies = world.RepliesMultiline }, nil, "ann", StatusValid, ReasonOK),
		simple("bare.test", "127.81.0.9", func(h *world.Host) { h.Replies = world.RepliesBare }, nil, "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("bare-ok.test", "127.81.0.10", func(h *world.Host) { h.Replies = world.RepliesBare }, nil, "ann", StatusValid, ReasonOK),
		simple("bare550.test", "127.81.0.11", nil, func(d *world.Domain) { d.UnknownReply = "550 No such user here" }, "zed", StatusInvalid, ReasonMailboxNotFound),
		// --- mailbox states
		simple("full.test", "127.81.0.12", nil, func(d *world.Domain) { d.Mailboxes["ann"] = world.MailboxFull }, "ann", StatusRisky, ReasonSMTPRejected),
		simple("disabled.test", "127.81.0.13", nil, func(d *world.Domain) { d.Mailboxes["ann"] = world.MailboxDisabled }, "ann", StatusInvalid, ReasonSMTPRejected),
		simple("badsyntax.test", "127.81.0.14", nil, func(d *world.Domain) { d.Mailboxes["ann"] = world.MailboxBadSyntax }, "ann", StatusInvalid, ReasonSyntax),
		simple("relay-nullmx.test", "127.81.0.15", nil, func(d *world.Domain) { d.Mailboxes["ann"] = world.MailboxNullMX }, "ann", StatusInvalid, ReasonSMTPRejected),
		// A 5.7.x to an unknown recipient, read with the positive control
		// (postmaster@ accepted, a random local part refused alike).
		simple("misuse571.test", "127.81.0.16", nil, func(d *world.Domain) { d.UnknownReply = "550 5.7.1 User unknown" }, "zed", StatusInvalid, ReasonMailboxNotFound),
		// --- slow servers
		simple("slow-ehlo.test", "127.81.0.17", func(h *world.Host) {
			h.CommandLatency = map[string]world.Duration{"EHLO": world.Duration(3 * time.Second)}
		}, nil, "ann", StatusValid, ReasonOK),
		simple("helo-only.test", "127.81.0.18", func(h *world.Host) { h.NoEHLO = true }, nil, "ann", StatusValid, ReasonOK),
		// --- STARTTLS
		simple("tls-broken.test", "127.81.0.19", func(h *world.Host) { h.TLS, h.TLSBroken = "1.2", true }, nil, "ann", StatusValid, ReasonOK),
		func() behaviour {
			b := simple("tls10.test", "127.81.0.20", func(h *world.Host) { h.TLS = "1.0" }, nil, "ann", StatusValid, ReasonOK)
			b.tls = "TLS 1.0"
			return b
		}(),
		// --- SMTPUTF8: a UTF-8 local part to a server without it
		simple("no-utf8.test", "127.81.0.21", nil, nil, "jürgen", StatusInvalid, ReasonSMTPRejected),
		// --- MAIL FROM policies: a refusal at MAIL is never "no mailbox"
		simple("no-null-sender.test", "127.81.0.22", func(h *world.Host) { h.MailPolicy = world.MailRefuseNull }, nil, "ann", StatusValid, ReasonOK),
		simple("require-spf.test", "127.81.0.23", func(h *world.Host) { h.MailPolicy = world.MailRequireSPF }, nil, "ann", StatusUnknown, ReasonSMTPRejected),
	}

	bs = append(bs, providerBehaviours(host)...)
	bs = append(bs, controlBehaviours(simple)...)

	// --- DNS
	// An MX set too large for a UDP answer: TC, then TCP (RFC 7766).
	big := &world.Domain{Name: "bigmx.test", Mailboxes: ok("ann")}
	var bigHosts []*world.Host
	for i := range 24 {
		h := host(fmt.Sprintf("a-rather-long-mail-exchanger-name-number-%02d.bigmx.test", i), fmt.Sprintf("127.81.1.%d", i+1), nil)
		bigHosts = append(bigHosts, h)
		big.MX = append(big.MX, world.MX{Pref: uint16(10 + i), Host: h.Name})
	}
	bs = append(bs, behaviour{name: "truncated MX set", hosts: bigHosts, domain: big, email: "ann@bigmx.test", status: StatusValid, reason: ReasonOK})
	// An MX target that is a CNAME (RFC 2181 §10.3 forbids it; it is common).
	bs = append(bs, behaviour{name: "MX is a CNAME", hosts: []*world.Host{host("real.cname-mx.test", "127.81.0.24", nil)},
		domain: &world.Domain{Name: "cname-mx.test", MX: mx("alias.cname-mx.test"), Mailboxes: ok("ann"),
			Records: []world.Record{{Name: "alias", Type: "CNAME", Data: "real.cname-mx.test."}}},
		email: "ann@cname-mx.test", status: StatusValid, reason: ReasonOK})
	// An MX target with no address: the next MX takes it.
	bs = append(bs, behaviour{name: "MX without address", hosts: []*world.Host{host("mx2.noaddr-mx.test", "127.81.0.25", nil)},
		domain: &world.Domain{Name: "noaddr-mx.test", MX: mx("mx1.noaddr-mx.test", "mx2.noaddr-mx.test"), Mailboxes: ok("ann")},
		email:  "ann@noaddr-mx.test", status: StatusValid, reason: ReasonOK})
	// An MX target that is an IP literal: not a host name (RFC 5321 §5.1,
	// RFC 7505 §3); Postfix and Exim refuse to deliver to it.
	bs = append(bs, behaviour{name: "MX is an IP literal", hosts: []*world.Host{host("mx.ipliteral.test", "127.81.0.26", nil)},
		domain: &world.Domain{Name: "ipliteral.test", MX: []world.MX{{Pref: 10, Host: "127.81.0.26"}}, Mailboxes: ok("ann")},
		email:  "ann@ipliteral.test", status: StatusInvalid, reason: ReasonNoMX})
	// An IPv6-only MX.
	bs = append(bs, behaviour{name: "IPv6-only MX", hosts: []*world.Host{host("mx6.v6only.test", "::1", nil)},
		domain: &world.Domain{Name: "v6only.test", MX: mx("mx6.v6only.test"), Mailboxes: ok("ann")},
		email:  "ann@v6only.test", status: StatusValid, reason: ReasonOK})
	// No MX host has an address (RFC 5321 §5.1: no mail can be
	// delivered): NXDOMAIN for one, NODATA for A and AAAA of the other,
	// both authoritative. Before, unknown/connection_error.
	bs = append(bs, behaviour{name: "no MX host has an address",
		domain: &world.Domain{Name: "noaddr-all.test", MX: mx("mx1.noaddr-all.test", "mx2.noaddr-all.test"), Mailboxes: ok("ann"),
			Records: []world.Record{{Name: "mx2", Type: "TXT", Data: `"no address here"`}}},
		email: "ann@noaddr-all.test", status: StatusInvalid, reason: ReasonNoMX})
	// One MX host without an address, the other refusing connections:
	// a host with an address exists, so it is not that no mail can be
	// delivered: unknown.
	bs = append(bs, behaviour{name: "MX without address, the other refusing", hosts: []*world.Host{host("mx2.noaddr-half.test", "127.81.0.27", func(h *world.Host) { h.Mode = world.HostRefuse })},
		domain: &world.Domain{Name: "noaddr-half.test", MX: mx("mx1.noaddr-half.test", "mx2.noaddr-half.test"), Mailboxes: ok("ann")},
		email:  "ann@noaddr-half.test", status: StatusUnknown, reason: ReasonConnection})
	// The MX host's own zone fails (SERVFAIL): a failure to look it up,
	// not an answer that it has no address: unknown, never invalid.
	bs = append(bs, behaviour{name: "MX host in a failing zone",
		domain: &world.Domain{Name: "lamehost.test", MX: mx("mx.failing-zone.test"), Mailboxes: ok("ann")},
		email:  "ann@lamehost.test", status: StatusUnknown, reason: ReasonConnection})
	bs = append(bs, behaviour{name: "the failing zone itself", domain: &world.Domain{Name: "failing-zone.test", DNSFault: world.DNSFaultServFail},
		email: "ann@failing-zone.test", status: StatusUnknown, reason: ReasonConnection})
	return bs
}

// brokenDNS is an upstream that answers SERVFAIL to every query, or
// (drop) never answers: one of two servers of a zone that fails.
func brokenDNS(t *testing.T, drop bool) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if drop {
			return
		}
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

func behaviourWorld(t *testing.T, bs []behaviour) *world.World {
	t.Helper()
	w := &world.World{}
	for _, b := range bs {
		w.Hosts = append(w.Hosts, b.hosts...)
		w.Domains = append(w.Domains, b.domain)
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestRealServerBehaviours checks the verdict of every behaviour of the
// table, one validation each, all at once as on a real box.
func TestRealServerBehaviours(t *testing.T) {
	bs := behaviours()
	w := behaviourWorld(t, bs)
	// The world's own decision table agrees with this one, so the
	// benchmarks, which score by it, hold the engine to the same verdicts.
	for _, b := range bs {
		if x := w.Expect(b.email); x.Status != string(b.status) || x.Reason != string(b.reason) || x.CatchAll != b.catchAll {
			t.Errorf("%s: the world expects %s/%s catch-all %v, the table %s/%s %v", b.name, x.Status, x.Reason, x.CatchAll, b.status, b.reason, b.catchAll)
		}
	}
	e := startEnv(t, w, envOptions{startTLS: true, egress: egress.Options{
		Addresses: append(append([]netip.Addr{}, egressPool...), netip.IPv6Loopback())}})
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := e.engine.Verify(ctx, b.email)
			if r.Status != b.status || r.Reason != b.reason {
				t.Errorf("%s (%s): %s/%s (evidence %+v), want %s/%s", b.name, b.email, r.Status, r.Reason, r.Evidence, b.status, b.reason)
			}
			if r.Checks.IsCatchAll != b.catchAll {
				t.Errorf("%s: is_catch_all %v, want %v", b.name, r.Checks.IsCatchAll, b.catchAll)
			}
			if b.tls != "" && r.Session.TLSVersion != b.tls {
				t.Errorf("%s: TLS %q, want %q", b.name, r.Session.TLSVersion, b.tls)
			}
			if b.provider != "" && r.Session.Provider != b.provider {
				t.Errorf("%s: provider %q, want %q", b.name, r.Session.Provider, b.provider)
			}
		}()
	}
	wg.Wait()
	// The truncated MX set came over TCP: its UDP answer had TC set.
	if n := e.run.DNS.TCPQueries(); n == 0 {
		t.Error("no DNS query over TCP: the truncated MX set was not retried over TCP")
	}
}

// TestBrokenAuthoritative: one of the two servers a resolver asks fails
// (SERVFAIL, or no answer at all); the other answers, and the verdict is
// the real one. With only the broken one, the answer is unknown, never
// invalid.
func TestBrokenAuthoritative(t *testing.T) {
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mx.twoauth.test", IP: "127.81.2.1"}},
		domain: &world.Domain{Name: "twoauth.test", MX: mx("mx.twoauth.test"), Mailboxes: ok("ann")}}})
	e := startEnv(t, w, envOptions{})
	for _, drop := range []bool{false, true} {
		bad := brokenDNS(t, drop)
		res, err := resolver.New(resolver.Options{Upstreams: []string{bad, e.run.DNS.Addr()}, Timeout: 500 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(res.Close)
		eng := e.engineWith(t, res)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := eng.Verify(ctx, "ann@twoauth.test")
		cancel()
		if r.Status != StatusValid {
			t.Errorf("drop %v: %s/%s, want valid", drop, r.Status, r.Reason)
		}
		only, err := resolver.New(resolver.Options{Upstreams: []string{bad}, Timeout: 300 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(only.Close)
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		r = e.engineWith(t, only).Verify(ctx, "ann@twoauth.test")
		cancel()
		if r.Status != StatusUnknown {
			t.Errorf("drop %v, only the broken server: %s/%s, want unknown", drop, r.Status, r.Reason)
		}
	}
}

// TestEqualPreferenceSpread: two MX hosts of equal preference share the
// sessions, in a random order per session (RFC 5321 §5.1).
func TestEqualPreferenceSpread(t *testing.T) {
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{{Name: "mxa.equal.test", IP: "127.81.3.1"}, {Name: "mxb.equal.test", IP: "127.81.3.2"}},
		domain: &world.Domain{Name: "equal.test", MX: []world.MX{{Pref: 10, Host: "mxa.equal.test"}, {Pref: 10, Host: "mxb.equal.test"}}, Mailboxes: ok("ann")}}})
	e := startEnv(t, w, envOptions{})
	const n = 40
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := e.engine.Verify(ctx, fmt.Sprintf("user%d@equal.test", i))
		cancel()
		if r.Status != StatusInvalid {
			t.Fatalf("user%d: %s/%s", i, r.Status, r.Reason)
		}
	}
	// A validation may take a session an earlier one to the same host
	// kept open: what is spread is the validations (their RCPTs), host
	// by host.
	e.engine.Wait()
	perHost := map[string]int{}
	// The world logs a session once its connection is closed, a moment
	// after the engine's QUIT returned.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		clear(perHost)
		for _, s := range e.run.Log().Sessions() {
			for _, r := range s.Rcpts {
				if strings.HasPrefix(r.Addr, "user") {
					perHost[s.HostIP]++
				}
			}
		}
		if perHost["127.81.3.1"]+perHost["127.81.3.2"] == n || time.Now().After(deadline) {
			break
		}
	}
	// 40 fair coin flips: each side gets at least 8 with probability
	// 1 - 2·P(X ≤ 7) > 0.99999.
	if perHost["127.81.3.1"] < 8 || perHost["127.81.3.2"] < 8 || perHost["127.81.3.1"]+perHost["127.81.3.2"] != n {
		t.Errorf("validations per host %v: equal preferences not spread", perHost)
	}
}

// TestManyMXCapped: a domain with twenty MX hosts, none of which takes a
// connection; the engine connects to exactly MaxMXHosts of them (counted
// by the egress pool's leases) and answers unknown.
func TestManyMXCapped(t *testing.T) {
	d := &world.Domain{Name: "twenty.test", Mailboxes: ok("ann")}
	var hosts []*world.Host
	for i := range 20 {
		h := &world.Host{Name: fmt.Sprintf("mx%02d.twenty.test", i), IP: fmt.Sprintf("127.81.4.%d", i+1), Mode: world.HostRefuse}
		hosts = append(hosts, h)
		d.MX = append(d.MX, world.MX{Pref: uint16(i), Host: h.Name})
	}
	w := behaviourWorld(t, []behaviour{{hosts: hosts, domain: d}})
	e := startEnv(t, w, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := e.engine.Verify(ctx, "ann@twenty.test")
	if r.Status != StatusUnknown || r.Reason != ReasonConnection {
		t.Fatalf("%s/%s, want unknown/connection_error", r.Status, r.Reason)
	}
	var leases uint64
	for _, a := range e.pool.Snapshot() {
		leases += a.Sessions
	}
	if leases != DefaultMaxMXHosts {
		t.Errorf("%d connections to the twenty hosts, want %d", leases, DefaultMaxMXHosts)
	}
}

// TestSessionsEndingEarly: a batch to a server that takes 2 RCPTs per
// transaction (452 4.5.3), or ends the session after 2 RCPTs (421, or a
// dropped connection in the middle of a pipelined group), answers every
// address, and RCPTs no address more often than the cuts need.
func TestSessionsEndingEarly(t *testing.T) {
	for _, mod := range []struct {
		name string
		h    func(*world.Host)
	}{
		{"452 after 2", func(h *world.Host) { h.MaxRcpts = 2 }},
		{"421 after 2", func(h *world.Host) { h.DropAfterRcpts, h.DropMode = 2, world.Drop421 }},
		{"close after 2", func(h *world.Host) { h.DropAfterRcpts, h.DropMode = 2, world.DropClose }},
	} {
		t.Run(mod.name, func(t *testing.T) {
			h := &world.Host{Name: "mx.cut.test", IP: "127.81.5.1"}
			mod.h(h)
			d := &world.Domain{Name: "cut.test", MX: mx(h.Name), Mailboxes: ok("a1", "a3", "a5")}
			w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: d}})
			e := startEnv(t, w, envOptions{})
			var emails []string
			for i := range 6 {
				emails = append(emails, fmt.Sprintf("a%d@cut.test", i))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rs := e.engine.VerifyDomain(ctx, emails, netip.Addr{})
			for i, r := range rs {
				want := StatusInvalid
				if i%2 == 1 {
					want = StatusValid
				}
				if r.Status != want {
					t.Errorf("%s: %s/%s, want %s", emails[i], r.Status, r.Reason, want)
				}
			}
			// Three sessions, two addresses each, whatever the cut; the
			// server logs a session just after its close.
			e.run.Log().Wait(3, 5*time.Second)
			asked := map[string]int{}
			for _, s := range e.run.Log().Sessions() {
				for _, rc := range s.Rcpts {
					asked[strings.ToLower(rc.Addr)]++
				}
			}
			for _, em := range emails {
				if asked[em] == 0 || asked[em] > 2 {
					t.Errorf("%s asked %d times", em, asked[em])
				}
			}
			if t.Failed() {
				for _, s := range e.run.Log().Sessions() {
					t.Logf("session from %s: %+v", s.Client, s.Rcpts)
				}
			}
		})
	}
}

// TestSlowBanner: a banner that comes after 20 s (RFC 5321 §4.5.3.2.1
// allows 5 minutes). A batch, whose budget is minutes, waits for it; a
// real-time validation, whose budget is 15 s, answers unknown/timeout.
func TestSlowBanner(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 20 s for a banner")
	}
	h := &world.Host{Name: "mx.slowbanner.test", IP: "127.81.6.1",
		CommandLatency: map[string]world.Duration{"BANNER": world.Duration(20 * time.Second)}}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h},
		domain: &world.Domain{Name: "slowbanner.test", MX: mx(h.Name), Mailboxes: ok("ann")}}})
	e := startEnv(t, w, envOptions{})
	eng := e.engineWith(t, e.res, func(o *Options) { o.GreetingTimeout, o.SessionTimeout = 0, 2*time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if r := eng.VerifyDomain(ctx, []string{"ann@slowbanner.test"}, netip.Addr{})[0]; r.Status != StatusValid {
			t.Errorf("batch: %s/%s, want valid", r.Status, r.Reason)
		}
	}()
	go func() {
		defer wg.Done()
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		defer rcancel()
		if r := eng.Verify(rctx, "ann@slowbanner.test"); r.Status != StatusUnknown || r.Reason != ReasonTimeout {
			t.Errorf("real time: %s/%s, want unknown/timeout", r.Status, r.Reason)
		}
	}()
	wg.Wait()
}

// providerBehaviours are hosts playing the large providers and gateways,
// named and greeting as those do (probe/provider.go has the sources), each
// beside a host of no provider that answers the same way, to show the
// provider's reading is what decides. They take 127.81.3.0/24.
func providerBehaviours(host func(name, ip string, mod func(*world.Host)) *world.Host) []behaviour {
	ip := 0
	next := func() string { ip++; return fmt.Sprintf("127.81.3.%d", ip) }
	one := func(name, hostName, provider string, hmod func(*world.Host), dmod func(*world.Domain), local string, st Status, re Reason, label string) behaviour {
		h := host(hostName, next(), func(h *world.Host) {
			h.Provider = provider
			if hmod != nil {
				hmod(h)
			}
		})
		d := &world.Domain{Name: name, MX: mx(h.Name), Mailboxes: ok("ann")}
		if dmod != nil {
			dmod(d)
		}
		return behaviour{name: name, hosts: []*world.Host{h}, domain: d, email: local + "@" + name,
			status: st, reason: re, catchAll: re == ReasonCatchAll, provider: label}
	}
	unknown := func(reply string) func(*world.Domain) { return func(d *world.Domain) { d.UnknownReply = reply } }
	const (
		yahoo552 = "552 1 Requested mail action aborted, mailbox not found"
		yahooDD  = "554 delivery error: dd This user doesn't have a yahoo.com account (zed@x) [0] - mta1234.mail.bf1.yahoo.com"
		yahooOff = "554 delivery error: dd Sorry your message to zed@x cannot be delivered. This mailbox is disabled (554.30)"
		ms541    = "550 5.4.1 Recipient address rejected: Access denied. AS(201806281)"
		ms5110   = "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup"
		olc550   = "550 5.5.0 Requested action not taken: mailbox unavailable (S2017062302)"
	)
	gmail := func(h *world.Host) {
		h.Replies = world.RepliesMultiline
		h.Greeting = "mx.google.com ESMTP 5a478bee46e88-2a2b1c3d - gsmtp"
	}
	return []behaviour{
		// Google: per mailbox, multi-line 550-5.1.1.
		one("gmail.test", "gmail-smtp-in.l.google.com", "google", gmail, nil, "ann", StatusValid, ReasonOK, "google"),
		one("workspace.test", "aspmx.l.google.com", "google", gmail, nil, "zed", StatusInvalid, ReasonMailboxNotFound, "google"),
		// Microsoft 365 with directory-based edge blocking: 550 5.4.1,
		// and 5.1.10 from the directory lookup, both no such mailbox.
		one("m365.test", "m365-test.mail.protection.outlook.com", "microsoft365", func(h *world.Host) {
			h.Greeting = "BN8NAM11FT066.mail.protection.outlook.com Microsoft ESMTP MAIL Service ready"
		}, unknown(ms541), "zed", StatusInvalid, ReasonMailboxNotFound, "microsoft365"),
		one("m365-known.test", "m365-known-test.mail.protection.outlook.com", "microsoft365", nil, unknown(ms541), "ann", StatusValid, ReasonOK, "microsoft365"),
		one("m365-5110.test", "m365-5110-test.mail.protection.outlook.com", "microsoft365", nil, unknown(ms5110), "zed", StatusInvalid, ReasonMailboxNotFound, "microsoft365"),
		one("plain-5110.test", "mx.plain-5110.test", "", nil, unknown(ms5110), "zed", StatusInvalid, ReasonSMTPRejected, ProviderOther),
		// Microsoft 365 without edge blocking: every recipient accepted;
		// the random probe shows it.
		one("m365-open.test", "m365-open-test.mail.protection.outlook.com", "microsoft365", nil,
			func(d *world.Domain) { d.Policy = world.PolicyCatchAll }, "zed", StatusRisky, ReasonCatchAll, "microsoft365"),
		// Outlook.com: 550 5.5.0 for an unknown recipient.
		one("hotmail.test", "hotmail-test.olc.protection.outlook.com", "outlook", nil, unknown(olc550), "zed", StatusInvalid, ReasonMailboxNotFound, "outlook"),
		// Elsewhere 5.5.0 (other protocol status) says no more than a bare
		// 550: the positive control reads it (postmaster accepted).
		one("plain-550-550.test", "mx.plain-550-550.test", "", nil, unknown(olc550), "zed", StatusInvalid, ReasonMailboxNotFound, ProviderOther),
		// Yahoo: believed to take every recipient at RCPT, so an
		// acceptance proves nothing until this server refuses the random
		// probe as no such mailbox (its bare 552, its "dd This user
		// doesn't have a yahoo.com account", or a 5.1.1): evidence
		// outranks the belief.
		one("yahoo.test", "mta5.am0.yahoodns.net", "yahoo", nil, func(d *world.Domain) { d.Policy = world.PolicyCatchAll },
			"zed", StatusRisky, ReasonCatchAll, "yahoo"),
		one("yahoo-all.test", "mta8.am0.yahoodns.net", "yahoo", nil, func(d *world.Domain) { d.Policy = world.PolicyCatchAll },
			"ann", StatusRisky, ReasonCatchAll, "yahoo"),
		one("yahoo-552.test", "mta6.am0.yahoodns.net", "yahoo", nil, unknown(yahoo552), "ann", StatusValid, ReasonOK, "yahoo"),
		one("yahoo-dd.test", "mta9.am0.yahoodns.net", "yahoo", nil, unknown(yahooDD), "zed", StatusInvalid, ReasonMailboxNotFound, "yahoo"),
		one("yahoo-dd-ann.test", "mta10.am0.yahoodns.net", "yahoo", nil, unknown(yahooDD), "ann", StatusValid, ReasonOK, "yahoo"),
		one("yahoo-disabled.test", "mta11.am0.yahoodns.net", "yahoo", nil, unknown(yahooOff), "zed", StatusInvalid, ReasonSMTPRejected, "yahoo"),
		// The same wording from a host of no provider: a bare 554 whose
		// words say no such account, postmaster or not.
		one("plain-dd.test", "mx.plain-dd.test", "", nil, unknown(yahooDD), "zed", StatusInvalid, ReasonMailboxNotFound, ProviderOther),
		one("plain-dd-np.test", "mx.plain-dd-np.test", "", nil, func(d *world.Domain) { d.UnknownReply, d.NoPostmaster = yahooDD, true },
			"zed", StatusInvalid, ReasonMailboxNotFound, ProviderOther),
		// A one-recipient Yahoo host cannot be asked the random probe
		// after the real one: the belief stands.
		one("yahoo-onercpt.test", "mta12.am0.yahoodns.net", "yahoo", func(h *world.Host) { h.MaxRcpts = 1 }, nil,
			"ann", StatusRisky, ReasonCatchAll, "yahoo"),
		one("yahoo-552-zed.test", "mta7.am0.yahoodns.net", "yahoo", nil, unknown(yahoo552), "zed", StatusInvalid, ReasonMailboxNotFound, "yahoo"),
		// Elsewhere a bare 552 is full (RFC 5321 §4.2.3), unless its words
		// say otherwise: these say no such mailbox.
		one("plain-552.test", "mx.plain-552.test", "", nil, unknown(yahoo552), "zed", StatusInvalid, ReasonMailboxNotFound, ProviderOther),
		one("plain-552-ann.test", "mx.plain-552-ann.test", "", nil, unknown(yahoo552), "ann", StatusValid, ReasonOK, ProviderOther),
		// A customer's own MX name: the greeting's host gives Yahoo away.
		one("yahoo-vanity.test", "mx.yahoo-vanity.test", "yahoo", func(h *world.Host) {
			h.Greeting = "mta4294.mail.gq1.yahoo.com ESMTP ready"
		}, nil, "ann", StatusValid, ReasonOK, "yahoo"),
		one("yahoo-vanity-zed.test", "mx.yahoo-vanity-zed.test", "yahoo", func(h *world.Host) {
			h.Greeting = "mta4295.mail.gq1.yahoo.com ESMTP ready"
		}, nil, "zed", StatusInvalid, ReasonMailboxNotFound, "yahoo"),
		// Gateways: an acceptance counts once the gateway refused the
		// random probe as no such mailbox.
		one("pp-checks.test", "mx0a-00123401.pphosted.com", "proofpoint", nil, nil, "ann", StatusValid, ReasonOK, "proofpoint"),
		one("pp-onercpt.test", "mx0b-00123401.pphosted.com", "proofpoint", func(h *world.Host) { h.MaxRcpts = 1 }, nil,
			"ann", StatusRisky, ReasonCatchAll, "proofpoint"),
		one("plain-onercpt.test", "mx.plain-onercpt.test", "", func(h *world.Host) { h.MaxRcpts = 1 }, nil, "ann", StatusValid, ReasonOK, ProviderOther),
		one("mc-policy.test", "mx.mc-policy.test", "mimecast", func(h *world.Host) {
			h.Greeting = "eu-smtp-inbound-1.mimecast.com ESMTP"
		}, unknown("550 5.7.1 Invalid recipient"), "ann", StatusValid, ReasonOK, "mimecast"),
		one("mc-policy-np.test", "mx.mc-policy-np.test", "mimecast", func(h *world.Host) {
			h.Greeting = "eu-smtp-inbound-2.mimecast.com ESMTP"
		}, func(d *world.Domain) { d.UnknownReply, d.NoPostmaster = "550 5.7.1 Invalid recipient", true }, "ann", StatusValid, ReasonOK, "mimecast"),
		one("mc-all.test", "us-smtp-inbound-1.mimecast.com", "mimecast", nil, func(d *world.Domain) { d.Policy = world.PolicyCatchAll },
			"zed", StatusRisky, ReasonCatchAll, "mimecast"),
		one("cuda.test", "d123456a.ess.barracudanetworks.com", "barracuda", nil, unknown("550 cuda_nsu 5.1.1 <zed@cuda.test>... User unknown"),
			"zed", StatusInvalid, ReasonMailboxNotFound, "barracuda"),
		one("cuda-ann.test", "d123456b.ess.barracudanetworks.com", "barracuda", nil, unknown("550 cuda_nsu 5.1.1 <zed@cuda.test>... User unknown"),
			"ann", StatusValid, ReasonOK, "barracuda"),
		one("ironport.test", "mx1.hc1234-56.iphmx.com", "cisco", nil, nil, "ann", StatusValid, ReasonOK, "cisco"),
		one("icloud.test", "mx01.mail.icloud.com", "icloud", nil, nil, "zed", StatusInvalid, ReasonMailboxNotFound, "icloud"),
		// Yandex words "no such user" as 550 5.7.1: a generic policy
		// code, whose words say it.
		one("yandex.test", "mx.yandex.net", "yandex", nil, unknown("550 5.7.1 No such user!"), "zed", StatusInvalid, ReasonMailboxNotFound, "yandex"),
		one("gmx.test", "mx00.gmx.net", "gmx", func(h *world.Host) {
			h.Greeting = "gmx.net (mxgmx117) Nemesis ESMTP Service ready"
		}, unknown("550 Requested action not taken: mailbox unavailable"), "zed", StatusInvalid, ReasonMailboxNotFound, "gmx"),
	}
}

// TestPolicyRefusalStands: a server that refuses the prober's addresses
// in words about the client (Postfix's reject_rbl_client) makes each
// refused egress address cool for it; validations that ask again from the others and run out of
// budget or addresses keep the refusal as their answer (unknown /
// smtp_rejected), never a timeout they did not meet.
func TestPolicyRefusalStands(t *testing.T) {
	h := &world.Host{Name: "mx.policy-stands.test", IP: "127.81.5.1", Latency: world.Duration(300 * time.Millisecond)}
	d := &world.Domain{Name: "policy-stands.test", MX: mx(h.Name), Mailboxes: ok("ann"),
		UnknownReply: "554 5.7.1 Service unavailable; Client host [127.0.0.2] blocked using zen.spamhaus.org", NoPostmaster: true}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: d}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:2], MaxCooldown: 2 * time.Second}})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			email := fmt.Sprintf("nobody%d@policy-stands.test", i)
			if r := e.engine.Verify(ctx, email); r.Status != StatusUnknown || r.Reason != ReasonSMTPRejected {
				t.Errorf("%s: %s/%s (evidence %+v), want unknown/smtp_rejected", email, r.Status, r.Reason, r.Evidence)
			}
		}()
	}
	wg.Wait()
}

// TestRecipientPolicyProvider: Yandex answers 550 5.7.1 "No such user!" to
// unknown recipients: a generic policy code whose words say no such
// mailbox (invalid, though postmaster is refused alike), and no block of
// the egress addresses for its MX, which serves many domains: known
// mailboxes asked afterwards, of any of them, are valid.
func TestRecipientPolicyProvider(t *testing.T) {
	h := &world.Host{Name: "mx.yandex.net", IP: "127.81.5.2", Provider: "yandex"}
	var doms []*world.Domain
	for _, n := range []string{"ya-one.test", "ya-two.test"} {
		doms = append(doms, &world.Domain{Name: n, MX: mx(h.Name), Mailboxes: ok("ann"), UnknownReply: "550 5.7.1 No such user!",
			NoPostmaster: true})
	}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: doms[0]}, {domain: doms[1]}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:2]}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 4 {
		email := fmt.Sprintf("nobody%d@ya-one.test", i)
		if r := e.engine.Verify(ctx, email); r.Status != StatusInvalid || r.Reason != ReasonMailboxNotFound {
			t.Errorf("%s: %s/%s, want invalid/mailbox_not_found", email, r.Status, r.Reason)
		}
	}
	for _, email := range []string{"ann@ya-one.test", "ann@ya-two.test"} {
		if r := e.engine.Verify(ctx, email); r.Status != StatusValid {
			t.Errorf("%s: %s/%s (evidence %+v), want valid", email, r.Status, r.Reason, r.Evidence)
		}
	}
}

// TestQuitOffThePath: once every recipient has its answer, the probe
// answers without waiting a round trip for the reply to QUIT; the session
// still says QUIT and waits for its 221 (RFC 5321 §4.1.1.10), and holds its
// egress slot until then. Engine.Wait waits for it.
func TestQuitOffThePath(t *testing.T) {
	h := &world.Host{Name: "mx.slowquit.test", IP: "127.81.5.3",
		CommandLatency: map[string]world.Duration{"QUIT": world.Duration(3 * time.Second)}}
	d := &world.Domain{Name: "slowquit.test", MX: mx(h.Name), Mailboxes: ok("ann")}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: d}})
	e := startEnv(t, w, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	r := e.engine.Verify(ctx, "ann@slowquit.test")
	cancel() // as the API does when the probe returns
	if r.Status != StatusValid {
		t.Fatalf("%s/%s, want valid", r.Status, r.Reason)
	}
	// The world logs a session as it ends: the QUIT's reply is still 3 s
	// away, so none has ended yet.
	if n := e.run.Log().Len(); n != 0 {
		t.Errorf("%d sessions ended before the probe answered: it waited for QUIT", n)
	}
	if got := inFlight(e.pool); got != 1 {
		t.Errorf("%d egress slots held while QUIT is under way, want 1", got)
	}
	e.engine.Wait()
	e.run.Log().Wait(1, 5*time.Second) // the world logs a session once it sees it close
	ss := e.run.Log().Sessions()
	if len(ss) != 1 || !ss[0].Quit {
		t.Fatalf("sessions %+v: want one, ended by QUIT and 221 after the context ended", ss)
	}
	if got := inFlight(e.pool); got != 0 {
		t.Errorf("%d egress slots held after QUIT, want 0", got)
	}
}

func inFlight(p *egress.Pool) int {
	n := 0
	for _, a := range p.Snapshot() {
		n += a.InFlight
	}
	return n
}

// TestBatchYieldsToRealtime: while a real-time validation is in flight,
// batch work probes at most BatchShare domains at once; the rest wait
// their turn, and every address still gets its verdict.
func TestBatchYieldsToRealtime(t *testing.T) {
	var bs []behaviour
	slow := &world.Host{Name: "mx.slow-rt.test", IP: "127.81.6.1",
		CommandLatency: map[string]world.Duration{"RCPT": world.Duration(2 * time.Second)}}
	bs = append(bs, behaviour{hosts: []*world.Host{slow}, domain: &world.Domain{Name: "slow-rt.test", MX: mx(slow.Name), Mailboxes: ok("ann")}})
	for i := range 12 {
		h := &world.Host{Name: fmt.Sprintf("mx.batch%d.test", i), IP: fmt.Sprintf("127.81.6.%d", 10+i),
			Latency: world.Duration(50 * time.Millisecond)}
		bs = append(bs, behaviour{hosts: []*world.Host{h}, domain: &world.Domain{Name: fmt.Sprintf("batch%d.test", i), MX: mx(h.Name), Mailboxes: ok("ann")}})
	}
	w := behaviourWorld(t, bs)
	e := startEnv(t, w, envOptions{})
	eng := e.engineWith(t, e.res, func(o *Options) { o.BatchShare = 3 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt := make(chan *Result, 1)
	go func() { rt <- eng.Verify(ctx, "ann@slow-rt.test") }()
	// The real-time validation is in flight once its session is open.
	for deadline := time.Now().Add(10 * time.Second); ; {
		eng.share.mu.Lock()
		n := eng.share.realtime
		eng.share.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the real-time validation never started")
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := eng.VerifyDomain(ctx, []string{fmt.Sprintf("ann@batch%d.test", i)}, netip.Addr{})
			if rs[0].Status != StatusValid {
				t.Errorf("batch%d: %s/%s", i, rs[0].Status, rs[0].Reason)
			}
		}()
	}
	wg.Wait()
	if r := <-rt; r.Status != StatusValid {
		t.Errorf("real-time: %s/%s", r.Status, r.Reason)
	}
	eng.share.mu.Lock()
	most := eng.share.maxBatch
	eng.share.mu.Unlock()
	if most > 3 {
		t.Errorf("%d batch domains probed at once beside a real-time validation, want at most 3", most)
	}
	if most == 0 {
		t.Error("no batch domain was probed while the real-time validation ran: the test shows nothing")
	}
}

// TestMXHostAnswered: checks.mx_host names the MX host whose answer made
// the verdict: the second MX when the first refuses connections or has
// no address, in a single validation and in batch mode. Before, it named
// the first MX whatever answered.
func TestMXHostAnswered(t *testing.T) {
	refusing := &world.Host{Name: "mx1.second-answers.test", IP: "127.81.4.40", Mode: world.HostRefuse}
	answering := &world.Host{Name: "mx2.second-answers.test", IP: "127.81.4.41"}
	d := &world.Domain{Name: "second-answers.test", MX: mx(refusing.Name, answering.Name), Mailboxes: ok("ann")}
	other := &world.Host{Name: "mx2.first-noaddr.test", IP: "127.81.4.42"}
	d2 := &world.Domain{Name: "first-noaddr.test", MX: mx("mx1.first-noaddr.test", other.Name), Mailboxes: ok("ann")}
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{refusing, answering}, domain: d}, {hosts: []*world.Host{other}, domain: d2}})
	e := startEnv(t, w, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for email, want := range map[string]string{"ann@second-answers.test": answering.Name, "ann@first-noaddr.test": other.Name} {
		if r := e.engine.Verify(ctx, email); r.Status != StatusValid || r.Checks.MXHost != want {
			t.Errorf("%s: %s, mx_host %q, want valid from %q", email, r.Status, r.Checks.MXHost, want)
		}
		if r := e.engine.VerifyDomain(ctx, []string{email}, netip.Addr{})[0]; r.Status != StatusValid || r.Checks.MXHost != want {
			t.Errorf("%s, batch mode: %s, mx_host %q, want valid from %q", email, r.Status, r.Checks.MXHost, want)
		}
	}
}

// controlBehaviours are refusals that may be about the prober (5.7.x,
// 5.2.4, a bare 550 or 554), read with the positive control: postmaster@
// the domain, which must exist (RFC 5321 §4.5.1), and a random local part,
// asked in the same session. They take 127.81.7.0/24.
func controlBehaviours(simple func(name, ip string, mod func(*world.Host), dmod func(*world.Domain), email string, st Status, re Reason) behaviour) []behaviour {
	ip := 0
	next := func() string { ip++; return fmt.Sprintf("127.81.7.%d", ip) }
	unknown := func(reply string, noPostmaster bool) func(*world.Domain) {
		return func(d *world.Domain) { d.UnknownReply, d.NoPostmaster = reply, noPostmaster }
	}
	const (
		exchange = "550 5.7.1 Recipient not authorized"
		smtpd    = "524 5.2.4 Mailing list expansion problem"
		bare554  = "554 Recipient address rejected"
	)
	return []behaviour{
		// On-premises Exchange: 5.7.1 to unknown recipients, postmaster
		// accepted: no such mailbox; its real users are valid.
		simple("exch.test", next(), nil, unknown(exchange, false), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("exch-ann.test", next(), nil, unknown(exchange, false), "ann", StatusValid, ReasonOK),
		// OpenSMTPD's virtual-user table: 524 5.2.4.
		simple("smtpd.test", next(), nil, unknown(smtpd, false), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("bare554.test", next(), nil, unknown(bare554, false), "zed", StatusInvalid, ReasonMailboxNotFound),
		// postmaster refused alike tells nothing (many domains have no
		// postmaster): the codes' reading stands, and the words where
		// they say something.
		simple("exch-np.test", next(), nil, unknown(exchange, true), "zed", StatusUnknown, ReasonSMTPRejected),
		simple("smtpd-np.test", next(), nil, unknown(smtpd, true), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("bare550-np.test", next(), nil, unknown("550 No such user here", true), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("exim-np.test", next(), nil, unknown("550 Unrouteable address", true), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("opensmtpd-np.test", next(), nil, unknown("550 Invalid recipient: <zed@opensmtpd-np.test>", true), "zed", StatusInvalid, ReasonMailboxNotFound),
		// A client blocked outright (postmaster refused too).
		simple("blocked571.test", next(), nil, func(d *world.Domain) { d.Policy = world.PolicyReject }, "ann", StatusUnknown, ReasonSMTPRejected),
		// One recipient per transaction: the control asks one recipient
		// per new transaction of the same session.
		simple("exch-onercpt.test", next(), func(h *world.Host) { h.MaxRcpts = 1 }, unknown(exchange, false), "zed", StatusInvalid, ReasonMailboxNotFound),
		simple("bare550-onercpt.test", next(), func(h *world.Host) { h.MaxRcpts = 1 }, unknown("550 No such user here", false), "zed", StatusInvalid, ReasonMailboxNotFound),
		// Two per transaction: the control goes on in a new one.
		simple("exch-tworcpt.test", next(), func(h *world.Host) { h.MaxRcpts = 2 }, unknown(exchange, false), "zed", StatusInvalid, ReasonMailboxNotFound),
	}
}

// TestControlCost: the positive control costs two RCPTs, postmaster@ and
// the random local part, in the session that met the refusal, after the
// real one; a refusal the codes read plainly (5.1.1) costs none, and a
// Yahoo-fingerprinted host gets the random probe after an acceptance. The
// world's log is the server's side of each session.
func TestControlCost(t *testing.T) {
	ex := &world.Host{Name: "mx.cost-exch.test", IP: "127.81.8.1"}
	plain := &world.Host{Name: "mx.cost-plain.test", IP: "127.81.8.2"}
	ya := &world.Host{Name: "mta5.am0.yahoodns.net", IP: "127.81.8.3", Provider: "yahoo"}
	w := behaviourWorld(t, []behaviour{
		{hosts: []*world.Host{ex}, domain: &world.Domain{Name: "cost-exch.test", MX: mx(ex.Name), Mailboxes: ok("ann"),
			UnknownReply: "550 5.7.1 Recipient not authorized"}},
		{hosts: []*world.Host{plain}, domain: &world.Domain{Name: "cost-plain.test", MX: mx(plain.Name), Mailboxes: ok("ann")}},
		{hosts: []*world.Host{ya}, domain: &world.Domain{Name: "cost-yahoo.test", MX: mx(ya.Name), Mailboxes: ok("ann")}},
	})
	e := startEnv(t, w, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		email  string
		status Status
		rcpts  string
	}{
		{"zed@cost-exch.test", StatusInvalid, "zed@cost-exch.test postmaster@cost-exch.test verifyd-"},
		{"zed@cost-plain.test", StatusInvalid, "zed@cost-plain.test"},
		{"ann@cost-yahoo.test", StatusValid, "ann@cost-yahoo.test verifyd-"},
	} {
		before := e.run.Log().Len()
		if r := e.engine.Verify(ctx, c.email); r.Status != c.status {
			t.Errorf("%s: %s/%s, want %s", c.email, r.Status, r.Reason, c.status)
		}
		e.engine.Wait()
		e.run.Log().Wait(before+1, 5*time.Second)
		ss := e.run.Log().Sessions()[before:]
		if len(ss) != 1 {
			t.Errorf("%s: %d sessions, want 1", c.email, len(ss))
			continue
		}
		var got []string
		for _, r := range ss[0].Rcpts {
			a := r.Addr
			if strings.HasPrefix(a, "verifyd-") {
				a = "verifyd-"
			}
			got = append(got, a)
		}
		if strings.Join(got, " ") != c.rcpts {
			t.Errorf("%s: RCPTs %q, want %q", c.email, got, c.rcpts)
		}
	}
}

// TestRestrictedMailbox: a mailbox that takes mail only from senders it
// knows answers 550 5.7.1 while the server accepts postmaster@ and refuses
// unknown local parts with 5.1.1: the positive control tells nothing of the
// mailbox (unknown / smtp_rejected), but shows the server is not blocking
// the prober, so the only egress address does not cool: the next address
// of the domain, asked at once, is valid.
func TestRestrictedMailbox(t *testing.T) {
	h := &world.Host{Name: "mx.restricted.test", IP: "127.81.8.4"}
	d := &world.Domain{Name: "restricted.test", MX: mx(h.Name), Mailboxes: ok("ann")}
	d.Mailboxes["staff"] = world.MailboxRestricted
	w := behaviourWorld(t, []behaviour{{hosts: []*world.Host{h}, domain: d}})
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: egressPool[:1]}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		email  string
		status Status
	}{{"staff@restricted.test", StatusUnknown}, {"ann@restricted.test", StatusValid}} {
		r := e.engine.Verify(ctx, c.email)
		if r.Status != c.status {
			t.Errorf("%s: %s/%s (evidence %+v), want %s", c.email, r.Status, r.Reason, r.Evidence, c.status)
		}
		if x := w.Expect(c.email); x.Status != string(c.status) {
			t.Errorf("%s: the world expects %s", c.email, x.Status)
		}
	}
}
