package authsig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe/authsig"
	"github.com/verifyd/verifyd/resolver"
)

const (
	fullDomain = "full.example"
	fullMX     = "mx.full.example"
	ed25519Key = "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
)

var fullMXIP = netip.MustParseAddr("192.0.2.25")

// fullZone is a domain with every DNS-based signal set: SPF through an
// include, DKIM at selector1, DMARC with every tag, MTA-STS, TLS-RPT,
// BIMI with a VMC, svc trust, CAA, a signed MX and TLSA, forward-confirmed
// reverse DNS, a listing on one block list of two and on the allow list.
func fullZone() *mockDNS {
	m := newMockDNS()
	m.txt[fullDomain] = []string{"google-site-verification=x", "v=spf1 include:_spf.full.example -all"}
	m.txt["_spf.full.example"] = []string{"v=spf1 ip4:192.0.2.0/24 ~all"}
	m.txt["selector1._domainkey.full.example"] = []string{ed25519Key}
	m.txt["_dmarc.full.example"] = []string{"v=DMARC1; p=reject; sp=quarantine; adkim=s; aspf=s; rua=mailto:d@full.example"}
	m.txt["_mta-sts.full.example"] = []string{"v=STSv1; id=2026"}
	m.txt["_smtp._tls.full.example"] = []string{"v=TLSRPTv1; rua=mailto:t@full.example"}
	m.txt["default._bimi.full.example"] = []string{"v=BIMI1; l=https://full.example/l.svg; a=https://full.example/v.pem"}
	m.txt["_svc-trust.full.example"] = []string{"v=SVC1; k=key1; l=4"}
	m.caa[fullDomain] = []resolver.CAA{{Tag: "issue", Value: "ca.example"}}
	m.mx[fullDomain] = []resolver.MX{{Host: fullMX, Pref: 10}}
	m.signed[fullDomain] = true
	m.tlsa["_25._tcp.mx.full.example"] = []resolver.TLSA{{Usage: 3, Selector: 1, MatchingType: 1, Data: make([]byte, 32)}}
	m.signed["_25._tcp.mx.full.example"] = true
	m.ip[fullMX] = []netip.Addr{fullMXIP, netip.MustParseAddr("2001:db8::25")}
	m.ptr[fullMXIP] = []string{fullMX}
	m.ip["25.2.0.192.bl.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	m.ip["25.2.0.192.wl.example"] = []netip.Addr{netip.MustParseAddr("127.0.5.1")}
	return m
}

// fullWant is what a collection of fullZone gives (before the session
// keys are merged).
func fullWant() map[string]any {
	return map[string]any{
		"spf": "strict", "dkim": "found", "dmarc": "found", "dmarc_policy": "reject",
		"dmarc_subdomain_policy": "quarantine", "dmarc_alignment_spf": "s", "dmarc_alignment_dkim": "s",
		"dmarc_rua_set": true, "mta_sts": true, "tls_rpt": true, "bimi": true, "bimi_vmc": true,
		"caa": true, "svc_certified": true, "svc_trust_level": 3.0, "svc_key_id": "key1",
		"dnssec": true, "dane": true, "ptr": "mx.full.example", "fcrdns": true,
		"dnsbl_clean": false, "dnsbl_lists_on": []any{"bl.example"}, "dnswl_listed": true,
		"domain_age_days": 0.0,
	}
}

// bareWant is what a domain that publishes nothing gives, its MX address
// without PTR: the lookups answered, so the "none" postures are known.
func bareWant() map[string]any {
	return map[string]any{
		"spf": "none", "dkim": "none", "dmarc": "none", "mta_sts": false, "tls_rpt": false,
		"bimi": false, "bimi_vmc": false, "caa": false, "svc_certified": false, "svc_trust_level": 0.0,
		"dnssec": false, "dane": false, "fcrdns": false, "dnsbl_clean": true, "dnsbl_lists_on": []any{},
		"dnswl_listed": false, "domain_age_days": 0.0,
	}
}

func testCollector(t testing.TB, m *mockDNS, mod func(*authsig.CollectorOptions)) *authsig.Collector {
	t.Helper()
	o := authsig.CollectorOptions{
		Resolver:  m,
		TrustKeys: authsig.TrustKeys{"key1": 3},
		DNSBL:     []string{"bl.example", "BL2.example."},
		DNSWL:     []string{"wl.example"},
		Timeout:   10 * time.Second, // generous: a timeout is not what is tested
		Logger:    slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&o)
	}
	c, err := authsig.NewCollector(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// asJSON is s as the receipt would carry it.
func asJSON(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func diffJSON(got, want map[string]any) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			d = append(d, "missing "+k)
		case !reflect.DeepEqual(g, want[k]):
			b1, _ := json.Marshal(g)
			b2, _ := json.Marshal(want[k])
			d = append(d, k+" = "+string(b1)+", want "+string(b2))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			b, _ := json.Marshal(got[k])
			d = append(d, "unexpected "+k+" = "+string(b))
		}
	}
	return strings.Join(d, "; ")
}

