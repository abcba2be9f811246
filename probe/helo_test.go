package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
	"github.com/verifyd/verifyd/egress"
)

// TestSessionsSayOwnPTRNames: four egress addresses with a PTR each
// (probe1 … probe4) and no HELO name configured anywhere learn their names
// from the egress self-check (egress.TestSelfCheckOwnPTRNames); sessions
// from each say that name in EHLO, with MAIL FROM in the same domain.
func TestSessionsSayOwnPTRNames(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for a, f := range egress.SelfCheck(ctx, egress.SelfCheckOptions{Resolver: e.res, Pool: e.pool, Enforce: true,
		Logger: slog.New(slog.DiscardHandler)}) {
		if len(f) > 0 {
			t.Fatalf("self-check: %v: %q", a, f)
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
}
