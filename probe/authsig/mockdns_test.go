package authsig_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/verifyd/verifyd/resolver"
)

// mockDNS is a resolver.Interface from maps (STYLE.md: tests use a mock
// resolver). A name with no records of the type asked is NODATA when it
// has records of another type or a name below it has any (an empty
// non-terminal, RFC 8020 §2), NXDOMAIN otherwise; a name in fail is a
// temporary failure (SERVFAIL) for every type, "TYPE name" (as "TXT
// example.com") for that type only; a name in slow waits that
// long (or until the context ends, a temporary failure then), and one in
// gate until its channel is closed (or the context ends). Every answer
// carries TTL 300 s unless ttl says otherwise; AD is set for the names in
// signed (answers and denials alike).
type mockDNS struct {
	mu     sync.Mutex
	txt    map[string][]string
	mx     map[string][]resolver.MX
	ip     map[string][]netip.Addr
	ptr    map[netip.Addr][]string
	tlsa   map[string][]resolver.TLSA
	caa    map[string][]resolver.CAA
	fail   map[string]bool
	slow   map[string]time.Duration
	gate   map[string]chan struct{}
	signed map[string]bool
	ttl    time.Duration

	queries atomic.Int64
	asked   []string // the names queried, in order
}

func newMockDNS() *mockDNS {
	return &mockDNS{
		txt: map[string][]string{}, mx: map[string][]resolver.MX{}, ip: map[string][]netip.Addr{},
		ptr: map[netip.Addr][]string{}, tlsa: map[string][]resolver.TLSA{}, caa: map[string][]resolver.CAA{},
		fail: map[string]bool{}, slow: map[string]time.Duration{}, gate: map[string]chan struct{}{}, signed: map[string]bool{}, ttl: 300 * time.Second,
	}
}

// begin counts the query and applies the name's failure or delay; it
// returns the Meta and error of a failure, or a nil error to go on.
func (m *mockDNS) begin(ctx context.Context, name string, qtype uint16) (resolver.Meta, error) {
	m.queries.Add(1)
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	m.mu.Lock()
	m.asked = append(m.asked, name)
	fail, delay, gate := m.fail[name] || m.fail[dns.TypeToString[qtype]+" "+name], m.slow[name], m.gate[name]
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return resolver.Meta{Status: resolver.StatusTempFail},
				&resolver.Error{Name: name, Type: qtype, Status: resolver.StatusTempFail, Rcode: -1, Err: ctx.Err()}
		}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return resolver.Meta{Status: resolver.StatusTempFail},
				&resolver.Error{Name: name, Type: qtype, Status: resolver.StatusTempFail, Rcode: -1, Err: ctx.Err()}
		}
	}
	if fail {
		return resolver.Meta{Status: resolver.StatusTempFail},
			&resolver.Error{Name: name, Type: qtype, Status: resolver.StatusTempFail, Rcode: dns.RcodeServerFailure}
	}
	return resolver.Meta{}, nil
}

// meta is the Meta of an answer (found), NODATA or NXDOMAIN, and the
// error of the latter two.
func (m *mockDNS) meta(name string, qtype uint16, found bool) (resolver.Meta, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	m.mu.Lock()
	defer m.mu.Unlock()
	meta := resolver.Meta{Status: resolver.StatusAnswer, TTL: m.ttl, AD: m.signed[name]}
	if found {
		return meta, nil
	}
	if m.exists(name) {
		meta.Status = resolver.StatusNoData
		return meta, &resolver.Error{Name: name, Type: qtype, Status: resolver.StatusNoData, Rcode: dns.RcodeSuccess}
	}
	meta.Status = resolver.StatusNXDomain
	return meta, &resolver.Error{Name: name, Type: qtype, Status: resolver.StatusNXDomain, Rcode: dns.RcodeNameError}
}

// exists reports whether name has records, or a name below it has
// (m.mu held).
func (m *mockDNS) exists(name string) bool {
	return hasAtOrBelow(m.txt, name) || hasAtOrBelow(m.mx, name) || hasAtOrBelow(m.ip, name) ||
		hasAtOrBelow(m.tlsa, name) || hasAtOrBelow(m.caa, name)
}