func ctx10s(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCollectorSignals is the table of the collector: every signal with
// well-formed, malformed, missing and ambiguous records, and lookups that
// fail part of the way — a failed lookup leaves its keys out, never a
// guess.
func TestCollectorSignals(t *testing.T) {
	del := func(keys ...string) func(map[string]any) {
		return func(w map[string]any) {
			for _, k := range keys {
				delete(w, k)
			}
		}
	}
	set := func(kv ...any) func(map[string]any) {
		return func(w map[string]any) {
			for i := 0; i < len(kv); i += 2 {
				w[kv[i].(string)] = kv[i+1]
			}
		}
	}
	dmarcKeys := []string{"dmarc", "dmarc_policy", "dmarc_subdomain_policy", "dmarc_alignment_spf", "dmarc_alignment_dkim", "dmarc_rua_set"}
	ipKeys := []string{"ptr", "fcrdns", "dnsbl_clean", "dnsbl_lists_on", "dnswl_listed"}
	tests := []struct {
		name   string
		zone   func(m *mockDNS)
		opts   func(o *authsig.CollectorOptions)
		mx     []string
		domain string
		base   func() map[string]any
		want   func(map[string]any)
	}{
		{name: "every signal set"},
		{
			name: "bare domain", base: bareWant,
			zone: func(m *mockDNS) {
				*m = *newMockDNS()
				m.mx[fullDomain] = []resolver.MX{{Host: fullMX, Pref: 10}}
				m.ip[fullMX] = []netip.Addr{fullMXIP}
			},
		},
		// SPF.
		{name: "spf softfail without include", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 mx ~all"} }, want: set("spf", "softfail")},
		{name: "spf neutral", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 mx"} }, want: set("spf", "neutral")},
		{name: "spf pass", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 +all"} }, want: set("spf", "pass")},
		{name: "spf through redirect", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 redirect=_spf.full.example"} }, want: set("spf", "softfail")},
		{name: "spf two records (ambiguous)", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 -all", "v=spf1 ~all"} }, want: set("spf", "permerror")},
		{name: "spf malformed", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 ip4:300.1.1.1 -all"} }, want: set("spf", "permerror")},
		{name: "spf include without record", zone: func(m *mockDNS) { delete(m.txt, "_spf.full.example") }, want: set("spf", "permerror")},
		{name: "spf include lookup fails", zone: func(m *mockDNS) { m.fail["_spf.full.example"] = true }, want: del("spf")},
		{name: "spf redirect depends on the sender", zone: func(m *mockDNS) { m.txt[fullDomain] = []string{"v=spf1 redirect=_spf.%{d}"} }, want: del("spf")},
		{name: "spf domain lookup fails", zone: func(m *mockDNS) { m.fail["TXT "+fullDomain] = true }, want: del("spf")},
		// DKIM.
		{name: "dkim revoked", zone: func(m *mockDNS) { m.txt["selector1._domainkey.full.example"] = []string{"v=DKIM1; p="} }, want: set("dkim", "revoked")},
		{name: "dkim malformed", zone: func(m *mockDNS) { m.txt["selector1._domainkey.full.example"] = []string{"v=DKIM1; k=rsa; p=AAAA"} }, want: set("dkim", "none")},
		{name: "dkim two records (ambiguous)", zone: func(m *mockDNS) {
			m.txt["selector1._domainkey.full.example"] = []string{ed25519Key, ed25519Key}
		}, want: set("dkim", "none")},
		{name: "dkim found though another selector fails", zone: func(m *mockDNS) { m.fail["google._domainkey.full.example"] = true }},
		{name: "dkim none known while a selector fails", zone: func(m *mockDNS) {
			delete(m.txt, "selector1._domainkey.full.example")
			m.txt["s2025._domainkey.full.example"] = []string{ed25519Key} // a key, at no selector tried
			m.fail["google._domainkey.full.example"] = true
		}, want: del("dkim")},
		{name: "dkim none: nothing under _domainkey (NXDOMAIN)", zone: func(m *mockDNS) { delete(m.txt, "selector1._domainkey.full.example") },
			want: set("dkim", "none")},
		{name: "dkim found though _domainkey fails", zone: func(m *mockDNS) { m.fail["_domainkey.full.example"] = true }},
		{name: "dkim at a configured selector", opts: func(o *authsig.CollectorOptions) { o.DKIMSelectors = []string{"s2025"} },
			zone: func(m *mockDNS) { m.txt["s2025._domainkey.full.example"] = []string{ed25519Key} }},
		{name: "dkim at no configured selector", opts: func(o *authsig.CollectorOptions) { o.DKIMSelectors = []string{"s2025"} }, want: set("dkim", "none")},
		// DMARC.
		{name: "dmarc defaults", zone: func(m *mockDNS) { m.txt["_dmarc.full.example"] = []string{"v=DMARC1; p=quarantine"} },
			want: set("dmarc_policy", "quarantine", "dmarc_subdomain_policy", "quarantine", "dmarc_alignment_spf", "r", "dmarc_alignment_dkim", "r", "dmarc_rua_set", false)},
		{name: "dmarc two records (ambiguous)", zone: func(m *mockDNS) {
			m.txt["_dmarc.full.example"] = []string{"v=DMARC1; p=reject", "v=DMARC1; p=none"}
		}, want: func(w map[string]any) { del(dmarcKeys...)(w); w["dmarc"] = "none" }},
		{name: "dmarc malformed policy without rua", zone: func(m *mockDNS) { m.txt["_dmarc.full.example"] = []string{"v=DMARC1; p=block"} },
			want: func(w map[string]any) { del(dmarcKeys...)(w); w["dmarc"] = "none" }},
		{name: "dmarc missing", zone: func(m *mockDNS) { delete(m.txt, "_dmarc.full.example") },
			want: func(w map[string]any) { del(dmarcKeys...)(w); w["dmarc"] = "none" }},
		{name: "dmarc lookup fails", zone: func(m *mockDNS) { m.fail["_dmarc.full.example"] = true }, want: del(dmarcKeys...)},
		// MTA-STS, TLS-RPT, BIMI, svc.
		{name: "mta-sts without id", zone: func(m *mockDNS) { m.txt["_mta-sts.full.example"] = []string{"v=STSv1;"} }, want: set("mta_sts", false)},
		{name: "mta-sts lookup fails", zone: func(m *mockDNS) { m.fail["_mta-sts.full.example"] = true }, want: del("mta_sts")},
		{name: "tls-rpt two records", zone: func(m *mockDNS) {
			m.txt["_smtp._tls.full.example"] = []string{"v=TLSRPTv1; rua=mailto:a@full.example", "v=TLSRPTv1; rua=mailto:b@full.example"}
		}, want: set("tls_rpt", false)},
		{name: "tls-rpt lookup fails", zone: func(m *mockDNS) { m.fail["_smtp._tls.full.example"] = true }, want: del("tls_rpt")},
		{name: "bimi declined", zone: func(m *mockDNS) { m.txt["default._bimi.full.example"] = []string{"v=BIMI1; l=; a=;"} }, want: set("bimi", false, "bimi_vmc", false)},
		{name: "bimi without vmc", zone: func(m *mockDNS) {
			m.txt["default._bimi.full.example"] = []string{"v=BIMI1; l=https://full.example/l.svg"}
		}, want: set("bimi_vmc", false)},
		{name: "bimi lookup fails", zone: func(m *mockDNS) { m.fail["default._bimi.full.example"] = true }, want: del("bimi", "bimi_vmc")},
		{name: "svc key not issued", opts: func(o *authsig.CollectorOptions) { o.TrustKeys = nil },
			want: func(w map[string]any) { w["svc_certified"], w["svc_trust_level"] = false, 0.0; delete(w, "svc_key_id") }},
		{name: "svc lookup fails", zone: func(m *mockDNS) { m.fail["_svc-trust.full.example"] = true }, want: del("svc_certified", "svc_trust_level", "svc_key_id")},
		// CAA.
		{name: "caa missing", zone: func(m *mockDNS) { delete(m.caa, fullDomain) }, want: set("caa", false)},
		{name: "caa lookup fails", zone: func(m *mockDNS) { m.fail["CAA "+fullDomain] = true }, want: del("caa")},
		{name: "whole zone fails", zone: func(m *mockDNS) { m.fail[fullDomain] = true }, want: del("spf", "caa", "dnssec", "dane")},
		// DNSSEC and DANE.
		{name: "mx answer not signed", zone: func(m *mockDNS) { m.signed[fullDomain] = false }, want: set("dnssec", false, "dane", false)},
		{name: "tlsa not signed", zone: func(m *mockDNS) { m.signed["_25._tcp.mx.full.example"] = false }, want: set("dane", false)},
		{name: "tlsa only pkix-ee (unusable)", zone: func(m *mockDNS) {
			m.tlsa["_25._tcp.mx.full.example"] = []resolver.TLSA{{Usage: 1, Selector: 1, MatchingType: 1, Data: make([]byte, 32)}}
		}, want: set("dane", false)},
		{name: "tlsa malformed digest", zone: func(m *mockDNS) {
			m.tlsa["_25._tcp.mx.full.example"] = []resolver.TLSA{{Usage: 3, Selector: 1, MatchingType: 1, Data: make([]byte, 20)}}
		}, want: set("dane", false)},
		{name: "tlsa missing", zone: func(m *mockDNS) { delete(m.tlsa, "_25._tcp.mx.full.example") }, want: set("dane", false)},
		{name: "tlsa lookup fails", zone: func(m *mockDNS) { m.fail["_25._tcp.mx.full.example"] = true }, want: del("dane")},
		{name: "mx lookup fails", zone: func(m *mockDNS) { m.fail["MX "+fullDomain] = true }, want: del("dnssec", "dane")},
		// Reverse DNS.
		{name: "no ptr", zone: func(m *mockDNS) { delete(m.ptr, fullMXIP) }, want: func(w map[string]any) { delete(w, "ptr"); w["fcrdns"] = false }},
		{name: "ptr not forward-confirmed", zone: func(m *mockDNS) {
			m.ptr[fullMXIP] = []string{"host.other.example"}
			m.ip["host.other.example"] = []netip.Addr{netip.MustParseAddr("192.0.2.99")}
		}, want: set("ptr", "host.other.example", "fcrdns", false)},
		{name: "second ptr name confirms", zone: func(m *mockDNS) {
			m.ptr[fullMXIP] = []string{"host.other.example", fullMX}
		}, want: set("ptr", "host.other.example")},
		{name: "ptr lookup fails", zone: func(m *mockDNS) { m.fail["25.2.0.192.in-addr.arpa"] = true }, want: del("ptr", "fcrdns")},
		{name: "forward lookup fails", zone: func(m *mockDNS) {
			m.ptr[fullMXIP] = []string{"rdns.full.example"}
			m.fail["rdns.full.example"] = true
		}, want: func(w map[string]any) { w["ptr"] = "rdns.full.example"; delete(w, "fcrdns") }},
		// DNS lists.
		{name: "clean on every list", zone: func(m *mockDNS) { delete(m.ip, "25.2.0.192.bl.example") }, want: set("dnsbl_clean", true, "dnsbl_lists_on", []any{})},
		{name: "listed on both lists", zone: func(m *mockDNS) { m.ip["25.2.0.192.bl2.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.4")} },
			want: set("dnsbl_lists_on", []any{"bl.example", "bl2.example"})},
		{name: "a list fails, another lists", zone: func(m *mockDNS) { m.fail["25.2.0.192.bl2.example"] = true }},
		{name: "a list fails, none lists", zone: func(m *mockDNS) {
			delete(m.ip, "25.2.0.192.bl.example")
			m.fail["25.2.0.192.bl2.example"] = true
		}, want: del("dnsbl_clean", "dnsbl_lists_on")},
		{name: "operator error code is no listing", zone: func(m *mockDNS) {
			m.ip["25.2.0.192.bl.example"] = []netip.Addr{netip.MustParseAddr("127.255.255.254")}
		}, want: del("dnsbl_clean", "dnsbl_lists_on")},
		{name: "allow list refuses the query", zone: func(m *mockDNS) {
			m.ip["25.2.0.192.wl.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.255")}
		}, want: del("dnswl_listed")},
		{name: "no lists configured", opts: func(o *authsig.CollectorOptions) { o.DNSBL, o.DNSWL = nil, nil }, want: del("dnsbl_clean", "dnsbl_lists_on", "dnswl_listed")},
		// The MX and its address.
		{name: "mx without address", zone: func(m *mockDNS) { delete(m.ip, fullMX) }, want: del(ipKeys...)},
		{name: "mx address lookup fails", zone: func(m *mockDNS) { m.fail[fullMX] = true }, want: del(ipKeys...)},
		{name: "no mx host given", mx: []string{}, want: del(append(ipKeys, "dane")...)},
		// A subdomain inherits DMARC and BIMI from its organizational domain,
		// and CAA from its parent; its own SPF and MTA-STS are none.
		{name: "subdomain", domain: "shop.full.example", zone: func(m *mockDNS) {
			m.mx["shop.full.example"] = []resolver.MX{{Host: fullMX, Pref: 10}}
			m.signed["shop.full.example"] = true
		}, want: set("spf", "none", "dkim", "none", "mta_sts", false, "tls_rpt", false, "svc_certified", false, "svc_trust_level", 0.0,
			"svc_key_id", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fullZone()
			if tt.zone != nil {
				tt.zone(m)
			}
			c := testCollector(t, m, tt.opts)
			mx := []string{fullMX}
			if tt.mx != nil {
				mx = tt.mx
			}
			domain := fullDomain
			if tt.domain != "" {
				domain = tt.domain
			}
			want := fullWant()
			if tt.base != nil {
				want = tt.base()
			}
			if tt.want != nil {
				tt.want(want)
			}
			for k, v := range want {
				if v == nil {
					delete(want, k)
				}
			}
			got := asJSON(t, c.Collect(ctx10s(t), domain, mx))
			if d := diffJSON(got, want); d != "" {
				t.Error(d)
			}
		})
	}
}

// TestDKIMSelectorsBelowNXDOMAIN: NXDOMAIN at _domainkey.D means no name
// below it exists (RFC 8020 §2), so the selectors are not asked: one
// DKIM query where a domain that does not sign took one a selector. A
// domain that signs has _domainkey.D as an empty non-terminal (NODATA),
// and every selector is asked.
func TestDKIMSelectorsBelowNXDOMAIN(t *testing.T) {
	for _, signs := range []bool{false, true} {
		m := fullZone()
		if !signs {
			delete(m.txt, "selector1._domainkey.full.example")
		}
		s := testCollector(t, m, nil).Collect(ctx10s(t), fullDomain, []string{fullMX})
		want, asked := "none", 1
		if signs {
			want, asked = "found", 1+len(authsig.DefaultDKIMSelectors())
		}
		if got := asJSON(t, s)["dkim"]; got != want {
			t.Errorf("signs %v: dkim %v, want %s", signs, got, want)
		}
		if got := m.askedFor("_domainkey." + fullDomain); len(got) != asked {
			t.Errorf("signs %v: %d DKIM queries, want %d: %q", signs, len(got), asked, got)
		}
	}
}

// TestSignalsEveryKey checks that a full collection with the session's
// keys merged has exactly the 29 keys of spec §2.6.
func TestSignalsEveryKey(t *testing.T) {
	c := testCollector(t, fullZone(), nil)
	s := c.Collect(ctx10s(t), fullDomain, []string{fullMX})
	s.MergeSession(authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: "MX.Full.Example.", TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256"})
	yes, no := true, false
	s.MergeMailboxes(authsig.Mailboxes{Abuse: &no, Postmaster: &yes})
	want := fullWant()
	for k, v := range map[string]any{"tls_version": "TLS 1.3", "tls_cipher": "TLS_AES_128_GCM_SHA256",
		"helo_matches_rdns": true, "abuse_mailbox": false, "postmaster_mailbox": true} {
		want[k] = v
	}
	got := asJSON(t, s)
	if d := diffJSON(got, want); d != "" {
		t.Error(d)
	}
	if len(got) != authsig.Keys || authsig.Keys != 29 {
		t.Errorf("%d keys, want %d", len(got), authsig.Keys)
	}
	// The zero Signals says nothing at all.
	if got := asJSON(t, &authsig.Signals{}); len(got) != 0 {
		t.Errorf("zero signals give %v", got)
	}
}

func TestMergeSession(t *testing.T) {
	other := netip.MustParseAddr("192.0.2.26")
	tests := []struct {
		name  string
		zone  func(m *mockDNS)
		facts authsig.SessionFacts
		want  any // helo_matches_rdns; nil when omitted
	}{
		{"ehlo equals ptr", nil, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: fullMX}, true},
		{"case and trailing dot", nil, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: "MX.FULL.EXAMPLE."}, true},
		{"banner when ehlo gave no name", nil, authsig.SessionFacts{MXIP: fullMXIP, BannerHost: fullMX}, true},
		{"ehlo wins over banner", nil, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: "localhost", BannerHost: fullMX}, false},
		{"mismatch", nil, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: "mail.example.net"}, false},
		{"another address than the one looked up", nil, authsig.SessionFacts{MXIP: other, EHLOHost: fullMX}, nil},
		{"no session", nil, authsig.SessionFacts{}, nil},
		{"no ptr", func(m *mockDNS) { delete(m.ptr, fullMXIP) }, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: fullMX}, false},
		{"ptr lookup failed", func(m *mockDNS) { m.fail["25.2.0.192.in-addr.arpa"] = true }, authsig.SessionFacts{MXIP: fullMXIP, EHLOHost: fullMX}, nil},
		{"mapped address", nil, authsig.SessionFacts{MXIP: netip.AddrFrom16(fullMXIP.As16()), EHLOHost: fullMX}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := fullZone()
			if tt.zone != nil {
				tt.zone(m)
			}
			c := testCollector(t, m, nil)
			s := c.Collect(ctx10s(t), fullDomain, []string{fullMX})
			s.MergeSession(tt.facts)
			got := asJSON(t, s)["helo_matches_rdns"]
			if got != tt.want {
				t.Errorf("helo_matches_rdns = %v, want %v", got, tt.want)
			}
			if _, ok := asJSON(t, s)["tls_version"]; ok {
				t.Error("tls_version set by a session without TLS")
			}
		})
	}
}

