package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
	"github.com/verifyd/verifyd/resolver"
)

// egressPool is the test's egress addresses: loopback addresses the world's
// hosts (127.1+.x.y and the subnets tests pick) never use.
var egressPool = []netip.Addr{
	netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4"),
}

type env struct {
	w        *world.World
	run      *world.Running
	res      *resolver.Resolver
	pool     *egress.Pool
	engine   *Engine
	cmdTO    time.Duration
	startTLS bool
}

type envOptions struct {
	egress   egress.Options
	cmdTO    time.Duration
	startTLS bool
	registry bool // start the world's RDAP and WHOIS servers
}

// startEnv starts w, a resolver on its DNS, an egress pool and an engine.
func startEnv(t testing.TB, w *world.World, o envOptions) *env {
	t.Helper()
	wo := world.Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1}
	if o.registry {
		wo.RDAPAddr, wo.WHOISAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	run, err := world.Start(w, wo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	res, err := resolver.New(resolver.Options{Upstreams: []string{run.DNS.Addr()}, Timeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	eo := o.egress
	eo.Logger = slog.New(slog.DiscardHandler)
	if eo.Addresses == nil {
		eo.Addresses = egressPool
	}
	if eo.GreylistCooldown == 0 {
		eo.GreylistCooldown = time.Second
	}
	if eo.MaxRatePerHost == 0 {
		eo.MaxRatePerHost = -1
	}
	pool, err := egress.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	if o.cmdTO == 0 {
		// Generous, for loaded CI machines; tarpits take this long.
		o.cmdTO = 5 * time.Second
	}
	eng, err := New(Options{
		Resolver: res, Egress: pool, SMTPPort: run.SMTP.Port(), HeloName: "prober.verifyd.test",
		CommandTimeout: o.cmdTO, GreetingTimeout: o.cmdTO, SessionTimeout: 10 * time.Second, StartTLS: o.startTLS,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{w: w, run: run, res: res, pool: pool, engine: eng, cmdTO: o.cmdTO, startTLS: o.startTLS}
}

// engineWith is another engine on the same world and egress pool, with
// its own resolver.
func (e *env) engineWith(t testing.TB, res *resolver.Resolver, mod ...func(*Options)) *Engine {
	t.Helper()
	o := Options{
		Resolver: res, Egress: e.pool, SMTPPort: e.run.SMTP.Port(), HeloName: "prober.verifyd.test",
		CommandTimeout: e.cmdTO, GreetingTimeout: e.cmdTO, SessionTimeout: 10 * time.Second, StartTLS: e.startTLS,
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, m := range mod {
		m(&o)
	}
	eng, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestEngineAgainstWorld verifies every address of a generated world with
// every behaviour, and checks each verdict and reason against the world's
// expectation, then checks in the world's session log that only the pool's
// addresses were used, that the load rotated across them, and that the
// per-(egress, host) cap held.
func TestEngineAgainstWorld(t *testing.T) {
	w, exp, err := world.Generate(world.GenOptions{
		Domains: 200, Seed: 5, CatchAll: 0.08, Greylist: 0.06, Reject: 0.04, Tarpit: 0.02,
		Refuse: 0.03, Busy: 0.03, NullMX: 0.03, NoMX: 0.03, ImplicitMX: 0.04, NXDomain: 0.04,
		ServFail: 0.03, MailboxFull: 0.05, MailboxDisabled: 0.05, STARTTLS: 0.3, RoleMailbox: true,
		GreylistDelay: world.Duration(time.Second), AddressesPerDomain: 5, MailboxesPerDomain: 3,
		DisposableDomains: []string{"mailinator.com"}, FirstIP: "127.62.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	const maxConns = 2
	e := startEnv(t, w, envOptions{egress: egress.Options{MaxConnsPerHost: maxConns}, startTLS: true})
	full0, resumed0 := tlsHandshakes[false].Get(), tlsHandshakes[true].Get()

	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	confusion := map[string]int{}
	for _, x := range exp {
		wg.Add(1)
		sem <- struct{}{}
		go func(x world.Expectation) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := e.engine.Verify(ctx, x.Email)
			if string(r.Status) != x.Status || string(r.Reason) != x.Reason {
				t.Errorf("%s: %s/%s (evidence %+v), want %s/%s", x.Email, r.Status, r.Reason, r.Evidence, x.Status, x.Reason)
			}
			// A greylisting domain may greylist the catch-all probe anew
			// when it comes from another egress address: unknown is honest.
			grey := w.Domain(domainOf(x.Email)).Policy == world.PolicyGreylist
			if x.Status == "valid" && !grey && (r.Evidence.CatchAll != CatchAllNo || r.Score < 75) {
				t.Errorf("%s: valid with catch-all finding %d and score %d: the random RCPT's refusal was not learnt", x.Email, r.Evidence.CatchAll, r.Score)
			}
			if r.Checks.IsCatchAll != x.CatchAll {
				t.Errorf("%s: is_catch_all %v, want %v", x.Email, r.Checks.IsCatchAll, x.CatchAll)
			}
			if x.Role && !r.Checks.IsRoleBased {
				t.Errorf("%s: not flagged role-based", x.Email)
			}
			mu.Lock()
			confusion[x.Status+"/"+x.Reason]++
			mu.Unlock()
		}(x)
	}
	wg.Wait()
	if len(confusion) < 12 {
		t.Errorf("only %d kinds of verdict exercised: %v", len(confusion), confusion)
	}

	sessions := e.run.Log().Sessions()
	byClient := map[string]int{}
	for _, s := range sessions {
		byClient[s.Client]++
	}
	for c, n := range byClient {
		if !inPool(c) {
			t.Errorf("%d sessions came from %s, outside the egress pool", n, c)
		}
	}
	if len(byClient) != len(egressPool) {
		t.Errorf("sessions came from %d addresses, want all %d of the pool: %v", len(byClient), len(egressPool), byClient)
	}
	checkCap(t, sessions, maxConns)
	checkGreylistAffinity(t, sessions)
	// Five addresses a domain, each its own session: a STARTTLS host's
	// sessions after the first ones (they run at once) resume a session.
	full, resumed := tlsHandshakes[false].Get()-full0, tlsHandshakes[true].Get()-resumed0
	if full == 0 || resumed == 0 {
		t.Errorf("STARTTLS handshakes: %d full, %d resumed; want both", full, resumed)
	}
	t.Logf("%d addresses, %d sessions, per egress address %v; TLS handshakes %d full, %d resumed", len(exp), len(sessions), byClient, full, resumed)
}

func inPool(ip string) bool {
	for _, a := range egressPool {
		if a.String() == ip {
			return true
		}
	}
	return false
}

// checkCap checks from the session log that no (client, host) pair ever had
// more than cap sessions open at once.
func checkCap(t *testing.T, sessions []world.Session, cap int) {
	t.Helper()
	type ev struct {
		at    time.Time
		delta int
	}
	byPair := map[string][]ev{}
	for _, s := range sessions {
		k := s.Client + ">" + s.HostIP
		byPair[k] = append(byPair[k], ev{s.Start, 1}, ev{s.End, -1})
	}
	for k, evs := range byPair {
		sort.Slice(evs, func(i, j int) bool {
			if evs[i].at.Equal(evs[j].at) {
				return evs[i].delta < evs[j].delta
			}
			return evs[i].at.Before(evs[j].at)
		})
		open, peak := 0, 0
		for _, e := range evs {
			open += e.delta
			peak = max(peak, open)
		}
		// The server logs a session's end a little after the client has
		// released its slot, so allow one of overlap at the boundary.
		if peak > cap+1 {
			t.Errorf("%s: %d sessions at once, cap %d", k, peak, cap)
		}
	}
}

// checkGreylistAffinity checks that every recipient greylisted and later
// accepted was retried from the address that was greylisted.
func checkGreylistAffinity(t *testing.T, sessions []world.Session) {
	t.Helper()
	greyFrom := map[string]string{}
	retried := 0
	for _, s := range sessions {
		for _, r := range s.Rcpts {
			addr := strings.ToLower(r.Addr)
			switch {
			case r.Code == 450:
				if _, ok := greyFrom[addr]; !ok {
					greyFrom[addr] = s.Client
				}
			case r.Code == 250 && greyFrom[addr] != "":
				retried++
				if greyFrom[addr] != s.Client {
					t.Errorf("%s greylisted from %s, retried from %s", addr, greyFrom[addr], s.Client)
				}
			}
		}
	}
	if retried == 0 {
		t.Error("no greylisted recipient was retried and accepted")
	}
}

// TestEngineVerifyDomainBatch checks the batch mode: one session for many
// addresses of a domain, RCPT caps handled by another session, greylisted
// addresses left for later with RetryAt and answered on the retry.
func TestEngineVerifyDomainBatch(t *testing.T) {
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx.big.test", IP: "127.63.0.1", MaxRcpts: 7},
			{Name: "mx.grey.test", IP: "127.63.0.2"},
		},
		Domains: []*world.Domain{
			{Name: "big.test", MX: []world.MX{{Pref: 10, Host: "mx.big.test"}}, Mailboxes: map[string]world.MailboxState{}},
			{Name: "grey.test", MX: []world.MX{{Pref: 10, Host: "mx.grey.test"}}, Policy: world.PolicyGreylist,
				GreylistDelay: world.Duration(time.Second), Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}},
		},
	}
	var emails []string
	for i := range 40 {
		local := fmt.Sprintf("user%02d", i)
		if i%3 != 0 {
			w.Domains[0].Mailboxes[local] = world.MailboxOK
		}
		emails = append(emails, local+"@big.test")
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, w, envOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	results := e.engine.VerifyDomain(ctx, emails, netip.Addr{})
	for i, r := range results {
		want := w.Expect(emails[i])
		if string(r.Status) != want.Status || string(r.Reason) != want.Reason {
			t.Errorf("%s: %s/%s, want %s/%s", emails[i], r.Status, r.Reason, want.Status, want.Reason)
		}
	}
	// 40 RCPTs, 7 per transaction: 6 sessions (a 452 ends each session),
	// not 40. The catch-all probe is not needed: user00 got a 5.1.1. The
	// server logs a session just after its close, so wait for the sixth.
	e.run.Log().Wait(6, 5*time.Second)
	sessions := e.run.Log().Sessions()
	if len(sessions) != 6 {
		t.Errorf("%d sessions for 40 addresses with 7 RCPTs per transaction", len(sessions))
	}

	// Greylisting: the first call leaves the address unknown with RetryAt;
	// a call after RetryAt from the same egress address gets the answer.
	r := e.engine.VerifyDomain(ctx, []string{"ann@grey.test"}, netip.Addr{})[0]
	if r.Status != StatusUnknown || r.RetryAt.IsZero() || !r.Egress.IsValid() {
		t.Fatalf("greylisted: %s/%s retry %v egress %v", r.Status, r.Reason, r.RetryAt, r.Egress)
	}
	time.Sleep(time.Until(r.RetryAt) + 50*time.Millisecond)
	r2 := e.engine.VerifyDomain(ctx, []string{"ann@grey.test"}, r.Egress)[0]
	if r2.Status != StatusValid || r2.Egress != r.Egress {
		t.Fatalf("retry: %s/%s from %v (first from %v)", r2.Status, r2.Reason, r2.Egress, r.Egress)
	}
}