// hasAtOrBelow reports whether a key of names is name or a name below it.
func hasAtOrBelow[V any](names map[string]V, name string) bool {
	for k := range names {
		if k == name || strings.HasSuffix(k, "."+name) {
			return true
		}
	}
	return false
}

// askedFor returns the names queried that end in suffix.
func (m *mockDNS) askedFor(suffix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, n := range m.asked {
		if strings.HasSuffix(n, suffix) {
			names = append(names, n)
		}
	}
	return names
}

func key(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

func (m *mockDNS) LookupMX(ctx context.Context, name string) (resolver.MXResult, error) {
	if meta, err := m.begin(ctx, name, dns.TypeMX); err != nil {
		return resolver.MXResult{Meta: meta}, err
	}
	m.mu.Lock()
	mx, found := m.mx[key(name)]
	m.mu.Unlock()
	meta, err := m.meta(name, dns.TypeMX, found)
	return resolver.MXResult{Meta: meta, MX: mx}, err
}

func (m *mockDNS) LookupIP(ctx context.Context, network, name string) (resolver.IPResult, error) {
	if meta, err := m.begin(ctx, name, dns.TypeA); err != nil {
		return resolver.IPResult{Meta: meta}, err
	}
	m.mu.Lock()
	var ips []netip.Addr
	for _, ip := range m.ip[key(name)] {
		if network == "ip" || network == "ip4" && ip.Is4() || network == "ip6" && ip.Is6() {
			ips = append(ips, ip)
		}
	}
	m.mu.Unlock()
	meta, err := m.meta(name, dns.TypeA, len(ips) > 0)
	return resolver.IPResult{Meta: meta, IPs: ips}, err
}

func (m *mockDNS) LookupTXT(ctx context.Context, name string) (resolver.TXTResult, error) {
	if meta, err := m.begin(ctx, name, dns.TypeTXT); err != nil {
		return resolver.TXTResult{Meta: meta}, err
	}
	m.mu.Lock()
	txt, found := m.txt[key(name)]
	m.mu.Unlock()
	meta, err := m.meta(name, dns.TypeTXT, found)
	return resolver.TXTResult{Meta: meta, TXT: txt}, err
}

func (m *mockDNS) LookupPTR(ctx context.Context, addr netip.Addr) (resolver.PTRResult, error) {
	rev, _ := dns.ReverseAddr(addr.String())
	if meta, err := m.begin(ctx, rev, dns.TypePTR); err != nil {
		return resolver.PTRResult{Meta: meta}, err
	}
	m.mu.Lock()
	names, found := m.ptr[addr]
	m.mu.Unlock()
	meta, err := m.meta(rev, dns.TypePTR, found)
	return resolver.PTRResult{Meta: meta, Names: names}, err
}

func (m *mockDNS) LookupTLSA(ctx context.Context, name string) (resolver.TLSAResult, error) {
	if meta, err := m.begin(ctx, name, dns.TypeTLSA); err != nil {
		return resolver.TLSAResult{Meta: meta}, err
	}
	m.mu.Lock()
	recs, found := m.tlsa[key(name)]
	m.mu.Unlock()
	meta, err := m.meta(name, dns.TypeTLSA, found)
	return resolver.TLSAResult{Meta: meta, Records: recs}, err
}

func (m *mockDNS) LookupCAA(ctx context.Context, name string) (resolver.CAAResult, error) {
	if meta, err := m.begin(ctx, name, dns.TypeCAA); err != nil {
		return resolver.CAAResult{Meta: meta}, err
	}
	m.mu.Lock()
	recs, found := m.caa[key(name)]
	m.mu.Unlock()
	meta, err := m.meta(name, dns.TypeCAA, found)
	return resolver.CAAResult{Meta: meta, Records: recs}, err
}

func (m *mockDNS) Lookup(ctx context.Context, name string, qtype uint16) (resolver.Answer, error) {
	if meta, err := m.begin(ctx, name, qtype); err != nil {
		return resolver.Answer{Meta: meta, Rcode: dns.RcodeServerFailure}, err
	}
	meta, err := m.meta(name, qtype, false)
	return resolver.Answer{Meta: meta, Rcode: dns.RcodeNameError}, err
}

var _ resolver.Interface = (*mockDNS)(nil)