// TestCollectorCache checks the per-domain cache: reused for the smallest
// TTL of the answers clamped to [MinTTL, MaxTTL], and for FailTTL only when
// a lookup failed.
func TestCollectorCache(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	for _, tt := range []struct {
		name     string
		ttl      time.Duration // of every answer
		fail     bool
		reusedTo time.Duration // still cached just before
	}{
		{"short ttl clamped up", 30 * time.Second, false, 5 * time.Minute},
		{"ttl within the bounds", 20 * time.Minute, false, 20 * time.Minute},
		{"long ttl clamped down", 48 * time.Hour, false, time.Hour},
		{"a failure", time.Hour, true, 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fullZone()
			m.ttl = tt.ttl
			if tt.fail {
				m.fail["_dmarc.full.example"] = true
			}
			c := testCollector(t, m, func(o *authsig.CollectorOptions) { o.Now = clock.Now })
			first := c.Collect(ctx10s(t), fullDomain, []string{fullMX})
			n := m.queries.Load()
			clock.Advance(tt.reusedTo - time.Second)
			again := c.Collect(ctx10s(t), fullDomain, []string{fullMX})
			if m.queries.Load() != n {
				t.Fatalf("%d queries for a cached domain", m.queries.Load()-n)
			}
			if !reflect.DeepEqual(asJSON(t, first), asJSON(t, again)) {
				t.Fatalf("cached signals differ:\n%v\n%v", asJSON(t, first), asJSON(t, again))
			}
			// Another MX host is another collection.
			c.Collect(ctx10s(t), fullDomain, []string{"mx2.full.example"})
			if m.queries.Load() == n {
				t.Fatal("no query for another MX host")
			}
			n = m.queries.Load()
			clock.Advance(2 * time.Second)
			c.Collect(ctx10s(t), fullDomain, []string{fullMX})
			if m.queries.Load() == n {
				t.Fatal("no query after the signals expired")
			}
		})
	}
}

