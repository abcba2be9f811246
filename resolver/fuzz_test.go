package resolver

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzNormalize: a normalised name is lower-case ASCII letters, digits,
// hyphens and underscores in labels of 1 to 63 characters, at most 253
// characters, packs into a query, and normalises to itself.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"example.com", "Example.COM.", "_dmarc.example.com", "bücher.example", "BÜCHER。example",
		"xn--bcher-kva.example", "xn--zz--.x", "a..b", ".", "", "日本語.jp", "\u00ad.x", "a\u2488.x",
		strings.Repeat("a", 63) + ".b", strings.Repeat("ab.", 90), "ｅｘａｍｐｌｅ.com", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, err := normalize(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidName", name, err)
			}
			return
		}
		if n == "" || len(n) > maxNameLen {
			t.Fatalf("%q: normalised to %q (%d characters)", name, n, len(n))
		}
		for _, l := range strings.Split(n, ".") {
			if l == "" || len(l) > maxLabelLen {
				t.Fatalf("%q: normalised to %q with label %q", name, n, l)
			}
		}
		for i := 0; i < len(n); i++ {
			c := n[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
				t.Fatalf("%q: normalised to %q with %q", name, n, c)
			}
		}
		if n2, err := normalize(n); err != nil || n2 != n {
			t.Fatalf("%q: normalised to %q, which normalises to %q, %v", name, n, n2, err)
		}
		if _, ok := dns.IsDomainName(fqdn(n)); !ok {
			t.Fatalf("%q: normalised to %q, not a domain name to miekg/dns", name, n)
		}
		m := new(dns.Msg)
		m.SetQuestion(fqdn(n), dns.TypeMX)
		if _, err := m.Pack(); err != nil {
			t.Fatalf("%q: normalised to %q, which does not pack: %v", name, n, err)
		}
	})
}

