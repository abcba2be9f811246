package world

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"
)

// Fixed values of the DNS server.
const (
	// dnsMaxCNAMEHops bounds how many CNAMEs one answer follows (a loop in
	// the world's data ends there).
	dnsMaxCNAMEHops = 8
	// dnsAdvertisedUDPSize is the UDP payload size the server advertises in
	// the OPT record of its replies (the 2020 DNS flag day value).
	dnsAdvertisedUDPSize = 1232
	// dnsReadUDPSize is the buffer the server reads UDP queries into.
	dnsReadUDPSize = 4096
	// dnsDefaultTTL is the TTL of the zones that are not a Domain (the
	// hosts' implicit zones and the reverse zone).
	dnsDefaultTTL = 300
	// dnsReverseZone is the reverse zone of the hosts' loopback addresses.
	dnsReverseZone = "127.in-addr.arpa."
	// dnsListenAttempts is how many free ports StartDNS tries before it
	// gives up finding one that is free for both UDP and TCP.
	dnsListenAttempts = 10
)

// DNSServer is the world's authoritative DNS server, on one address over
// UDP and TCP. Start it with StartDNS; it is safe for concurrent use.
type DNSServer struct {
	idx  *dnsIndex
	addr string
	udp  *dnsListener
	tcp  *dnsListener

	// done is closed by Close; it ends every pending DNSDelay wait.
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	queries    atomic.Int64
	tcpQueries atomic.Int64
	counts     sync.Map // dnsQueryKey → *atomic.Int64
}

// dnsQueryKey keys the per-name query counters.
type dnsQueryKey struct {
	name  string // lower-case fqdn, as asked
	qtype uint16
}

// dnsListener is one of the two miekg/dns servers (UDP or TCP) and the
// result of its serve loop.
type dnsListener struct {
	srv     *dns.Server
	started chan struct{}
	served  chan error // ActivateAndServe's result, sent once
}

// dnsZone is one zone the server is authoritative for.
type dnsZone struct {
	apex   string   // lower-case fqdn in A-label form
	soa    *dns.SOA // the synthetic SOA at the apex
	neg    *dns.SOA // the SOA for the authority section of negative answers
	nx     bool     // Domain.NXDomain: every name of the zone is NXDOMAIN
	signed bool     // Domain.Signed

	fault atomic.Value // DNSFault; SetFault changes it
	delay atomic.Int64 // time.Duration; SetDelay changes it
}

func (z *dnsZone) currentFault() DNSFault {
	f, _ := z.fault.Load().(DNSFault)
	return f
}

// dnsIndex is everything the server answers from, built once by
// buildDNSIndex and read-only afterwards (the RRs are shared by concurrent
// answers and must never be modified).
type dnsIndex struct {
	zones map[string]*dnsZone
	// names holds every name that exists in some zone, keyed by lower-case
	// fqdn: its records by type, or an empty map for an empty non-terminal.
	names map[string]map[uint16][]dns.RR
}