// TestCollectorSharesFlights checks that concurrent probes of one cold
// domain make one set of queries.
func TestCollectorSharesFlights(t *testing.T) {
	one := fullZone()
	testCollector(t, one, nil).Collect(ctx10s(t), fullDomain, []string{fullMX})
	m := fullZone()
	for name := range m.txt {
		m.slow[name] = 50 * time.Millisecond
	}
	c := testCollector(t, m, nil)
	var wg sync.WaitGroup
	results := make([]map[string]any, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = asJSON(t, c.Collect(ctx10s(t), fullDomain, []string{fullMX}))
		}()
	}
	wg.Wait()
	if got, want := m.queries.Load(), one.queries.Load(); got != want {
		t.Errorf("16 concurrent collections made %d queries, one makes %d", got, want)
	}
	for _, r := range results {
		if d := diffJSON(r, fullWant()); d != "" {
			t.Error(d)
		}
	}
}

// TestCollectorWaitTakesWhatIsKnown checks that Wait returns, when its
// context ends, the keys learnt so far and leaves the others out, while
// the collection goes on and is cached whole.
func TestCollectorWaitTakesWhatIsKnown(t *testing.T) {
	m := fullZone()
	gate := make(chan struct{})
	m.gate["_dmarc.full.example"] = gate
	c := testCollector(t, m, func(o *authsig.CollectorOptions) { o.Timeout = time.Minute })
	p := c.Start(fullDomain, []string{fullMX})
	want := fullWant()
	for _, k := range []string{"dmarc", "dmarc_policy", "dmarc_subdomain_policy", "dmarc_alignment_spf", "dmarc_alignment_dkim", "dmarc_rua_set"} {
		delete(want, k)
	}
	// Each Wait ends with its short context and returns what is known
	// then: in the end everything but DMARC, whose lookup is held. No
	// span of real time decides what is known, so load cannot change it.
	diff := "nothing asked"
	for deadline := time.Now().Add(30 * time.Second); diff != "" && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		diff = diffJSON(asJSON(t, p.Wait(ctx)), want)
		cancel()
	}
	if diff != "" {
		t.Error(diff)
	}
	close(gate)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the collection did not end")
	}
	if d := diffJSON(asJSON(t, c.Collect(ctx10s(t), fullDomain, []string{fullMX})), fullWant()); d != "" {
		t.Error("after the collection ended:", d)
	}
}

