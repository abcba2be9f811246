package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/verifyd/verifyd/server/httpapi"
)

// TestIPLimitsPerIPv6Prefix: spec §8's per source IP window keys an IPv6
// client by its /64 (http.ipv6_prefix_len): addresses of one /64, named
// by a trusted proxy's X-Forwarded-For, share one window; another /64 has
// its own; an IPv4-mapped address is its IPv4 address. Before, each of
// the 2^64 addresses of a /64 had a window of its own.
func TestIPLimitsPerIPv6Prefix(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	start := func(bits int) *testEnv {
		return startServer(t, func(o *Options) {
			proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			o.TrustedProxies, o.IPv6PrefixLen = proxies, bits
			o.Guard = httpapi.NewGuard(httpapi.GuardOptions{DB: o.DB.(httpapi.KeyStore), Now: func() time.Time { return at },
				IPLimits: httpapi.DefaultIPLimits(time.Minute, 100, 100, 100, 2), TrustedProxies: proxies, IPv6PrefixLen: bits})
		})
	}
	e := start(0)
	balance := func(e *testEnv, client string) int {
		t.Helper()
		return e.do("GET", "/v1/balance", "", append(e.bearer(), "X-Forwarded-For", client)...).status
	}
	for _, tc := range []struct {
		client string
		want   int
	}{
		{"2001:db8:1:2::1", 200},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 200},
		{"2001:db8:1:2::3", 429}, // the /64's third request in the window
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 429},
		{"2001:db8:1:3::1", 200}, // another /64
		{"2001:db8:1:3::2", 200},
		{"198.51.100.7", 200},
		{"::ffff:198.51.100.7", 200}, // the same IPv4 client
		{"198.51.100.7", 429},
		{"198.51.100.8", 200},
	} {
		if got := balance(e, tc.client); got != tc.want {
			t.Errorf("GET /v1/balance for %s: %d, want %d", tc.client, got, tc.want)
		}
	}
	// The 429 is the envelope with Retry-After.
	r := e.do("GET", "/v1/balance", "", append(e.bearer(), "X-Forwarded-For", "2001:db8:1:2::9")...)
	if code, _, d := r.errorEnvelope(t); r.status != 429 || code != httpapi.CodeRateLimited || d["retryAfter"] == nil || r.header.Get("Retry-After") == "" {
		t.Errorf("over the /64's limit: %d %s", r.status, r.body)
	}

	// A /128 per client: each address its own window.
	e = start(128)
	for _, client := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::3"} {
		balance(e, client)
		if got := balance(e, client); got != 200 {
			t.Errorf("/128: second request of %s: %d", client, got)
		}
	}
	// A /48: the /64s of one /48 share a window.
	e = start(48)
	balance(e, "2001:db8:1:2::1")
	balance(e, "2001:db8:1:3::1")
	if got := balance(e, "2001:db8:1:4::1"); got != 429 {
		t.Errorf("/48: the third /64 of one /48: %d, want 429", got)
	}
}
