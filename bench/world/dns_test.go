package world

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const dnsTestTLSAHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// dnsTestWorld is the world of the DNS tests; every call makes a new one.
func dnsTestWorld() *World {
	mx := []MX{{Pref: 10, Host: "mx1.provider.test"}}
	big := &Domain{Name: "big.test", MX: mx}
	for i := range 40 {
		big.Records = append(big.Records, Record{Type: "TXT", Data: fmt.Sprintf(`"record %02d of a domain with too many TXT records for udp"`, i)})
	}
	w := &World{
		Hosts: []*Host{
			{Name: "mx1.alpha.test", IP: "127.0.1.1", IPv6: "fd00::1", Aliases: []string{"smtp.alpha.test"}},
			{Name: "mx2.alpha.test", IP: "127.0.1.2", PTR: "-"},
			{Name: "mx1.provider.test", IP: "127.0.2.1"},
			{Name: "mx.bücher.test", IP: "127.0.3.1"},
		},
		Domains: []*Domain{
			{
				Name: "alpha.test",
				MX:   []MX{{Pref: 20, Host: "mx2.alpha.test"}, {Pref: 10, Host: "mx1.alpha.test"}},
				A:    []string{"127.0.1.1"},
				AAAA: []string{"fd00::1"},
				Records: []Record{
					{Type: "TXT", Data: `"v=spf1 ip4:127.0.1.0/24 -all"`},
					{Name: "_dmarc", Type: "TXT", Data: `"v=DMARC1; p=reject"`},
					{Name: "split", Type: "TXT", Data: `"part one " "part two " "part three"`},
					{Name: "short", Type: "TXT", TTL: 60, Data: `"short ttl"`},
					{Name: "_25._tcp.mx", Type: "TLSA", Data: "3 1 1 " + dnsTestTLSAHash},
					{Name: "@", Type: "CAA", Data: `0 issue "ca.test"`},
					{Name: "www", Type: "CNAME", Data: "web"},
					{Name: "web.alpha.test.", Type: "CNAME", Data: "mx1.alpha.test."},
					{Name: "loop1", Type: "CNAME", Data: "loop2"},
					{Name: "loop2", Type: "CNAME", Data: "loop1"},
					{Name: "away", Type: "CNAME", Data: "mail.example."},
					{Name: "dangling", Type: "CNAME", Data: "nothere"},
					{Name: "tosigned", Type: "CNAME", Data: "signed.test."},
				},
			},
			{Name: "nullmx.test", MX: []MX{{Pref: 0, Host: "."}}},
			{Name: "gone.test", NXDomain: true, MX: mx},
			{Name: "signed.test", Signed: true, MX: mx},
			{Name: "broken.test", DNSFault: DNSFaultServFail, MX: mx},
			{Name: "silent.test", DNSFault: DNSFaultDrop, MX: mx},
			{Name: "slow.test", DNSDelay: Duration(500 * time.Millisecond), MX: mx},
			{Name: "ttl.test", TTL: 60, MX: mx},
			{Name: "bücher.test", MX: []MX{{Pref: 10, Host: "mx.bücher.test"}}, A: []string{"127.0.3.1"}},
			big,
		},
	}
	w.Defaults()
	return w
}