// TestCollectorTimeout checks that Options.Timeout bounds a collection
// whatever the caller's deadline, and that what timed out is omitted.
func TestCollectorTimeout(t *testing.T) {
	m := fullZone()
	m.slow["_mta-sts.full.example"] = time.Minute
	c := testCollector(t, m, func(o *authsig.CollectorOptions) { o.Timeout = time.Second })
	start := time.Now()
	got := asJSON(t, c.Collect(context.Background(), fullDomain, []string{fullMX}))
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("collection took %v", d)
	}
	want := fullWant()
	delete(want, "mta_sts")
	if d := diffJSON(got, want); d != "" {
		t.Error(d)
	}
}

func TestCollectorClose(t *testing.T) {
	m := fullZone()
	m.slow["_dmarc.full.example"] = time.Minute
	c := testCollector(t, m, nil)
	p := c.Start(fullDomain, []string{fullMX})
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the collection")
	}
	if _, ok := asJSON(t, p.Wait(ctx10s(t)))["dmarc"]; ok {
		t.Error("dmarc reported though its lookup was cut short")
	}
	if got := asJSON(t, c.Collect(ctx10s(t), fullDomain, []string{fullMX})); len(got) != 1 || got["domain_age_days"] != 0.0 {
		t.Errorf("after Close: %v", got)
	}
}