// StartDNS starts the authoritative DNS server for w on addr over UDP and
// TCP, on the same port for both. With port 0 ("127.0.0.1:0") it binds UDP
// on a free port first, then TCP on that port, and tries again with another
// port when TCP finds it taken.
//
// w must have had Defaults applied and have passed Validate. StartDNS reads
// w once, to build its index; later changes to w are not seen, except the
// faults and delays that SetFault and SetDelay change.
//
// Zones:
//   - every Domain is a zone of its own, its apex the domain's name in
//     A-label (punycode) form when the name is Unicode;
//   - a host name (or alias) that falls under no Domain gets an implicit
//     zone of its parent name (mx1.provider.test → zone provider.test; a
//     one-label name is a zone of itself);
//   - the reverse zone 127.in-addr.arpa holds a PTR for every host address,
//     naming Host.PTR (none when PTR is "-");
//   - every DNSBLZone is a zone of its own, with an A record at
//     <reversed address>.<zone> for each listed address (RFC 5782), TTL 300;
//   - every zone has a synthetic SOA (ns.<zone> hostmaster.<zone>, minimum =
//     Domain.TTL, 300 for the zones that are not a Domain) and NS ns.<zone>;
//   - a name belongs to the zone with the longest matching apex.
//
// Records: a Domain has its MX records at the apex (sorted by preference;
// Host "." is the null MX "0 ." of RFC 7505), its A and AAAA records at the
// apex, and its Records, read as zone-file lines with the domain as origin
// (so relative names in the data are relative to the domain too), owner
// "@" or "" for the apex, TTL 0 for the domain's TTL. A Host has an A record
// for its name and each alias, and an AAAA record for its name when IPv6 is
// set. Everything is indexed by owner name and type when the server starts.
//
// Answers are authoritative (AA), and:
//   - a name outside every zone is REFUSED;
//   - a name with records but none of the type asked is NODATA: NOERROR
//     with no answer and the zone's SOA in the authority section, its TTL
//     the lower of the SOA's TTL and minimum (RFC 2308);
//   - an empty non-terminal (a name with no records of its own but names
//     below it) is NODATA too; any other name of the zone is NXDOMAIN, with
//     the SOA in the authority section; in a Domain with NXDomain set, every
//     name is NXDOMAIN;
//   - a CNAME answers every type but CNAME and is followed through the
//     world's data, at most 8 hops; the answer's code and authority section
//     are those of the last name of the chain (a target outside every zone
//     ends the chain with NOERROR);
//   - the question is echoed as asked, its case included (0x20 encoding);
//   - a query with an OPT record (EDNS0, RFC 6891) gets one back (BADVERS
//     for an EDNS version other than 0), and over UDP an answer that does not fit the client's buffer size (512 bytes
//     without OPT) is truncated, TC set; TCP always gets the full answer;
//   - a Signed zone's answers carry the AD bit when the query had the DO or
//     the AD bit set, as a validating resolver would answer such a query
//     (RFC 6840 §5.7); a CNAME chain carries it only if every zone it
//     crosses is signed;
//   - the zone of the question's name decides DNSDelay (waited before the
//     answer, without holding up other queries) and then DNSFault: servfail
//     answers SERVFAIL, drop answers nothing at all.
func StartDNS(w *World, addr string) (*DNSServer, error) {
	idx, err := buildDNSIndex(w)
	if err != nil {
		return nil, err
	}
	pc, ln, err := listenDNS(addr)
	if err != nil {
		return nil, err
	}
	s := &DNSServer{idx: idx, addr: pc.LocalAddr().String(), done: make(chan struct{})}
	h := dns.HandlerFunc(s.serveDNS)
	s.udp = startDNSListener(&dns.Server{PacketConn: pc, Handler: h, UDPSize: dnsReadUDPSize})
	s.tcp = startDNSListener(&dns.Server{Listener: ln, Handler: h})
	var errs []error
	for _, l := range []*dnsListener{s.udp, s.tcp} {
		select {
		case <-l.started:
		case err := <-l.served:
			l.served <- err // for Close
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.Close()
		return nil, fmt.Errorf("world: cannot start dns server on %s: %w", addr, errors.Join(errs...))
	}
	return s, nil
}

// startDNSListener runs srv's serve loop in a goroutine of its own.
func startDNSListener(srv *dns.Server) *dnsListener {
	l := &dnsListener{srv: srv, started: make(chan struct{}), served: make(chan error, 1)}
	srv.NotifyStartedFunc = func() { close(l.started) }
	go func() { l.served <- srv.ActivateAndServe() }()
	return l
}

// listenDNS opens the UDP socket and the TCP listener on one address.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("world: bad dns address %q: %w", addr, err)
	}
	attempts := 1
	if port == "" || port == "0" {
		attempts = dnsListenAttempts
	}
	var lastErr error
	for range attempts {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("world: cannot listen for dns on udp %s: %w", addr, err)
		}
		udpPort := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(udpPort)))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("world: cannot listen for dns on tcp %s: %w", addr, lastErr)
}

// Addr returns the server's address, "ip:port", the same for UDP and TCP.
func (s *DNSServer) Addr() string { return s.addr }

// Queries returns how many queries the server has received, answered or
// dropped.
func (s *DNSServer) Queries() int64 { return s.queries.Load() }

