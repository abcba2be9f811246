package probe

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
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
	e := startEnv(t, w, envOptions{egress: egress.Options{Addresses: []netip.Addr{
		netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
		netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5"),
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := SelfCheckOptions{Resolver: e.res, Pool: e.pool, HeloName: helo, DNSBLZones: []string{"bl.test"},
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
	// 127.0.0.3 passes once the HELO name is its PTR name: the self-check
	// enables what it disabled.
	o.HeloName = "other.verifyd.test"
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
	got := SelfCheck(ctx, SelfCheckOptions{Resolver: e.res, Pool: e.pool, HeloName: "x.test", Enforce: true, Logger: slog.New(slog.DiscardHandler)})
	if len(got[netip.MustParseAddr("127.0.0.4")]) == 0 {
		t.Fatal("an address without reverse DNS passed")
	}
	for _, s := range e.pool.Snapshot() {
		if s.Disabled {
			t.Fatal("the last address was taken out of rotation")
		}
	}
}