func TestCollectorMailboxes(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	c := testCollector(t, fullZone(), func(o *authsig.CollectorOptions) { o.Now = clock.Now; o.MailboxTTL = time.Hour })
	yes, no := true, false
	if m := c.Mailboxes("Full.Example"); m.Abuse != nil || m.Postmaster != nil {
		t.Fatalf("known before any probe: %+v", m)
	}
	c.RecordMailboxes(fullDomain, authsig.Mailboxes{Postmaster: &yes})
	c.RecordMailboxes("FULL.example.", authsig.Mailboxes{Abuse: &no})
	c.RecordMailboxes(fullDomain, authsig.Mailboxes{}) // learnt nothing: keeps what was known
	m := c.Mailboxes(fullDomain)
	if m.Postmaster == nil || !*m.Postmaster || m.Abuse == nil || *m.Abuse {
		t.Fatalf("mailboxes %+v", m)
	}
	s := &authsig.Signals{}
	s.MergeMailboxes(m)
	if got := asJSON(t, s); got["postmaster_mailbox"] != true || got["abuse_mailbox"] != false {
		t.Errorf("merged %v", got)
	}
	clock.Advance(time.Hour)
	if m := c.Mailboxes(fullDomain); m.Abuse != nil || m.Postmaster != nil {
		t.Errorf("still known after MailboxTTL: %+v", m)
	}
}