// TCPQueries returns how many queries came over TCP (a client retrying a
// truncated UDP answer, RFC 7766).
func (s *DNSServer) TCPQueries() int64 { return s.tcpQueries.Load() }

// QueryCount returns how many queries the server has received for name
// (any case, with or without the trailing dot, Unicode or A-label) and
// qtype.
func (s *DNSServer) QueryCount(name string, qtype uint16) int64 {
	n, err := dnsName(name)
	if err != nil {
		n = strings.ToLower(dns.Fqdn(name))
	}
	if c, ok := s.counts.Load(dnsQueryKey{n, qtype}); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// SetFault changes the fault of the zone whose apex is zone (a Domain's
// name, an implicit host zone or "127.in-addr.arpa"); it applies to the
// queries that arrive afterwards. A name that is no zone's apex is ignored.
func (s *DNSServer) SetFault(zone string, f DNSFault) {
	if z := s.zone(zone); z != nil {
		z.fault.Store(f)
	}
}

// SetDelay changes how long the server waits before answering a query of
// zone, as SetFault does for the fault.
func (s *DNSServer) SetDelay(zone string, d time.Duration) {
	if z := s.zone(zone); z != nil {
		z.delay.Store(int64(d))
	}
}

func (s *DNSServer) zone(apex string) *dnsZone {
	n, err := dnsName(apex)
	if err != nil {
		return nil
	}
	return s.idx.zones[n]
}

// Close shuts down the UDP and TCP servers, ends pending delayed answers,
// and waits until every goroutine of the server has returned. Calling it
// again does nothing.
func (s *DNSServer) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		var errs []error
		for _, l := range []*dnsListener{s.udp, s.tcp} {
			select {
			case <-l.started:
				if err := l.srv.Shutdown(); err != nil {
					errs = append(errs, err)
				}
				if err := <-l.served; err != nil {
					errs = append(errs, err)
				}
			case <-l.served:
				// Never started: ActivateAndServe failed (StartDNS reported
				// it) and closed nothing, so close the socket here.
				if l.srv.PacketConn != nil {
					l.srv.PacketConn.Close()
				}
				if l.srv.Listener != nil {
					l.srv.Listener.Close()
				}
			}
		}
		if len(errs) > 0 {
			s.closeErr = fmt.Errorf("world: cannot close dns server: %w", errors.Join(errs...))
		}
	})
	return s.closeErr
}

// serveDNS answers one query. miekg/dns calls it in a goroutine of its own
// for every query.
func (s *DNSServer) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	s.queries.Add(1)
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		s.tcpQueries.Add(1)
	}
	reply := new(dns.Msg)
	defer func() {
		// The query is untrusted input: a bug it triggers costs that
		// query a SERVFAIL, not the whole world.
		if v := recover(); v != nil {
			reply = new(dns.Msg)
			reply.SetRcode(r, dns.RcodeServerFailure)
			w.WriteMsg(reply)
		}
	}()
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery {
		// miekg/dns's default accept function already answers these.
		reply.SetRcode(r, dns.RcodeFormatError)
		w.WriteMsg(reply)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	s.count(name, q.Qtype)
	if opt := r.IsEdns0(); opt != nil && opt.Version() != 0 {
		reply.SetRcode(r, dns.RcodeBadVers) // RFC 6891 §6.1.3
		s.write(w, r, reply)
		return
	}

	z := s.idx.zoneOf(name)
	if z != nil {
		if d := time.Duration(z.delay.Load()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
		}
		switch z.currentFault() {
		case DNSFaultDrop:
			return
		case DNSFaultServFail:
			reply.SetRcode(r, dns.RcodeServerFailure)
			s.write(w, r, reply)
			return
		}
	}
	if z == nil || q.Qclass != dns.ClassINET {
		reply.SetRcode(r, dns.RcodeRefused)
		s.write(w, r, reply)
		return
	}
	reply.SetReply(r)
	reply.Authoritative = true
	signed := s.idx.answer(reply, name, q.Qtype, z)
	if signed && (r.AuthenticatedData || dnsDO(r)) {
		reply.AuthenticatedData = true
	}
	s.write(w, r, reply)
}