// dnsStartTest starts a DNS server for w on a free loopback port and closes
// it when the test ends.
func dnsStartTest(t testing.TB, w *World) *DNSServer {
	t.Helper()
	if err := w.Validate(); err != nil {
		t.Fatalf("world does not validate: %v", err)
	}
	s, err := StartDNS(w, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("StartDNS: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// dnsExchange sends m to s over network ("udp" or "tcp").
func dnsExchange(s *DNSServer, network string, m *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: timeout}
	r, _, err := c.Exchange(m, s.Addr())
	return r, err
}

// dnsQuery asks s for (name, qtype) over network and fails the test on a
// transport error.
func dnsQuery(t *testing.T, s *DNSServer, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, err := dnsExchange(s, network, m, 10*time.Second)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

// dnsRRStrings returns the presentation form of rrs.
func dnsRRStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

// dnsCanonical returns the presentation form of records written by hand.
func dnsCanonical(t *testing.T, records []string) []string {
	t.Helper()
	out := make([]string, len(records))
	for i, s := range records {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad expected record %q: %v", s, err)
		}
		out[i] = rr.String()
	}
	return out
}

func TestDNSAnswers(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	const (
		ok = dns.RcodeSuccess
		nx = dns.RcodeNameError
	)
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		soa    string // apex of the SOA expected in the authority section
		check  func(t *testing.T, r *dns.Msg)
	}{
		{name: "alpha.test.", qtype: dns.TypeMX, rcode: ok, answer: []string{
			"alpha.test. 300 IN MX 10 mx1.alpha.test.",
			"alpha.test. 300 IN MX 20 mx2.alpha.test.",
		}},
		{name: "nullmx.test.", qtype: dns.TypeMX, rcode: ok, answer: []string{"nullmx.test. 300 IN MX 0 ."}},
		{name: "nullmx.test.", qtype: dns.TypeA, rcode: ok, soa: "nullmx.test."},
		{name: "alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"alpha.test. 300 IN A 127.0.1.1"}},
		{name: "alpha.test.", qtype: dns.TypeAAAA, rcode: ok, answer: []string{"alpha.test. 300 IN AAAA fd00::1"}},
		{name: "alpha.test.", qtype: dns.TypeNS, rcode: ok, answer: []string{"alpha.test. 300 IN NS ns.alpha.test."}},
		{name: "alpha.test.", qtype: dns.TypeSOA, rcode: ok, answer: []string{
			"alpha.test. 300 IN SOA ns.alpha.test. hostmaster.alpha.test. 1 3600 600 604800 300",
		}},
		{name: "mx1.alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"mx1.alpha.test. 300 IN A 127.0.1.1"}},
		{name: "mx1.alpha.test.", qtype: dns.TypeAAAA, rcode: ok, answer: []string{"mx1.alpha.test. 300 IN AAAA fd00::1"}},
		{name: "mx2.alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"mx2.alpha.test. 300 IN A 127.0.1.2"}},
		{name: "mx2.alpha.test.", qtype: dns.TypeAAAA, rcode: ok, soa: "alpha.test."},
		{name: "smtp.alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"smtp.alpha.test. 300 IN A 127.0.1.1"}},
		{name: "alpha.test.", qtype: dns.TypeTXT, rcode: ok, answer: []string{`alpha.test. 300 IN TXT "v=spf1 ip4:127.0.1.0/24 -all"`}},
		{name: "_dmarc.alpha.test.", qtype: dns.TypeTXT, rcode: ok, answer: []string{`_dmarc.alpha.test. 300 IN TXT "v=DMARC1; p=reject"`}},
		{name: "split.alpha.test.", qtype: dns.TypeTXT, rcode: ok,
			answer: []string{`split.alpha.test. 300 IN TXT "part one " "part two " "part three"`},
			check: func(t *testing.T, r *dns.Msg) {
				if txt := r.Answer[0].(*dns.TXT).Txt; len(txt) != 3 || strings.Join(txt, "") != "part one part two part three" {
					t.Errorf("TXT strings = %q, want three strings making %q", txt, "part one part two part three")
				}
			}},
		{name: "short.alpha.test.", qtype: dns.TypeTXT, rcode: ok, answer: []string{`short.alpha.test. 60 IN TXT "short ttl"`}},
		{name: "_25._tcp.mx.alpha.test.", qtype: dns.TypeTLSA, rcode: ok, answer: []string{"_25._tcp.mx.alpha.test. 300 IN TLSA 3 1 1 " + dnsTestTLSAHash}},
		{name: "alpha.test.", qtype: dns.TypeCAA, rcode: ok, answer: []string{`alpha.test. 300 IN CAA 0 issue "ca.test"`}},
		// Empty non-terminals are NODATA; names below them that do not
		// exist are NXDOMAIN.
		{name: "_tcp.mx.alpha.test.", qtype: dns.TypeTLSA, rcode: ok, soa: "alpha.test."},
		{name: "mx.alpha.test.", qtype: dns.TypeA, rcode: ok, soa: "alpha.test."},
		{name: "_26._tcp.mx.alpha.test.", qtype: dns.TypeTLSA, rcode: nx, soa: "alpha.test."},
		{name: "nope.alpha.test.", qtype: dns.TypeA, rcode: nx, soa: "alpha.test."},
		{name: "alpha.test.", qtype: dns.TypePTR, rcode: ok, soa: "alpha.test."},
		// CNAMEs.
		{name: "www.alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{
			"www.alpha.test. 300 IN CNAME web.alpha.test.",
			"web.alpha.test. 300 IN CNAME mx1.alpha.test.",
			"mx1.alpha.test. 300 IN A 127.0.1.1",
		}},
		{name: "www.alpha.test.", qtype: dns.TypeCNAME, rcode: ok, answer: []string{"www.alpha.test. 300 IN CNAME web.alpha.test."}},
		{name: "www.alpha.test.", qtype: dns.TypeMX, rcode: ok, soa: "alpha.test.", answer: []string{
			"www.alpha.test. 300 IN CNAME web.alpha.test.",
			"web.alpha.test. 300 IN CNAME mx1.alpha.test.",
		}},
		{name: "away.alpha.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"away.alpha.test. 300 IN CNAME mail.example."}},
		{name: "dangling.alpha.test.", qtype: dns.TypeA, rcode: nx, soa: "alpha.test.", answer: []string{
			"dangling.alpha.test. 300 IN CNAME nothere.alpha.test.",
		}},
		{name: "tosigned.alpha.test.", qtype: dns.TypeMX, rcode: ok, answer: []string{
			"tosigned.alpha.test. 300 IN CNAME signed.test.",
			"signed.test. 300 IN MX 10 mx1.provider.test.",
		}},
		{name: "loop1.alpha.test.", qtype: dns.TypeA, rcode: ok, check: func(t *testing.T, r *dns.Msg) {
			if len(r.Answer) != dnsMaxCNAMEHops {
				t.Errorf("a CNAME loop gave %d answers, want %d", len(r.Answer), dnsMaxCNAMEHops)
			}
			for _, rr := range r.Answer {
				if _, ok := rr.(*dns.CNAME); !ok {
					t.Errorf("a CNAME loop answered %v", rr)
				}
			}
		}},
		// Reverse zone.
		{name: "1.1.0.127.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok, answer: []string{"1.1.0.127.in-addr.arpa. 300 IN PTR mx1.alpha.test."}},
		{name: "1.3.0.127.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok, answer: []string{"1.3.0.127.in-addr.arpa. 300 IN PTR mx.xn--bcher-kva.test."}},
		{name: "2.1.0.127.in-addr.arpa.", qtype: dns.TypePTR, rcode: nx, soa: "127.in-addr.arpa."},
		{name: "1.0.127.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok, soa: "127.in-addr.arpa."},
		// Implicit zone of hosts under no domain.
		{name: "mx1.provider.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"mx1.provider.test. 300 IN A 127.0.2.1"}},
		{name: "provider.test.", qtype: dns.TypeNS, rcode: ok, answer: []string{"provider.test. 300 IN NS ns.provider.test."}},
		{name: "mx2.provider.test.", qtype: dns.TypeA, rcode: nx, soa: "provider.test."},
		// NXDomain domains.
		{name: "gone.test.", qtype: dns.TypeMX, rcode: nx, soa: "gone.test."},
		{name: "gone.test.", qtype: dns.TypeSOA, rcode: nx, soa: "gone.test."},
		{name: "www.gone.test.", qtype: dns.TypeA, rcode: nx, soa: "gone.test."},
		// Negative TTL.
		{name: "nope.ttl.test.", qtype: dns.TypeA, rcode: nx, soa: "ttl.test.", check: func(t *testing.T, r *dns.Msg) {
			if soa := r.Ns[0].(*dns.SOA); soa.Hdr.Ttl != 60 || soa.Minttl != 60 {
				t.Errorf("SOA TTL %d minimum %d, want 60 and 60", soa.Hdr.Ttl, soa.Minttl)
			}
		}},
		// IDN: the zone is the A-label form.
		{name: "xn--bcher-kva.test.", qtype: dns.TypeMX, rcode: ok, answer: []string{"xn--bcher-kva.test. 300 IN MX 10 mx.xn--bcher-kva.test."}},
		{name: "mx.xn--bcher-kva.test.", qtype: dns.TypeA, rcode: ok, answer: []string{"mx.xn--bcher-kva.test. 300 IN A 127.0.3.1"}},
		// Outside every zone.
		{name: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "test.", qtype: dns.TypeSOA, rcode: dns.RcodeRefused},
		{name: "mail.example.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(network+"/"+tt.name+"/"+dns.TypeToString[tt.qtype], func(t *testing.T) {
				r := dnsQuery(t, s, network, tt.name, tt.qtype)
				if r.Rcode != tt.rcode {
					t.Fatalf("rcode %s, want %s\n%v", dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode], r)
				}
				if wantAA := tt.rcode != dns.RcodeRefused; r.Authoritative != wantAA {
					t.Errorf("AA = %v, want %v", r.Authoritative, wantAA)
				}
				if len(r.Question) != 1 || r.Question[0].Name != tt.name || r.Question[0].Qtype != tt.qtype {
					t.Errorf("question %v, want %s %s", r.Question, tt.name, dns.TypeToString[tt.qtype])
				}
				if got, want := strings.Join(dnsRRStrings(r.Answer), "\n"), strings.Join(dnsCanonical(t, tt.answer), "\n"); tt.check == nil && got != want {
					t.Errorf("answer:\n%s\nwant:\n%s", got, want)
				}
				switch {
				case tt.soa == "" && len(r.Ns) != 0:
					t.Errorf("authority %v, want none", r.Ns)
				case tt.soa != "":
					soa, ok := dnsOnly(r.Ns).(*dns.SOA)
					if !ok {
						t.Fatalf("authority %v, want the SOA of %s", r.Ns, tt.soa)
					}
					if soa.Hdr.Name != tt.soa || soa.Ns != "ns."+tt.soa || soa.Mbox != "hostmaster."+tt.soa {
						t.Errorf("authority SOA %v, want the SOA of %s", soa, tt.soa)
					}
					if soa.Hdr.Ttl > soa.Minttl {
						t.Errorf("negative answer SOA TTL %d above its minimum %d (RFC 2308)", soa.Hdr.Ttl, soa.Minttl)
					}
				}
				if tt.check != nil {
					tt.check(t, r)
				}
			})
		}
	}
}

// dnsOnly returns the only RR of rrs, or nil.
func dnsOnly(rrs []dns.RR) dns.RR {
	if len(rrs) != 1 {
		return nil
	}
	return rrs[0]
}

func TestDNSCaseEcho(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	for _, network := range []string{"udp", "tcp"} {
		const asked = "mX1.AlPhA.tEsT."
		r := dnsQuery(t, s, network, asked, dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s: %s A answered %v", network, asked, r)
		}
		if got := r.Question[0].Name; got != asked {
			t.Errorf("%s: question echoed as %q, want %q", network, got, asked)
		}
		if a := r.Answer[0].(*dns.A); a.A.String() != "127.0.1.1" {
			t.Errorf("%s: %s A = %s, want 127.0.1.1", network, asked, a.A)
		}
	}
}

func TestDNSTruncation(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	const records = 40
	tests := []struct {
		network   string
		bufsize   uint16 // 0: no OPT record
		truncated bool
	}{
		{"udp", 0, true},
		{"udp", 1232, true},
		{"udp", 8192, false},
		{"tcp", 0, false},
		{"tcp", 1232, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.network, tt.bufsize), func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion("big.test.", dns.TypeTXT)
			if tt.bufsize != 0 {
				m.SetEdns0(tt.bufsize, false)
			}
			r, err := dnsExchange(s, tt.network, m, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated != tt.truncated {
				t.Errorf("TC = %v, want %v", r.Truncated, tt.truncated)
			}
			if tt.truncated && len(r.Answer) >= records {
				t.Errorf("truncated answer has all %d records", len(r.Answer))
			}
			if !tt.truncated && len(r.Answer) != records {
				t.Errorf("answer has %d records, want %d", len(r.Answer), records)
			}
			r.Compress = true // as the server packed it
			if limit := max(int(tt.bufsize), dns.MinMsgSize); tt.network == "udp" && r.Len() > limit {
				t.Errorf("udp reply is %d bytes, above the client's %d", r.Len(), limit)
			}
			if gotOPT, wantOPT := r.IsEdns0() != nil, tt.bufsize != 0; gotOPT != wantOPT {
				t.Errorf("reply has OPT = %v, want %v", gotOPT, wantOPT)
			}
		})
	}
}

func TestDNSBadEDNSVersion(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	m := new(dns.Msg)
	m.SetQuestion("alpha.test.", dns.TypeMX)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	r, err := dnsExchange(s, "udp", m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeBadVers || len(r.Answer) != 0 {
		t.Errorf("EDNS version 1: rcode %s with %d answers, want BADVERS and none", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if opt := r.IsEdns0(); opt == nil || opt.Version() != 0 {
		t.Errorf("BADVERS reply OPT %v, want version 0", opt)
	}
}

func TestDNSSignedAD(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	tests := []struct {
		name   string
		qtype  uint16
		do, ad bool // bits of the query
		wantAD bool
	}{
		{"signed.test.", dns.TypeMX, true, false, true},
		{"signed.test.", dns.TypeMX, false, true, true},
		{"signed.test.", dns.TypeMX, false, false, false},
		{"nope.signed.test.", dns.TypeA, true, false, true},
		{"alpha.test.", dns.TypeMX, true, true, false},
		// The chain starts in an unsigned zone.
		{"tosigned.alpha.test.", dns.TypeMX, true, false, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/do=%v/ad=%v", tt.name, tt.do, tt.ad), func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion(tt.name, tt.qtype)
			m.AuthenticatedData = tt.ad
			if tt.do {
				m.SetEdns0(1232, true)
			}
			r, err := dnsExchange(s, "udp", m, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.AuthenticatedData != tt.wantAD {
				t.Errorf("AD = %v, want %v", r.AuthenticatedData, tt.wantAD)
			}
			if opt := r.IsEdns0(); tt.do && (opt == nil || !opt.Do()) {
				t.Errorf("reply OPT %v does not echo the DO bit", opt)
			}
		})
	}
}

func TestDNSFaults(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := dnsQuery(t, s, network, "broken.test.", dns.TypeMX)
			if r.Rcode != dns.RcodeServerFailure {
				t.Errorf("broken.test MX: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
			}
			before := s.Queries()
			m := new(dns.Msg)
			m.SetQuestion("silent.test.", dns.TypeMX)
			if r, err := dnsExchange(s, network, m, 200*time.Millisecond); err == nil {
				t.Errorf("silent.test MX answered %v, want no answer", r)
			}
			if got := s.Queries() - before; got != 1 {
				t.Errorf("a dropped query counted %d times, want 1", got)
			}
		})
	}
}

func TestDNSSetFault(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	steps := []struct {
		zone  string // as given to SetFault
		fault DNSFault
		rcode int // -1: no answer
	}{
		{"", "", dns.RcodeSuccess},
		{"ALPHA.test.", DNSFaultServFail, dns.RcodeServerFailure},
		{"alpha.test", DNSFaultDrop, -1},
		{"alpha.test", DNSFaultNone, dns.RcodeSuccess},
		{"mx1.alpha.test", DNSFaultServFail, dns.RcodeSuccess}, // not a zone: ignored
	}
	for _, st := range steps {
		if st.zone != "" {
			s.SetFault(st.zone, st.fault)
		}
		m := new(dns.Msg)
		m.SetQuestion("alpha.test.", dns.TypeMX)
		timeout := 10 * time.Second // generous where an answer is due
		if st.rcode == -1 {
			timeout = 200 * time.Millisecond
		}
		r, err := dnsExchange(s, "udp", m, timeout)
		switch {
		case st.rcode == -1 && err == nil:
			t.Errorf("after SetFault(%q, %q): answered %s, want no answer", st.zone, st.fault, dns.RcodeToString[r.Rcode])
		case st.rcode != -1 && err != nil:
			t.Errorf("after SetFault(%q, %q): %v", st.zone, st.fault, err)
		case st.rcode != -1 && r.Rcode != st.rcode:
			t.Errorf("after SetFault(%q, %q): rcode %s, want %s", st.zone, st.fault, dns.RcodeToString[r.Rcode], dns.RcodeToString[st.rcode])
		}
	}

	// The other zones are untouched, and a Unicode zone name works.
	s.SetFault("bücher.test", DNSFaultServFail)
	if r := dnsQuery(t, s, "tcp", "xn--bcher-kva.test.", dns.TypeMX); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("after SetFault(bücher.test, servfail): rcode %s", dns.RcodeToString[r.Rcode])
	}
	if r := dnsQuery(t, s, "tcp", "nullmx.test.", dns.TypeMX); r.Rcode != dns.RcodeSuccess {
		t.Errorf("nullmx.test: rcode %s, want NOERROR", dns.RcodeToString[r.Rcode])
	}
}

func TestDNSDelay(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	// Long enough that a loaded machine still answers another zone first.
	const delay = 3 * time.Second
	s.SetDelay("slow.test", delay)

	start := time.Now()
	slow := make(chan error, 1)
	go func() {
		m := new(dns.Msg)
		m.SetQuestion("slow.test.", dns.TypeMX)
		_, err := dnsExchange(s, "udp", m, 10*time.Second)
		slow <- err
	}()
	// Another zone answers while slow.test waits.
	dnsQuery(t, s, "udp", "alpha.test.", dns.TypeMX)
	select {
	case err := <-slow:
		t.Fatalf("slow.test answered (err %v) before another zone's query did", err)
	default:
	}
	if err := <-slow; err != nil {
		t.Fatalf("slow.test MX: %v", err)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("slow.test answered after %v, before its delay of %v", elapsed, delay)
	}

	// SetDelay removes it: the answer now comes well within a client
	// timeout shorter than the old delay.
	s.SetDelay("slow.test", 0)
	m := new(dns.Msg)
	m.SetQuestion("slow.test.", dns.TypeMX)
	if _, err := dnsExchange(s, "tcp", m, 2*time.Second); err != nil {
		t.Errorf("after SetDelay(0): %v", err)
	}
}

func TestDNSQueryCount(t *testing.T) {
	s := dnsStartTest(t, dnsTestWorld())
	dnsQuery(t, s, "udp", "Alpha.Test.", dns.TypeMX)
	dnsQuery(t, s, "udp", "alpha.test.", dns.TypeMX)
	dnsQuery(t, s, "tcp", "ALPHA.TEST.", dns.TypeMX)
	dnsQuery(t, s, "udp", "alpha.test.", dns.TypeA)
	dnsQuery(t, s, "udp", "example.com.", dns.TypeA)
	dnsQuery(t, s, "udp", "xn--bcher-kva.test.", dns.TypeMX)
	tests := []struct {
		name  string
		qtype uint16
		want  int64
	}{
		{"alpha.test", dns.TypeMX, 3},
		{"ALPHA.TEST.", dns.TypeMX, 3},
		{"alpha.test.", dns.TypeA, 1},
		{"alpha.test.", dns.TypeTXT, 0},
		{"example.com", dns.TypeA, 1},
		{"bücher.test", dns.TypeMX, 1},
		{"never.test", dns.TypeMX, 0},
	}
	for _, tt := range tests {
		if got := s.QueryCount(tt.name, tt.qtype); got != tt.want {
			t.Errorf("QueryCount(%q, %s) = %d, want %d", tt.name, dns.TypeToString[tt.qtype], got, tt.want)
		}
	}
	if got := s.Queries(); got != 6 {
		t.Errorf("Queries() = %d, want 6", got)
	}
}

func TestDNSStartErrors(t *testing.T) {
	tests := []struct {
		name   string
		domain *Domain
		want   string
	}{
		{"bad record", &Domain{Name: "bad.test", Records: []Record{{Type: "TXT", Data: `"unterminated`}}}, "records[0]"},
		{"unknown type", &Domain{Name: "bad.test", Records: []Record{{Type: "NOPE", Data: "1"}}}, "records[0]"},
		{"outside every zone", &Domain{Name: "bad.test", Records: []Record{{Name: "x.elsewhere.", Type: "TXT", Data: `"x"`}}}, "outside every zone"},
		{"two lines", &Domain{Name: "bad.test", Records: []Record{{Type: "TXT", Data: "\"a\"\nx TXT \"b\""}}}, "more than one line"},
		{"bad AAAA", &Domain{Name: "bad.test", AAAA: []string{"127.0.0.2"}}, "bad AAAA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &World{Domains: []*Domain{tt.domain}}
			w.Defaults()
			s, err := StartDNS(w, "127.0.0.1:0")
			if err == nil {
				s.Close()
				t.Fatal("StartDNS accepted a broken world")
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "world: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want one starting \"world: \" and naming %q", msg, tt.want)
			}
		})
	}
}

// TestDNSCloseNoLeak checks that Close returns while a query is still in
// its zone's delay, and leaves no goroutine behind.
func TestDNSCloseNoLeak(t *testing.T) {
	w := dnsTestWorld()
	s, err := StartDNS(w, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.SetDelay("slow.test", time.Hour)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m := new(dns.Msg)
		m.SetQuestion("slow.test.", dns.TypeMX)
		dnsExchange(s, "tcp", m, 200*time.Millisecond)
	}()
	dnsQuery(t, s, "udp", "alpha.test.", dns.TypeMX)
	for s.QueryCount("slow.test", dns.TypeMX) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	<-done
	waitServerGoroutines(t, "goroutines left after Close", func(n int) bool { return n == 0 })
}

// dnsBigWorld makes a world of n domains, each with two MX records, an A
// record and three TXT records, served by n/10 hosts.
func dnsBigWorld(n int) *World {
	w := &World{}
	for i := range max(n/10, 1) {
		w.Hosts = append(w.Hosts, &Host{
			Name: fmt.Sprintf("mx%d.provider.test", i),
			IP:   fmt.Sprintf("127.1.%d.%d", i/250, i%250+1),
		})
	}
	for i := range n {
		name := fmt.Sprintf("d%05d.test", i)
		h := w.Hosts[i%len(w.Hosts)]
		w.Domains = append(w.Domains, &Domain{
			Name: name,
			MX:   []MX{{Pref: 10, Host: h.Name}, {Pref: 20, Host: w.Hosts[(i+1)%len(w.Hosts)].Name}},
			A:    []string{h.IP},
			Records: []Record{
				{Type: "TXT", Data: `"v=spf1 ip4:127.1.0.0/16 -all"`},
				{Name: "_dmarc", Type: "TXT", Data: `"v=DMARC1; p=quarantine; rua=mailto:dmarc@` + name + `"`},
				{Name: "sel._domainkey", Type: "TXT", Data: `"v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="`},
			},
		})
	}
	w.Defaults()
	return w
}

func TestDNSLoad10kDomains(t *testing.T) {
	w := dnsBigWorld(10000)
	start := time.Now()
	s := dnsStartTest(t, w)
	t.Logf("StartDNS loaded %d domains and %d hosts in %v", len(w.Domains), len(w.Hosts), time.Since(start))

	for _, i := range []int{0, 4321, 9999} {
		name := fmt.Sprintf("d%05d.test.", i)
		if r := dnsQuery(t, s, "udp", name, dns.TypeMX); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
			t.Errorf("%s MX: %v", name, r)
		}
		if r := dnsQuery(t, s, "udp", "_dmarc."+name, dns.TypeTXT); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("_dmarc.%s TXT: %v", name, r)
		}
		if r := dnsQuery(t, s, "udp", "_domainkey."+name, dns.TypeTXT); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("_domainkey.%s TXT (empty non-terminal): %v", name, r)
		}
	}
}

