package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/resolver"
)

// selfCheckEnv serves w's DNS (bench/world) on 127.0.0.1 and returns a
// resolver that asks it and a pool made of opts; all three are closed at
// the end of the test.
func selfCheckEnv(t *testing.T, w *world.World, opts Options) (*resolver.Resolver, *Pool) {
	t.Helper()
	w.Defaults()
	srv, err := world.StartDNS(w, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	res, err := resolver.New(resolver.Options{Upstreams: []string{srv.Addr()}, Timeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	opts.Logger = quietLogger
	opts.MaxRatePerHost = -1
	pool, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return res, pool
}

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
	res, pool := selfCheckEnv(t, w, Options{HeloName: helo, Addresses: []netip.Addr{
		netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
		netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5"),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := SelfCheckOptions{Resolver: res, Pool: pool, DNSBLZones: []string{"bl.test"},
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
	for _, s := range pool.Snapshot() {
		if s.Disabled {
			disabled[s.Addr.String()] = true
		}
	}
	if len(disabled) != 3 || disabled["127.0.0.2"] {
		t.Fatalf("disabled %v, want the three failing addresses", disabled)
	}
	// 127.0.0.3 passes once its own HELO name is its PTR name: the
	// self-check enables what it disabled.
	pool.SetHeloNames(map[netip.Addr]string{netip.MustParseAddr("127.0.0.3"): "other.verifyd.test"})
	SelfCheck(ctx, o)
	for _, s := range pool.Snapshot() {
		if s.Addr.String() == "127.0.0.3" && s.Disabled {
			t.Fatalf("127.0.0.3 still disabled after passing: %s", s.DisabledReason)
		}
	}
}

// TestSelfCheckKeepsLastAddress shows that the last active address stays
// in rotation even when it fails: a pool without addresses probes nothing.
func TestSelfCheckKeepsLastAddress(t *testing.T) {
	res, pool := selfCheckEnv(t, &world.World{}, Options{Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.4")}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := SelfCheck(ctx, SelfCheckOptions{Resolver: res, Pool: pool, Enforce: true, Logger: slog.New(slog.DiscardHandler)})
	if len(got[netip.MustParseAddr("127.0.0.4")]) == 0 {
		t.Fatal("an address without reverse DNS passed")
	}
	for _, s := range pool.Snapshot() {
		if s.Disabled {
			t.Fatal("the last address was taken out of rotation")
		}
	}
}

// TestSelfCheckOwnPTRNames: four egress addresses with a PTR each
// (probe1 … probe4) and no HELO name configured anywhere pass the
// self-check, each taking its own forward-confirmed PTR name as HELO name
// (probe's TestSessionsSayOwnPTRNames sees sessions say it). An address
// with a name of its own keeps it, and that name is judged against its
// PTR.
func TestSelfCheckOwnPTRNames(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
		netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5")}
	w := &world.World{}
	for i, a := range addrs {
		w.Hosts = append(w.Hosts, &world.Host{Name: fmt.Sprintf("probe%d.verifyd.test", i+1), IP: a.String(), Mode: world.HostRefuse})
	}
	res, pool := selfCheckEnv(t, w, Options{Addresses: addrs, DefaultHeloName: "fallback.verifyd.test"})
	for _, s := range pool.Snapshot() {
		if s.HeloName != "fallback.verifyd.test" || s.HeloSource != HeloFromDefault {
			t.Fatalf("before the self-check %v says %s (%s)", s.Addr, s.HeloName, s.HeloSource)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := SelfCheckOptions{Resolver: res, Pool: pool, Enforce: true, Logger: slog.New(slog.DiscardHandler)}
	for a, f := range SelfCheck(ctx, o) {
		if len(f) > 0 {
			t.Errorf("%v: %q", a, f)
		}
	}
	for i, s := range pool.Snapshot() {
		if want := fmt.Sprintf("probe%d.verifyd.test", i+1); s.Disabled || s.HeloName != want || s.HeloSource != HeloFromPTR {
			t.Errorf("%v: disabled %v, says %s (%s); want %s from its PTR", s.Addr, s.Disabled, s.HeloName, s.HeloSource, want)
		}
	}

	// A name of its own wins, and is judged against the PTR.
	pool.SetHeloNames(map[netip.Addr]string{addrs[0]: "Mail.Verifyd.Test."})
	got := SelfCheck(ctx, o)
	if n, src := pool.HeloName(addrs[0]); n != "mail.verifyd.test" || src != HeloFromConfig ||
		!strings.Contains(strings.Join(got[addrs[0]], ";"), "HELO name mail.verifyd.test is not a reverse DNS name") {
		t.Errorf("configured name: %s (%s), findings %q", n, src, got[addrs[0]])
	}
}

// TestDiscoverHeloNames: with the self-check off, the addresses still
// learn their forward-confirmed PTR names, and nothing is judged: an
// address without reverse DNS stays in rotation on the default name.
func TestDiscoverHeloNames(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
	w := &world.World{Hosts: []*world.Host{{Name: "probe1.verifyd.test", IP: "127.0.0.2", Mode: world.HostRefuse}}}
	res, pool := selfCheckEnv(t, w, Options{Addresses: addrs, DefaultHeloName: "fallback.verifyd.test"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	DiscoverHeloNames(ctx, SelfCheckOptions{Resolver: res, Pool: pool})
	for _, s := range pool.Snapshot() {
		want, src := "fallback.verifyd.test", HeloFromDefault
		if s.Addr == addrs[0] {
			want, src = "probe1.verifyd.test", HeloFromPTR
		}
		if s.Disabled || s.HeloName != want || s.HeloSource != src || len(s.Findings) > 0 {
			t.Errorf("%v: disabled %v, says %s (%s), findings %q; want %s (%s)", s.Addr, s.Disabled, s.HeloName, s.HeloSource, s.Findings, want, src)
		}
	}
}