func TestSignalsCloneFlatPositive(t *testing.T) {
	c := testCollector(t, fullZone(), nil)
	s := c.Collect(ctx10s(t), fullDomain, []string{fullMX})
	cl := s.Clone()
	*cl.DANE = false
	cl.DNSBLListsOn[0] = "changed"
	if !*s.DANE || s.DNSBLListsOn[0] != "bl.example" {
		t.Error("a clone shares memory with its original")
	}
	if got := asJSON(t, s.Flat()); !reflect.DeepEqual(got, map[string]any{"spf": "strict", "dkim": "found", "dmarc": "found", "mta_sts": true, "svc_certified": true}) {
		t.Errorf("flat copies %v", got)
	}
	if got := asJSON(t, (*authsig.Signals)(nil).Flat()); len(got) != 0 {
		t.Errorf("flat copies of nil: %v", got)
	}
	yes, no := true, false
	for _, tt := range []struct {
		s    authsig.Signals
		want int
	}{
		{authsig.Signals{}, 0},
		{authsig.Signals{SPF: "strict", DKIM: "found", DMARC: "found", DMARCPolicy: "reject", MTASTS: &yes}, 4},
		{authsig.Signals{SPF: "softfail", DMARC: "found", DMARCPolicy: "quarantine"}, 2},
		{authsig.Signals{SPF: "neutral", DKIM: "revoked", DMARC: "found", DMARCPolicy: "none", MTASTS: &no}, 0},
		{authsig.Signals{SPF: "pass", DMARC: "none", DMARCPolicy: "reject"}, 0},
	} {
		if got := tt.s.Positive(); got != tt.want {
			t.Errorf("%+v: %d positive signals, want %d", tt.s, got, tt.want)
		}
	}
	if (*authsig.Signals)(nil).Positive() != 0 || (*authsig.Signals)(nil).Clone() != nil {
		t.Error("nil signals")
	}
}