// count adds one to the counter of (name, qtype).
func (s *DNSServer) count(name string, qtype uint16) {
	key := dnsQueryKey{name, qtype}
	c, ok := s.counts.Load(key)
	if !ok {
		c, _ = s.counts.LoadOrStore(key, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// write sends reply to the query r: with an OPT record when r had one, and
// over UDP cut to the client's buffer size (TC set when something was left
// out).
func (s *DNSServer) write(w dns.ResponseWriter, r, reply *dns.Msg) {
	size := dns.MinMsgSize
	if opt := r.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
		reply.SetEdns0(dnsAdvertisedUDPSize, opt.Do())
	}
	if _, tcp := w.LocalAddr().(*net.TCPAddr); tcp {
		size = dns.MaxMsgSize
	}
	reply.Truncate(size)
	w.WriteMsg(reply)
}

// dnsDO reports whether r has the DNSSEC OK bit.
func dnsDO(r *dns.Msg) bool {
	opt := r.IsEdns0()
	return opt != nil && opt.Do()
}

// zoneOf returns the zone with the longest apex that name (lower-case fqdn)
// falls under, or nil.
func (ix *dnsIndex) zoneOf(name string) *dnsZone {
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if z, ok := ix.zones[name[off:]]; ok {
			return z
		}
	}
	return nil
}

// answer fills reply's answer and authority sections and code for the
// question (name, qtype) in zone z, following CNAMEs. It reports whether
// every zone the answer came from is signed.
func (ix *dnsIndex) answer(reply *dns.Msg, name string, qtype uint16, z *dnsZone) bool {
	signed := true
	for hop := 0; ; hop++ {
		signed = signed && z.signed
		rrs, exists := ix.names[name]
		if z.nx || !exists {
			reply.Rcode = dns.RcodeNameError
			reply.Ns = []dns.RR{z.neg}
			return signed
		}
		if cname := rrs[dns.TypeCNAME]; len(cname) > 0 && qtype != dns.TypeCNAME {
			reply.Answer = append(reply.Answer, cname[0])
			if hop+1 >= dnsMaxCNAMEHops {
				return signed
			}
			name = cname[0].(*dns.CNAME).Target // lower-case, see add
			if z = ix.zoneOf(name); z == nil {
				return signed
			}
			continue
		}
		var found []dns.RR
		if qtype == dns.TypeANY {
			for _, t := range slices.Sorted(maps.Keys(rrs)) {
				found = append(found, rrs[t]...)
			}
		} else {
			found = rrs[qtype]
		}
		if len(found) == 0 {
			reply.Ns = []dns.RR{z.neg}
			return signed
		}
		reply.Answer = append(reply.Answer, found...)
		return signed
	}
}

// buildDNSIndex makes the zones and the records of w.
func buildDNSIndex(w *World) (*dnsIndex, error) {
	ix := &dnsIndex{
		zones: make(map[string]*dnsZone, len(w.Domains)+8),
		names: make(map[string]map[uint16][]dns.RR, 4*len(w.Domains)+3*len(w.Hosts)+8),
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("world: "+format, a...)) }

	// The zones first, so that every record finds its own.
	apexes := make([]string, len(w.Domains))
	for i, d := range w.Domains {
		apex, err := dnsName(d.Name)
		if err != nil {
			add("domain %q: %v", d.Name, err)
			continue
		}
		apexes[i] = apex
		if _, dup := ix.zones[apex]; dup {
			add("domain %q: zone %s listed twice", d.Name, apex)
			continue
		}
		z := ix.newZone(apex, d.TTL)
		z.nx, z.signed = d.NXDomain, d.Signed
		z.fault.Store(d.DNSFault)
		z.delay.Store(int64(d.DNSDelay))
	}
	listApexes := make([]string, len(w.DNSBL))
	for i, l := range w.DNSBL {
		apex, err := dnsName(l.Zone)
		if err != nil {
			add("dnsbl %q: %v", l.Zone, err)
			continue
		}
		if _, dup := ix.zones[apex]; dup {
			add("dnsbl %q: zone %s listed twice", l.Zone, apex)
			continue
		}
		listApexes[i] = apex
		ix.newZone(apex, dnsDefaultTTL)
	}
	hostNames := make([][]string, len(w.Hosts)) // name first, then aliases
	var implicit []string
	for i, h := range w.Hosts {
		for _, n := range append([]string{h.Name}, h.Aliases...) {
			fqdn, err := dnsName(n)
			if err != nil {
				add("host %q: name %q: %v", h.Name, n, err)
				continue
			}
			hostNames[i] = append(hostNames[i], fqdn)
			if ix.zoneOf(fqdn) == nil {
				parent := fqdn
				if off, end := dns.NextLabel(fqdn, 0); !end {
					parent = fqdn[off:]
				}
				implicit = append(implicit, parent)
			}
		}
	}
	for _, apex := range implicit {
		if _, ok := ix.zones[apex]; !ok {
			ix.newZone(apex, dnsDefaultTTL)
		}
	}
	if _, ok := ix.zones[dnsReverseZone]; !ok {
		ix.newZone(dnsReverseZone, dnsDefaultTTL)
	}

	// Then the records.
	for i, d := range w.Domains {
		apex := apexes[i]
		if apex == "" {
			continue
		}
		z := ix.zones[apex]
		ttl := z.soa.Minttl
		hdr := func(t uint16) dns.RR_Header {
			return dns.RR_Header{Name: apex, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
		}
		for _, mx := range d.MX {
			rr := &dns.MX{Hdr: hdr(dns.TypeMX), Preference: mx.Pref, Mx: "."}
			if mx.Host == "." {
				rr.Preference = 0 // RFC 7505 §3
			} else {
				target, err := dnsName(mx.Host)
				if err != nil {
					add("domain %q: mx %q: %v", d.Name, mx.Host, err)
					continue
				}
				rr.Mx = target
			}
			ix.add(rr)
		}
		for _, a := range d.A {
			ip, err := netip.ParseAddr(a)
			if err != nil || !ip.Is4() {
				add("domain %q: bad A %q", d.Name, a)
				continue
			}
			ix.add(&dns.A{Hdr: hdr(dns.TypeA), A: ip.AsSlice()})
		}
		for _, a := range d.AAAA {
			ip, err := netip.ParseAddr(a)
			if err != nil || !ip.Is6() {
				add("domain %q: bad AAAA %q", d.Name, a)
				continue
			}
			ix.add(&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip.AsSlice()})
		}
		for j, rec := range d.Records {
			rr, err := parseRecord(apex, ttl, rec)
			if err != nil {
				add("domain %q: records[%d]: %v", d.Name, j, err)
				continue
			}
			if ix.zoneOf(rr.Header().Name) == nil {
				add("domain %q: records[%d]: %s is outside every zone", d.Name, j, rr.Header().Name)
				continue
			}
			ix.add(rr)
		}
	}
	for i, h := range w.Hosts {
		ip, err := netip.ParseAddr(h.IP)
		if err == nil && ip == netip.IPv6Loopback() {
			// The IPv6-only host: an AAAA record and nothing else (its
			// reverse name, in ip6.arpa, is outside the world's zones).
			for _, n := range hostNames[i] {
				ttl := ix.zoneOf(n).soa.Minttl
				ix.add(&dns.AAAA{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip.AsSlice()})
			}
			continue
		}
		if err != nil || !ip.Is4() {
			add("host %q: bad ip %q", h.Name, h.IP)
			continue
		}
		var ip6 netip.Addr
		if h.IPv6 != "" {
			if ip6, err = netip.ParseAddr(h.IPv6); err != nil || !ip6.Is6() {
				add("host %q: bad ipv6 %q", h.Name, h.IPv6)
			}
		}
		for j, n := range hostNames[i] {
			ttl := ix.zoneOf(n).soa.Minttl
			ix.add(&dns.A{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip.AsSlice()})
			if j == 0 && ip6.Is6() {
				ix.add(&dns.AAAA{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip6.AsSlice()})
			}
		}
		if h.PTR == "-" || h.PTR == "" {
			continue
		}
		target, err := dnsName(h.PTR)
		if err != nil {
			add("host %q: ptr %q: %v", h.Name, h.PTR, err)
			continue
		}
		rev, err := dns.ReverseAddr(ip.String())
		if err != nil || ix.zoneOf(rev) == nil {
			add("host %q: ip %s has no reverse zone", h.Name, h.IP)
			continue
		}
		ix.add(&dns.PTR{Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ix.zoneOf(rev).soa.Minttl}, Ptr: target})
	}
	for i, l := range w.DNSBL {
		apex := listApexes[i]
		if apex == "" {
			continue
		}
		for _, ipText := range slices.Sorted(maps.Keys(l.Listed)) {
			ip, err := netip.ParseAddr(ipText)
			code, cerr := netip.ParseAddr(l.Listed[ipText])
			if err != nil || cerr != nil || !code.Is4() {
				add("dnsbl %q: bad listing %q: %q", l.Zone, ipText, l.Listed[ipText])
				continue
			}
			owner := dnsblOwner(ip.Unmap(), apex)
			ix.add(&dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsDefaultTTL}, A: code.AsSlice()})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// Last, the empty non-terminals between every name and its zone's apex,
	// and the MX records in preference order.
	owners := make([]string, 0, len(ix.names))
	for n := range ix.names {
		owners = append(owners, n)
	}
	for _, n := range owners {
		apex := ix.zoneOf(n).apex
		for off, end := dns.NextLabel(n, 0); !end && len(n)-off > len(apex); off, end = dns.NextLabel(n, off) {
			if _, ok := ix.names[n[off:]]; ok {
				break // it and the names above it are known already
			}
			ix.names[n[off:]] = map[uint16][]dns.RR{}
		}
		if mx := ix.names[n][dns.TypeMX]; len(mx) > 1 {
			slices.SortStableFunc(mx, func(a, b dns.RR) int {
				return int(a.(*dns.MX).Preference) - int(b.(*dns.MX).Preference)
			})
		}
	}
	return ix, nil
}