func BenchmarkDNSIndex10kDomains(b *testing.B) {
	w := dnsBigWorld(10000)
	for b.Loop() {
		if _, err := buildDNSIndex(w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDNSQuery(b *testing.B) {
	s := dnsStartTest(b, dnsBigWorld(10000))
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("d04321.test.", dns.TypeMX)
	for b.Loop() {
		if _, _, err := c.Exchange(m, s.Addr()); err != nil {
			b.Fatal(err)
		}
	}
}

// dnsParsedTXT reads TXT data with the zone parser, as parseRecord does
// for data that dnsSimpleTXT refuses.
func dnsParsedTXT(data string) ([]string, error) {
	rr, err := dns.NewRR("x.test. 300 IN TXT " + data)
	if err != nil {
		return nil, err
	}
	if rr == nil {
		return nil, fmt.Errorf("no record")
	}
	return rr.(*dns.TXT).Txt, nil
}

// FuzzDNSSimpleTXT checks that the fast path for TXT data reads whatever
// it accepts exactly as the zone parser does.
func FuzzDNSSimpleTXT(f *testing.F) {
	for _, seed := range []string{
		`"v=spf1 -all"`,
		`"part one " "part two "  "part three"`,
		`""`,
		`"" "a"`,
		` "a"	"b" `,
		`"a""b"`,
		`"a"b`,
		`unquoted words`,
		`"with \"escape\""`,
		`"semi;colon" "paren(s)"`,
		`"unterminated`,
		`"` + strings.Repeat("x", 255) + `"`,
		`"` + strings.Repeat("x", 256) + `"`,
		`"ünïcode"`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		fast, ok := dnsSimpleTXT(data)
		if !ok {
			return
		}
		parsed, err := dnsParsedTXT(data)
		if err != nil {
			t.Fatalf("fast path read %q as %q, the zone parser refuses it: %v", data, fast, err)
		}
		if strings.Join(fast, "\x00") != strings.Join(parsed, "\x00") || len(fast) != len(parsed) {
			t.Fatalf("fast path read %q as %q, the zone parser as %q", data, fast, parsed)
		}
	})
}