func TestNewCollectorOptions(t *testing.T) {
	_, err := authsig.NewCollector(authsig.CollectorOptions{
		DNSBL: []string{"zen spamhaus"}, Timeout: -1, MinTTL: time.Hour, MaxTTL: time.Minute, MaxEntries: -1,
	})
	for _, want := range []string{"resolver is required", "zen spamhaus", "timeout", "min ttl", "max entries"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if _, err := authsig.NewCollector(authsig.CollectorOptions{Resolver: newMockDNS(), MaxTTL: time.Minute}); err != nil {
		t.Errorf("a max ttl below the default min ttl: %v", err)
	}
}

// fakeClock is a clock tests move.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestCollectorRefresh: with Refresh, a Start that finds the signals in the
// last tenth of their cache time is answered from the cache at once and
// collects them again in the background, once for any number of Starts; a
// Start after the expiry joins that collection; a refresh that fails a
// lookup leaves the cached signals until they expire; without Refresh
// nothing is asked before the expiry.
func TestCollectorRefresh(t *testing.T) {
	settle := func(c *authsig.Collector) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); authsig.InFlight(c) > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the refresh did not end within 10s")
			}
		}
	}
	cached := func(p *authsig.Pending) bool {
		select {
		case <-p.Done():
			return true
		default:
			return false
		}
	}
	const dmarc = "_dmarc.full.example"
	for _, refresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("refresh=%v", refresh), func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
			m := fullZone()
			m.ttl = 20 * time.Minute // cached 20 min: the last tenth from 18 min
			c := testCollector(t, m, func(o *authsig.CollectorOptions) { o.Now = clock.Now; o.Refresh = refresh })
			c.Collect(ctx10s(t), fullDomain, []string{fullMX})
			one := m.queries.Load()

			clock.Advance(18*time.Minute - time.Second)
			if p := c.Start(fullDomain, []string{fullMX}); !cached(p) || m.queries.Load() != one {
				t.Fatalf("before the last tenth: cached %v, %d more queries", cached(p), m.queries.Load()-one)
			}
			gate := make(chan struct{})
			m.mu.Lock()
			m.gate[dmarc] = gate
			m.mu.Unlock()
			clock.Advance(time.Second)
			for range 4 {
				if p := c.Start(fullDomain, []string{fullMX}); !cached(p) {
					t.Fatal("in the last tenth: a Start waited")
				}
			}
			if !refresh {
				time.Sleep(20 * time.Millisecond)
				if n := m.queries.Load() - one; n != 0 || authsig.InFlight(c) != 0 {
					t.Fatalf("refresh off: %d queries before the expiry", n)
				}
				close(gate)
				return
			}
			// Expired while the refresh waits at the gate: a Start joins it.
			clock.Advance(2*time.Minute + time.Second)
			p := c.Start(fullDomain, []string{fullMX})
			if cached(p) {
				t.Fatal("after the expiry, with the refresh under way: answered at once")
			}
			close(gate)
			if d := diffJSON(asJSON(t, p.Wait(ctx10s(t))), fullWant()); d != "" {
				t.Error(d)
			}
			settle(c)
			if n := m.queries.Load() - one; n != one {
				t.Errorf("four Starts in the last tenth and one after: %d queries, want one collection's %d", n, one)
			}
			// The refresh is cached from when it began (18 min) for 20 min.
			clock.Advance(15 * time.Minute) // 35:01
			before := m.queries.Load()
			if p := c.Start(fullDomain, []string{fullMX}); !cached(p) || m.queries.Load() != before {
				t.Fatal("the refreshed signals are not cached")
			}

			// A refresh that fails a lookup: the cached signals stay whole
			// until they expire, then a Start collects.
			m.mu.Lock()
			m.fail[dmarc] = true
			m.mu.Unlock()
			clock.Advance(2 * time.Minute) // 37:01: in the last tenth of 18+20
			if p := c.Start(fullDomain, []string{fullMX}); !cached(p) {
				t.Fatal("in the last tenth: a Start waited")
			}
			settle(c)
			if m.queries.Load() == before {
				t.Fatal("no refresh in the last tenth")
			}
			clock.Advance(58 * time.Second) // 37:59
			p = c.Start(fullDomain, []string{fullMX})
			if !cached(p) {
				t.Fatal("after a failed refresh: the cached signals were dropped")
			}
			if d := diffJSON(asJSON(t, p.Wait(ctx10s(t))), fullWant()); d != "" {
				t.Errorf("after a failed refresh: %s", d)
			}
			clock.Advance(time.Second) // 38:00, expired
			if p := c.Start(fullDomain, []string{fullMX}); cached(p) {
				t.Fatal("signals served past their expiry")
			}
			settle(c)
		})
	}
}