// dnsblOwner is the query name of ip in the DNS list zone apex (an fqdn):
// the address's octets (IPv4, RFC 5782 §2.1) or nibbles (IPv6, §2.4) in
// reverse order, then the zone.
func dnsblOwner(ip netip.Addr, apex string) string {
	var b strings.Builder
	if ip.Is4() {
		a := ip.As4()
		for i := 3; i >= 0; i-- {
			b.WriteString(strconv.Itoa(int(a[i])))
			b.WriteByte('.')
		}
	} else {
		const hex = "0123456789abcdef"
		a := ip.As16()
		for i := 15; i >= 0; i-- {
			b.WriteByte(hex[a[i]&0xf])
			b.WriteByte('.')
			b.WriteByte(hex[a[i]>>4])
			b.WriteByte('.')
		}
	}
	b.WriteString(apex)
	return b.String()
}

// newZone adds the zone apex with its SOA and NS records; ttl 0 means 300.
func (ix *dnsIndex) newZone(apex string, ttl uint32) *dnsZone {
	if ttl == 0 {
		ttl = dnsDefaultTTL
	}
	z := &dnsZone{apex: apex}
	z.soa = &dns.SOA{
		Hdr:     dns.RR_Header{Name: apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns." + apex,
		Mbox:    "hostmaster." + apex,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  604800,
		Minttl:  ttl,
	}
	neg := *z.soa
	neg.Hdr.Ttl = min(z.soa.Hdr.Ttl, z.soa.Minttl) // RFC 2308 §3
	z.neg = &neg
	z.fault.Store(DNSFaultNone)
	ix.zones[apex] = z
	ix.add(z.soa)
	ix.add(&dns.NS{Hdr: dns.RR_Header{Name: apex, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl}, Ns: "ns." + apex})
	return z
}

// add indexes rr under its owner name, lower-casing the owner (and a
// CNAME's target, which answer looks up), and skipping exact duplicates.
func (ix *dnsIndex) add(rr dns.RR) {
	h := rr.Header()
	h.Name = strings.ToLower(h.Name)
	if c, ok := rr.(*dns.CNAME); ok {
		c.Target = strings.ToLower(c.Target)
	}
	byType := ix.names[h.Name]
	if byType == nil {
		byType = make(map[uint16][]dns.RR, 2)
		ix.names[h.Name] = byType
	}
	for _, old := range byType[h.Rrtype] {
		if dns.IsDuplicate(old, rr) {
			return
		}
	}
	byType[h.Rrtype] = append(byType[h.Rrtype], rr)
}

// parseRecord reads rec as a zone-file line with origin apex.
func parseRecord(apex string, ttl uint32, rec Record) (dns.RR, error) {
	owner := rec.Name
	switch {
	case owner == "" || owner == "@":
		owner = "@"
	case !dnsIsASCII(owner):
		var err error
		if owner, err = aLabels(owner); err != nil {
			return nil, fmt.Errorf("name %q: %w", rec.Name, err)
		}
	}
	if rec.TTL != 0 {
		ttl = rec.TTL
	}
	if strings.ContainsAny(rec.Type+rec.Data, "\n\r") {
		return nil, fmt.Errorf("%s record %q: more than one line", rec.Type, rec.Data)
	}
	if strings.EqualFold(rec.Type, "TXT") && dnsSimpleOwner(owner) {
		if txt, ok := dnsSimpleTXT(rec.Data); ok {
			// The common case, without the cost of a zone parser.
			name := apex
			switch {
			case owner == "@":
			case strings.HasSuffix(owner, "."):
				name = owner
			default:
				name = owner + "." + apex
			}
			return &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: txt}, nil
		}
	}
	line := owner + " " + strconv.FormatUint(uint64(ttl), 10) + " IN " + rec.Type + " " + rec.Data
	zp := dns.NewZoneParser(strings.NewReader(line), apex, "")
	rr, ok := zp.Next()
	if !ok {
		if err := zp.Err(); err != nil {
			return nil, fmt.Errorf("cannot parse %s record %q: %w", rec.Type, rec.Data, err)
		}
		return nil, fmt.Errorf("cannot parse %s record %q", rec.Type, rec.Data)
	}
	return rr, nil
}

