package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/verifyd/verifyd/bench/world"
)

// startWorld serves a small world with the project's simulated DNS
// (bench/world) on 127.0.0.1.
func startWorld(t *testing.T) *world.DNSServer {
	t.Helper()
	var bigTXT []world.Record
	for i := range 30 {
		bigTXT = append(bigTXT, world.Record{Name: "big", Type: "TXT", Data: fmt.Sprintf("%q", fmt.Sprintf("%02d-%s", i, strings.Repeat("t", 80)))})
	}
	w := &world.World{
		Hosts: []*world.Host{
			{Name: "mx1.alpha.test", IP: "127.0.0.11"},
			{Name: "mx2.alpha.test", IP: "127.0.0.12", IPv6: "fd00::12"},
			{Name: "mx.xn--bcher-kva.test", IP: "127.0.0.13"},
		},
		Domains: []*world.Domain{
			{
				Name:   "alpha.test",
				MX:     []world.MX{{Pref: 20, Host: "mx2.alpha.test"}, {Pref: 10, Host: "mx1.alpha.test"}},
				Signed: true,
				Records: append([]world.Record{
					{Type: "TXT", Data: `"v=spf1 " "ip4:127.0.0.0/8 -all"`},
					{Name: "_dmarc", Type: "TXT", Data: `"v=DMARC1; p=reject"`},
					{Name: "_25._tcp.mx1", Type: "TLSA", Data: "3 1 1 00ff"},
					{Type: "CAA", Data: `0 issue "ca.test"`},
					{Name: "www", Type: "CNAME", Data: "mx1"},
				}, bigTXT...),
			},
			{Name: "null.test", MX: []world.MX{{Pref: 0, Host: "."}}, A: []string{"127.0.0.14"}},
			{Name: "nomx.test", A: []string{"127.0.0.15"}, TTL: 120},
			{Name: "gone.test", NXDomain: true, TTL: 60},
			{Name: "bücher.test", MX: []world.MX{{Pref: 10, Host: "mx.xn--bcher-kva.test"}}},
			{Name: "flaky.test", MX: []world.MX{{Pref: 10, Host: "mx1.alpha.test"}}},
		},
	}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := world.StartDNS(w, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

func TestWorld(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	srv := startWorld(t)
	r := newTestResolver(t, Options{Upstreams: []string{srv.Addr()}, Now: clock.Now, Attempts: 1})
	ctx := context.Background()

	t.Run("MX by preference, AD from a signed zone", func(t *testing.T) {
		mx, err := r.LookupMX(ctx, "Alpha.Test")
		want := []MX{{"mx1.alpha.test", 10}, {"mx2.alpha.test", 20}}
		if err != nil || !slices.Equal(mx.MX, want) || !mx.AD || mx.NullMX {
			t.Errorf("%+v %v; want %v with AD", mx, err, want)
		}
		ip, err := r.LookupIP(ctx, "ip", "mx2.alpha.test")
		if err != nil || !slices.Equal(ip.IPs, []netip.Addr{netip.MustParseAddr("127.0.0.12"), netip.MustParseAddr("fd00::12")}) {
			t.Errorf("mx2 addresses: %+v %v", ip, err)
		}
	})
	t.Run("unsigned zone has no AD", func(t *testing.T) {
		a, err := r.Lookup(ctx, "null.test", dns.TypeMX)
		if err != nil || a.AD {
			t.Errorf("AD %v, %v", a.AD, err)
		}
	})
	t.Run("null MX", func(t *testing.T) {
		mx, err := r.LookupMX(ctx, "null.test")
		if err != nil || !mx.NullMX || len(mx.MX) != 0 || mx.Status != StatusAnswer {
			t.Errorf("%+v %v", mx, err)
		}
	})
	t.Run("NXDOMAIN vs NODATA", func(t *testing.T) {
		mx, err := r.LookupMX(ctx, "gone.test")
		if mx.Status != StatusNXDomain || !errors.Is(err, ErrNXDomain) || mx.TTL != 60*time.Second {
			t.Errorf("gone.test: %+v %v", mx, err)
		}
		mx, err = r.LookupMX(ctx, "nomx.test")
		if mx.Status != StatusNoData || !errors.Is(err, ErrNoData) || mx.TTL != 120*time.Second {
			t.Errorf("nomx.test: %+v %v (the implicit MX case)", mx, err)
		}
		ip, err := r.LookupIP(ctx, "ip4", "nomx.test")
		if err != nil || len(ip.IPs) != 1 {
			t.Errorf("nomx.test A: %+v %v", ip, err)
		}
		if _, err := r.LookupMX(ctx, "sub.gone.test"); !errors.Is(err, ErrNXDomain) {
			t.Errorf("sub.gone.test: %v", err)
		}
		// Cached for the SOA's negative TTL.
		clock.Advance(59 * time.Second)
		_, _ = r.LookupMX(ctx, "gone.test")
		if n := srv.QueryCount("gone.test", dns.TypeMX); n != 1 {
			t.Errorf("gone.test asked %d times within its negative TTL", n)
		}
	})
	t.Run("IDN", func(t *testing.T) {
		mx, err := r.LookupMX(ctx, "BÜCHER.test")
		if err != nil || len(mx.MX) != 1 || mx.MX[0].Host != "mx.xn--bcher-kva.test" {
			t.Errorf("%+v %v", mx, err)
		}
		if n := srv.QueryCount("xn--bcher-kva.test", dns.TypeMX); n != 1 {
			t.Errorf("the A-label was asked %d times", n)
		}
	})
	t.Run("TXT, TLSA, CAA, PTR, CNAME", func(t *testing.T) {
		txt, err := r.LookupTXT(ctx, "alpha.test")
		if err != nil || !slices.Equal(txt.TXT, []string{"v=spf1 ip4:127.0.0.0/8 -all"}) {
			t.Errorf("SPF: %q %v", txt.TXT, err)
		}
		txt, err = r.LookupTXT(ctx, "_dmarc.alpha.test")
		if err != nil || !slices.Equal(txt.TXT, []string{"v=DMARC1; p=reject"}) {
			t.Errorf("DMARC: %q %v", txt.TXT, err)
		}
		tlsa, err := r.LookupTLSA(ctx, "_25._tcp.mx1.alpha.test")
		if err != nil || len(tlsa.Records) != 1 || string(tlsa.Records[0].Data) != "\x00\xff" || !tlsa.AD {
			t.Errorf("TLSA: %+v %v", tlsa, err)
		}
		caa, err := r.LookupCAA(ctx, "alpha.test")
		if err != nil || len(caa.Records) != 1 || caa.Records[0].Value != "ca.test" {
			t.Errorf("CAA: %+v %v", caa, err)
		}
		ptr, err := r.LookupPTR(ctx, netip.MustParseAddr("127.0.0.11"))
		if err != nil || !slices.Equal(ptr.Names, []string{"mx1.alpha.test"}) {
			t.Errorf("PTR: %+v %v", ptr, err)
		}
		ip, err := r.LookupIP(ctx, "ip4", "www.alpha.test")
		if err != nil || !slices.Equal(ip.IPs, []netip.Addr{netip.MustParseAddr("127.0.0.11")}) {
			t.Errorf("through a CNAME: %+v %v", ip, err)
		}
	})
	t.Run("truncated over UDP, whole over TCP", func(t *testing.T) {
		before := tcpFallbacks.Get()
		txt, err := r.LookupTXT(ctx, "big.alpha.test")
		if err != nil || len(txt.TXT) != 30 {
			t.Fatalf("%d records, %v; want 30", len(txt.TXT), err)
		}
		if tcpFallbacks.Get() == before {
			t.Error("no TCP fallback")
		}
	})
	t.Run("SERVFAIL and drop are temporary", func(t *testing.T) {
		srv.SetFault("flaky.test", world.DNSFaultServFail)
		mx, err := r.LookupMX(ctx, "flaky.test")
		if mx.Status != StatusTempFail || !errors.Is(err, ErrTemporary) {
			t.Errorf("servfail: %+v %v", mx, err)
		}
		srv.SetFault("flaky.test", world.DNSFaultDrop)
		quick := newTestResolver(t, Options{Upstreams: []string{srv.Addr()}, Timeout: 100 * time.Millisecond})
		mx, err = quick.LookupMX(ctx, "flaky.test")
		if mx.Status != StatusTempFail || !errors.Is(err, ErrTemporary) || errors.Is(err, ErrNXDomain) {
			t.Errorf("drop: %+v %v", mx, err)
		}
		srv.SetFault("flaky.test", world.DNSFaultNone)
		if mx, err := r.LookupMX(ctx, "flaky.test"); err != nil || len(mx.MX) != 1 {
			t.Errorf("recovered: %+v %v", mx, err)
		}
	})
	t.Run("dedup", func(t *testing.T) {
		srv.SetDelay("flaky.test", 100*time.Millisecond)
		defer srv.SetDelay("flaky.test", 0)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if _, err := r.LookupTXT(ctx, "flaky.test"); !errors.Is(err, ErrNoData) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := srv.QueryCount("flaky.test", dns.TypeTXT); n != 1 {
			t.Errorf("50 concurrent lookups, %d queries", n)
		}
	})
}