// FuzzReply feeds arbitrary replies to what turns a reply into a cache
// entry: classify, the typed views, the size estimate. Seeds are replies
// built with miekg/dns.
func FuzzReply(f *testing.F) {
	seed := func(qname string, qtype uint16, rcode int, rrs ...string) {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.Response = true
		m.Rcode = rcode
		for _, s := range rrs {
			r, err := dns.NewRR(s)
			if err != nil {
				f.Fatal(err)
			}
			if r.Header().Rrtype == dns.TypeSOA {
				m.Ns = append(m.Ns, r)
			} else {
				m.Answer = append(m.Answer, r)
			}
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed("example.test.", dns.TypeMX, dns.RcodeSuccess, "example.test. 300 IN MX 10 mx.example.test.", "example.test. 60 IN MX 0 .")
	seed("example.test.", dns.TypeMX, dns.RcodeSuccess, "example.test. 300 IN MX 0 .")
	seed("example.test.", dns.TypeMX, dns.RcodeNameError, "test. 300 IN SOA ns.test. h.test. 1 2 3 4 60")
	seed("www.test.", dns.TypeA, dns.RcodeSuccess, "www.test. 60 IN CNAME a.test.", "a.test. 60 IN CNAME www.test.", "a.test. 30 IN A 192.0.2.1")
	seed("v6.test.", dns.TypeAAAA, dns.RcodeSuccess, "v6.test. 60 IN AAAA 2001:db8::1")
	seed("t.test.", dns.TypeTXT, dns.RcodeSuccess, `t.test. 60 IN TXT "a\"b" "\255\000"`)
	seed("1.0.0.127.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "1.0.0.127.in-addr.arpa. 60 IN PTR Host.Test.")
	seed("_25._tcp.mx.test.", dns.TypeTLSA, dns.RcodeSuccess, "_25._tcp.mx.test. 60 IN TLSA 3 1 1 abcdef")
	seed("caa.test.", dns.TypeCAA, dns.RcodeSuccess, `caa.test. 60 IN CAA 128 issue "x\"y"`)
	seed("nodata.test.", dns.TypeCAA, dns.RcodeSuccess, "test. 0 IN SOA ns.test. h.test. 1 2 3 4 0")
	seed("sf.test.", dns.TypeA, dns.RcodeServerFailure)

	b := ttlBounds{min: 5 * time.Second, max: time.Hour, negMax: 5 * time.Minute}
	r := &Resolver{bounds: b, opts: Options{ServeStale: true, StaleTTL: time.Hour}}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := new(dns.Msg)
		if err := m.Unpack(data); err != nil {
			return
		}
		qname, qtype := "example.test", dns.TypeMX
		if len(m.Question) > 0 {
			if n, err := normalize(m.Question[0].Name); err == nil {
				qname = n
			}
			qtype = m.Question[0].Qtype
		}
		c := classify(qname, qtype, m, b)
		switch c.ans.Status {
		case StatusAnswer:
			if len(c.matched) == 0 || c.ttl < b.min || c.ttl > b.max {
				t.Fatalf("answer with %d records, TTL %v", len(c.matched), c.ttl)
			}
		case StatusNXDomain, StatusNoData:
			if len(c.matched) != 0 || c.ttl != 0 && (c.ttl < b.min || c.ttl > b.negMax) {
				t.Fatalf("%v with %d records, TTL %v", c.ans.Status, len(c.matched), c.ttl)
			}
		case StatusTempFail:
			if m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError {
				t.Fatalf("rcode %d classified as a temporary failure", m.Rcode)
			}
		default:
			t.Fatalf("status %v", c.ans.Status)
		}
		e := r.newEntry(key{qname, qtype}, m, 1e18)
		if e.size <= 0 {
			t.Fatalf("size %d", e.size)
		}
		if (e.err == nil) != (e.ans.Status == StatusAnswer) {
			t.Fatalf("status %v with error %v", e.ans.Status, e.err)
		}
		pt, ok := e.typed.(interface{ meta() *Meta })
		if !ok {
			return
		}
		meta := pt.meta()
		if (e.typedErr == nil) != (meta.Status == StatusAnswer) {
			t.Fatalf("typed status %v with error %v", meta.Status, e.typedErr)
		}
		if meta.Status != e.ans.Status && !(e.ans.Status == StatusAnswer && meta.Status == StatusNoData) {
			t.Fatalf("typed status %v, raw %v", meta.Status, e.ans.Status)
		}
		answer := meta.Status == StatusAnswer
		switch v := e.typed.(type) {
		case *MXResult:
			if answer && len(v.MX) == 0 && !v.NullMX || v.NullMX && len(v.MX) != 0 {
				t.Fatalf("MX %+v", v)
			}
			if !slices.IsSortedFunc(v.MX, func(a, b MX) int {
				if a.Pref != b.Pref {
					return int(a.Pref) - int(b.Pref)
				}
				return strings.Compare(a.Host, b.Host)
			}) {
				t.Fatalf("MX not sorted: %+v", v.MX)
			}
			for _, mx := range v.MX {
				if mx.Host == "" || strings.HasSuffix(mx.Host, ".") || strings.ToLower(mx.Host) != mx.Host {
					t.Fatalf("MX host %q", mx.Host)
				}
			}
		case *IPResult:
			if answer && len(v.IPs) == 0 {
				t.Fatal("IP answer without addresses")
			}
			for _, ip := range v.IPs {
				if !ip.IsValid() || qtype == dns.TypeA && !ip.Is4() || qtype == dns.TypeAAAA && !ip.Is6() {
					t.Fatalf("%s address %v", typeString(qtype), ip)
				}
			}
		case *TXTResult:
			if answer && len(v.TXT) == 0 {
				t.Fatal("TXT answer without records")
			}
		case *PTRResult:
			if answer && len(v.Names) == 0 {
				t.Fatal("PTR answer without names")
			}
		case *TLSAResult:
			if answer && len(v.Records) == 0 {
				t.Fatal("TLSA answer without records")
			}
		case *CAAResult:
			if answer && len(v.Records) == 0 {
				t.Fatal("CAA answer without records")
			}
		}
	})
}

// FuzzTXT: the TXT strings of a reply come back byte for byte, whatever
// the bytes, through miekg/dns's escaping and unescapeTXT.
func FuzzTXT(f *testing.F) {
	for _, s := range []string{"v=spf1 -all", "", `a"b\c`, "\x00\xff\t\n", `\123`, "\\", strings.Repeat("x", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 4000 {
			return
		}
		// RDATA: raw cut into character-strings of at most 255 octets.
		var rdata []byte
		rest := raw
		for {
			n := min(len(rest), 255)
			rdata = append(rdata, byte(n))
			rdata = append(rdata, rest[:n]...)
			rest = rest[n:]
			if len(rest) == 0 {
				break
			}
		}
		m := new(dns.Msg)
		m.SetQuestion("t.test.", dns.TypeTXT)
		m.Response = true
		m.Answer = []dns.RR{&dns.RFC3597{
			Hdr:   dns.RR_Header{Name: "t.test.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Rdata: hex.EncodeToString(rdata),
		}}
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		var back dns.Msg
		if err := back.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		c := classify("t.test", dns.TypeTXT, &back, ttlBounds{max: time.Hour, negMax: time.Hour})
		res := typedView(dns.TypeTXT, c.ans.Meta, c.matched).(*TXTResult)
		if len(res.TXT) != 1 || !bytes.Equal([]byte(res.TXT[0]), raw) {
			t.Fatalf("TXT %q came back as %q", raw, res.TXT)
		}
	})
}