// dnsSimpleOwner reports whether owner is "@" or made of letters, digits,
// '-', '_' and '.' only: a name that reads the same with or without a zone
// parser.
func dnsSimpleOwner(owner string) bool {
	if owner == "@" {
		return true
	}
	if owner == "" || owner == "." || strings.HasPrefix(owner, ".") || strings.Contains(owner, "..") {
		return false
	}
	for i := 0; i < len(owner); i++ {
		switch c := owner[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// dnsSimpleTXT reads TXT data made of quoted strings of at most 255
// printable ASCII characters without '"' or '\\', separated by blanks,
// which a zone parser would read the same way. It reports false for
// anything else (escapes, unquoted words, long strings), which is left to
// the zone parser.
func dnsSimpleTXT(data string) ([]string, bool) {
	var txt []string
	rest := strings.TrimRight(data, " \t")
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return txt, len(txt) > 0
		}
		if rest[0] != '"' {
			return nil, false
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 || end > 255 {
			return nil, false
		}
		str := rest[1 : 1+end]
		for i := 0; i < len(str); i++ {
			if c := str[i]; c < 0x20 || c > 0x7e || c == '\\' {
				return nil, false
			}
		}
		txt = append(txt, str)
		rest = rest[2+end:]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return nil, false // "a"b
		}
	}
}

// dnsName returns name as a lower-case fully qualified domain name, its
// Unicode labels in A-label form (RFC 5890).
func dnsName(name string) (string, error) {
	if !dnsIsASCII(name) {
		var err error
		if name, err = aLabels(name); err != nil {
			return "", err
		}
	}
	return strings.ToLower(dns.Fqdn(name)), nil
}

// aLabels converts the Unicode labels of name to A-labels one by one, so
// that ASCII labels that IDNA refuses ("_dmarc", "_25") stay as they are.
func aLabels(name string) (string, error) {
	labels := strings.Split(name, ".")
	for i, l := range labels {
		if dnsIsASCII(l) {
			continue
		}
		a, err := idna.Lookup.ToASCII(l)
		if err != nil {
			return "", fmt.Errorf("cannot convert %q to an a-label: %w", l, err)
		}
		labels[i] = a
	}
	return strings.Join(labels, "."), nil
}

func dnsIsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
