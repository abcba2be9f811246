package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
)

// TestSelfCheck checks four egress addresses against the world's DNS: one
// well configured, one whose PTR is not the HELO name, one without reverse
// DNS, one listed on a block list. The failing ones are taken out of
// rotation and come back when fixed; the operator error code of a list is
// not a listing.
func TestSelfCheck(t *testing.T) {
	const helo = "prober.verifyd.test"
	w := &world.World{
		Hosts: []*world.Host{
			// Egress addresses as the world's DNS sees them: nothing
			// listens there (refuse); the names give A and PTR records.
			{Name: helo, IP: "127.0.0.2", Mode: world.HostRefuse},
			{Name: "other.verifyd.test", IP: "127.0.0.3", Mode: world.HostRefuse},
			{Name: "listed.verifyd.test", IP: "127.0.0.5", Mode: world.HostRefuse, PTR: helo, Aliases: []string{}},
			{Name: "odd.verifyd.test", IP: "127.0.0.6", Mode: world.HostRefuse},
		},
		DNSBL: []*world.DNSBLZone{{Zone: "bl.test", Listed: map[string]string{
			"127.0.0.5": "127.0.0.2",       // listed
			"127.0.0.6": "127.255.255.254", // the list operator's error code
		}}},
	}
	w.Defaults()
	e := startEnv(t, w, envOptions{egress: egress.Options{HeloName: helo, Addresses: []netip.Addr{
		netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
		netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5"),
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := SelfCheckOptions{Resolver: e.res, Pool: e.pool, DNSBLZones: []string{"bl.test"},
		Enforce: true, Logger: slog.New(slog.DiscardHandler)}
	got := SelfCheck(ctx, o)
	want := map[string]string{
		"127.0.0.2": "",
		"127.0.0.3": "HELO name",
		"127.0.0.4": "no reverse DNS",
		"127.0.0.5": "listed on bl.test",
	}
	for a, w := range want {
		f := strings.Join(got[netip.MustParseAddr(a)], "; ")
		if (w == "") != (f == "") || !strings.Contains(f, w) {
			t.Errorf("%s: findings %q, want %q", a, f, w)
		}
	}
	// 127.0.0.5's PTR is the HELO name, but that name does not resolve
	// back to it: forward confirmation fails too.
	if f := strings.Join(got[netip.MustParseAddr("127.0.0.5")], "; "); !strings.Contains(f, "does not resolve back") {
		t.Errorf("127.0.0.5: %q lacks the forward-confirmation finding", f)
	}
	disabled := map[string]bool{}
	for _, s := range e.pool.Snapshot() {
		if s.Disabled {
			disabled[s.Addr.String()] = true
		}
	}
	if len(disabled) != 3 || disabled["127.0.0.2"] {
		t.Fatalf("disabled %v, want the three failing addresses", disabled)
	}
	// 127.0.0.3 passes once its own HELO name is its PTR name: the
	// self-check enables what it disabled.
	e.pool.SetHeloNames(map[netip.Addr]string{netip.MustParseAddr("127.0.0.3"): "other.verifyd.test"})
	SelfCheck(ctx, o)
	for _, s := range e.pool.Snapshot() {
		if s.Addr.String() == "127.0.0.3" && s.Disabled {
			t.Fatalf("127.0.0.3 still disabled after passing: %s", s.DisabledReason)
		}
	}
}

// TestSelfCheckKeepsLastAddress shows that the last active address stays
// in rotation even when it fails: a pool without addresses probes nothing.
func TestSelfCheckKeepsLastAddress(t *testing.T) {
	w := &world.World{}
	w.Defaults()
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.4")}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := SelfCheck(ctx, SelfCheckOptions{Resolver: e.res, Pool: e.pool, Enforce: true, Logger: slog.New(slog.DiscardHandler)})
	if len(got[netip.MustParseAddr("127.0.0.4")]) == 0 {
		t.Fatal("an address without reverse DNS passed")
	}
	for _, s := range e.pool.Snapshot() {
		if s.Disabled {
			t.Fatal("the last address was taken out of rotation")
		}
	}
}

// TestSelfCheckOwnPTRNames: four egress addresses with a PTR each
// (probe1 … probe4) and no HELO name configured anywhere pass the
// self-check, each taking its own forward-confirmed PTR name; sessions
// from each say that name in EHLO, with MAIL FROM in the same domain. An
// address with a name of its own keeps it, and one global name (a NAT)
// is judged against every PTR.
func TestSelfCheckOwnPTRNames(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
		netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5")}
	w := &world.World{
		Hosts: []*world.Host{{Name: "mx.shop.test", IP: "127.82.0.1"}},
		Domains: []*world.Domain{{Name: "shop.test", MX: []world.MX{{Pref: 10, Host: "mx.shop.test"}},
			Mailboxes: map[string]world.MailboxState{"ann": world.MailboxOK}}},
	}
	for i, a := range addrs {
		w.Hosts = append(w.Hosts, &world.Host{Name: fmt.Sprintf("probe%d.verifyd.test", i+1), IP: a.String(), Mode: world.HostRefuse})
	}
	w.Defaults()
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: addrs, MaxConnsPerHost: 1, DefaultHeloName: "fallback.verifyd.test"}})
	for _, s := range e.pool.Snapshot() {
		if s.HeloName != "fallback.verifyd.test" || s.HeloSource != egress.HeloFromDefault {
			t.Fatalf("before the self-check %v says %s (%s)", s.Addr, s.HeloName, s.HeloSource)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := SelfCheckOptions{Resolver: e.res, Pool: e.pool, Enforce: true, Logger: slog.New(slog.DiscardHandler)}
	for a, f := range SelfCheck(ctx, o) {
		if len(f) > 0 {
			t.Errorf("%v: %q", a, f)
		}
	}
	for i, s := range e.pool.Snapshot() {
		if want := fmt.Sprintf("probe%d.verifyd.test", i+1); s.Disabled || s.HeloName != want || s.HeloSource != egress.HeloFromPTR {
			t.Errorf("%v: disabled %v, says %s (%s); want %s from its PTR", s.Addr, s.Disabled, s.HeloName, s.HeloSource, want)
		}
	}
	// Four validations at once, one session per address (one slot each
	// for the MX): each says its own name.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := verify(t, e.engine, "ann@shop.test"); r.Status != StatusValid {
				t.Errorf("ann@shop.test: %s/%s", r.Status, r.Reason)
			}
		}()
	}
	wg.Wait()
	e.run.Log().Wait(4, 10*time.Second)
	for _, s := range e.run.Log().Sessions() {
		i := slices.Index(addrs, netip.MustParseAddr(s.Client))
		if want := fmt.Sprintf("probe%d.verifyd.test", i+1); s.Helo != want || s.MailFrom != "verify@"+want {
			t.Errorf("session from %s: EHLO %s, MAIL FROM %s; want %s", s.Client, s.Helo, s.MailFrom, want)
		}
	}

	// A name of its own wins, and is judged against the PTR.
	e.pool.SetHeloNames(map[netip.Addr]string{addrs[0]: "Mail.Verifyd.Test."})
	got := SelfCheck(ctx, o)
	if n, src := e.pool.HeloName(addrs[0]); n != "mail.verifyd.test" || src != egress.HeloFromConfig ||
		!strings.Contains(strings.Join(got[addrs[0]], ";"), "HELO name mail.verifyd.test is not a reverse DNS name") {
		t.Errorf("configured name: %s (%s), findings %q", n, src, got[addrs[0]])
	}
}
