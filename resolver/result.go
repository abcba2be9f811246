package resolver

import (
	"cmp"
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Status is the outcome of a lookup.
type Status uint8

// Statuses. The zero value, StatusNone, means no query was made (an invalid
// name, a closed resolver).
const (
	StatusNone     Status = iota
	StatusAnswer          // records of the type exist
	StatusNXDomain        // the name does not exist (RCODE 3)
	StatusNoData          // the name exists without records of the type (RFC 2308 §2.2)
	StatusTempFail        // no upstream answered: timeout, SERVFAIL, REFUSED, network error
)

var statusNames = [...]string{"none", "answer", "nxdomain", "nodata", "tempfail"}

// String returns the status as in metrics: "answer", "nxdomain", "nodata",
// "tempfail" or "none".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Sentinel errors. A lookup that does not end in StatusAnswer returns an
// *Error that wraps one of the first three (or ErrInvalidName, ErrClosed).
var (
	ErrNXDomain    = errors.New("resolver: no such domain")
	ErrNoData      = errors.New("resolver: no records of that type")
	ErrTemporary   = errors.New("resolver: temporary failure")
	ErrInvalidName = errors.New("resolver: invalid name")
	ErrClosed      = errors.New("resolver: closed")
)

// Error is the error of a lookup that did not find records.
type Error struct {
	// Name is the name looked up, normalised (see Normalize).
	Name string
	// Type is the query type (dns.TypeMX, ...).
	Type uint16
	// Status is StatusNXDomain, StatusNoData or StatusTempFail.
	Status Status
	// Rcode is the RCODE of the reply that decided, or -1 if none came
	// (timeout, network error).
	Rcode int
	// Err is the cause of a temporary failure (a timeout, a network error,
	// the context's error, "SERVFAIL from 127.0.0.1:53"); nil otherwise.
	Err error
}

func (e *Error) sentinel() error {
	switch e.Status {
	case StatusNXDomain:
		return ErrNXDomain
	case StatusNoData:
		return ErrNoData
	default:
		return ErrTemporary
	}
}

// Error returns e as "resolver: temporary failure: MX example.com: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.sentinel().Error())
	b.WriteString(": ")
	b.WriteString(typeString(e.Type))
	b.WriteByte(' ')
	b.WriteString(e.Name)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel of e's status and its cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.sentinel()}
	}
	return []error{e.sentinel(), e.Err}
}

// Temporary reports whether the lookup may succeed if retried.
func (e *Error) Temporary() bool { return e.Status == StatusTempFail }

// typeString names a query type: "MX", "TYPE65534".
func typeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// Meta is what every result carries besides its records.
type Meta struct {
	// Status is the outcome of the lookup.
	Status Status
	// TTL is how much longer the result stays cached (the time it may be
	// relied on); 0 for a temporary failure.
	TTL time.Duration
	// AD is the Authentic Data bit of the reply: the upstream validated the
	// answer with DNSSEC (RFC 4035 §3.2.3). Only as trustworthy as the path
	// to the upstream.
	AD bool
	// Stale marks an expired answer served because every upstream failed
	// (RFC 8767; only with Options.ServeStale).
	Stale bool
}

// Answer is the result of a raw lookup.
type Answer struct {
	Meta
	// Rcode is the reply's RCODE (dns.RcodeSuccess, dns.RcodeNameError,
	// dns.RcodeServerFailure, ...), or -1 when no reply came.
	Rcode int
	// Records is the answer section as received (CNAMEs and RRSIGs
	// included; header TTLs as received, see Meta.TTL). Shared: do not
	// modify.
	Records []dns.RR
}

// MX is one mail exchanger.
type MX struct {
	// Host is the exchange, lower-case, without the trailing dot.
	Host string
	// Pref is the preference; lower is tried first.
	Pref uint16
}

// MXResult is the result of LookupMX.
type MXResult struct {
	Meta
	// MX lists the exchanges by preference, then host. Hosts "." are left
	// out. Shared: do not modify.
	MX []MX
	// NullMX reports a null MX (RFC 7505): the domain's only MX record is
	// "0 .", it accepts no mail. Status is StatusAnswer and MX is empty.
	NullMX bool
}

// IPResult is the result of LookupIP.
type IPResult struct {
	Meta
	// IPs are the addresses, A records first, in the upstream's order.
	// Shared: do not modify.
	IPs []netip.Addr
}

// TXTResult is the result of LookupTXT.
type TXTResult struct {
	Meta
	// TXT has one element per record: the record's character-strings
	// joined, as raw bytes (RFC 7208 §3.3). Shared: do not modify.
	TXT []string
}

// PTRResult is the result of LookupPTR.
type PTRResult struct {
	Meta
	// Names are the PTR targets, lower-case, without the trailing dot.
	// Shared: do not modify.
	Names []string
}

// TLSA is one TLSA record (RFC 6698 §2.1).
type TLSA struct {
	Usage, Selector, MatchingType uint8
	// Data is the certificate association data. Shared: do not modify.
	Data []byte
}

// TLSAResult is the result of LookupTLSA.
type TLSAResult struct {
	Meta
	Records []TLSA // shared: do not modify
}

// CAA is one CAA record (RFC 8659 §4.1).
type CAA struct {
	Flag  uint8
	Tag   string
	Value string
}

// CAAResult is the result of LookupCAA.
type CAAResult struct {
	Meta
	Records []CAA // shared: do not modify
}

// maxChain bounds the CNAME chain followed inside one answer section.
const maxChain = 16

// classified is a reply turned into a status, the records that answer the
// question, and how long the result may be cached.
type classified struct {
	ans     Answer
	matched []dns.RR      // records of the type at the end of the CNAME chain
	ttl     time.Duration // cache lifetime, already clamped; 0: do not cache
}

// ttlBounds are the clamps of classify.
type ttlBounds struct {
	min, max, negMax time.Duration
}

// classify turns a NOERROR or NXDOMAIN reply to (qname, qtype) into a
// status. qname is normalised (no trailing dot). Other rcodes are the
// upstream loop's business and are classified as StatusTempFail here.
func classify(qname string, qtype uint16, r *dns.Msg, b ttlBounds) classified {
	c := classified{ans: Answer{Rcode: r.Rcode, Records: r.Answer}}
	c.ans.AD = r.AuthenticatedData
	switch r.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		c.ans.Status = StatusTempFail
		c.ans.Records = nil
		return c
	}
	// Follow the CNAME chain from qname within the answer section.
	cur := qname
	var minTTL uint32 = 1<<32 - 1
	for hop := 0; hop <= maxChain; hop++ {
		var next string
		var cnameTTL uint32
		for _, rr := range r.Answer {
			h := rr.Header()
			if h.Class != dns.ClassINET || !ownerIs(h.Name, cur) {
				continue
			}
			if h.Rrtype == qtype || qtype == dns.TypeANY {
				c.matched = append(c.matched, rr)
				minTTL = min(minTTL, h.Ttl)
			} else if cn, ok := rr.(*dns.CNAME); ok && next == "" {
				next, cnameTTL = presentName(cn.Target), h.Ttl
			}
		}
		if len(c.matched) > 0 || next == "" || next == cur {
			break
		}
		minTTL = min(minTTL, cnameTTL)
		cur = next
	}
	switch {
	case r.Rcode == dns.RcodeNameError:
		c.ans.Status = StatusNXDomain
	case len(c.matched) > 0:
		c.ans.Status = StatusAnswer
	default:
		c.ans.Status = StatusNoData
	}
	if c.ans.Status == StatusAnswer {
		c.ttl = clampTTL(time.Duration(minTTL)*time.Second, b.min, b.max)
		return c
	}
	c.matched = nil
	// Negative caching, RFC 2308 §5: the TTL of the SOA in the authority
	// section, capped by its MINIMUM field. Without a SOA, not cached.
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			t := min(soa.Hdr.Ttl, soa.Minttl)
			c.ttl = clampTTL(time.Duration(t)*time.Second, b.min, b.negMax)
			break
		}
	}
	return c
}

func clampTTL(t, lo, hi time.Duration) time.Duration {
	if t < lo {
		t = lo
	}
	if t > hi {
		t = hi
	}
	return t
}

// ownerIs reports whether the owner name of a record (presentation form,
// with the trailing dot) is the normalised name n.
func ownerIs(owner, n string) bool {
	if len(owner) > 0 && owner[len(owner)-1] == '.' {
		owner = owner[:len(owner)-1]
	}
	return strings.EqualFold(owner, n)
}

// typedView builds the typed result for qtype from the matched records, or
// returns nil for a type without one. A StatusAnswer whose records are all
// unusable (an empty A record) becomes StatusNoData in the typed view.
func typedView(qtype uint16, m Meta, matched []dns.RR) any {
	answer := m.Status == StatusAnswer
	noData := func(n int) Meta {
		if answer && n == 0 {
			m.Status = StatusNoData
		}
		return m
	}
	switch qtype {
	case dns.TypeMX:
		var mxs []MX
		nulls := 0
		for _, rr := range matched {
			if mx, ok := rr.(*dns.MX); ok {
				h := presentName(mx.Mx)
				if h == "" {
					nulls++
					continue
				}
				mxs = append(mxs, MX{Host: h, Pref: mx.Preference})
			}
		}
		slices.SortFunc(mxs, func(a, b MX) int {
			if c := cmp.Compare(a.Pref, b.Pref); c != 0 {
				return c
			}
			return strings.Compare(a.Host, b.Host)
		})
		mxs = slices.Compact(mxs)
		null := answer && nulls > 0 && len(mxs) == 0
		if null {
			return &MXResult{Meta: m, NullMX: true}
		}
		return &MXResult{Meta: noData(len(mxs)), MX: mxs}
	case dns.TypeA, dns.TypeAAAA:
		var ips []netip.Addr
		for _, rr := range matched {
			var ip netip.Addr
			var ok bool
			switch rr := rr.(type) {
			case *dns.A:
				ip, ok = netip.AddrFromSlice(rr.A)
				ip = ip.Unmap()
				ok = ok && ip.Is4()
			case *dns.AAAA:
				ip, ok = netip.AddrFromSlice(rr.AAAA)
				ok = ok && len(rr.AAAA) == 16
			}
			if ok {
				ips = append(ips, ip)
			}
		}
		return &IPResult{Meta: noData(len(ips)), IPs: ips}
	case dns.TypeTXT:
		var txts []string
		for _, rr := range matched {
			if t, ok := rr.(*dns.TXT); ok {
				var b strings.Builder
				for _, s := range t.Txt {
					b.WriteString(unescapeTXT(s))
				}
				txts = append(txts, b.String())
			}
		}
		return &TXTResult{Meta: noData(len(txts)), TXT: txts}
	case dns.TypePTR:
		var names []string
		for _, rr := range matched {
			if p, ok := rr.(*dns.PTR); ok {
				names = append(names, presentName(p.Ptr))
			}
		}
		return &PTRResult{Meta: noData(len(names)), Names: names}
	case dns.TypeTLSA:
		var recs []TLSA
		for _, rr := range matched {
			if t, ok := rr.(*dns.TLSA); ok {
				data, err := hex.DecodeString(t.Certificate)
				if err != nil {
					continue
				}
				recs = append(recs, TLSA{Usage: t.Usage, Selector: t.Selector, MatchingType: t.MatchingType, Data: data})
			}
		}
		return &TLSAResult{Meta: noData(len(recs)), Records: recs}
	case dns.TypeCAA:
		var recs []CAA
		for _, rr := range matched {
			if c, ok := rr.(*dns.CAA); ok {
				recs = append(recs, CAA{Flag: c.Flag, Tag: unescapeTXT(c.Tag), Value: c.Value})
			}
		}
		return &CAAResult{Meta: noData(len(recs)), Records: recs}
	}
	return nil
}

// unescapeTXT undoes the escaping miekg/dns applies to character-strings
// when it unpacks them: "\"" and "\\" for a quote and a backslash, "\DDD"
// (three decimal digits) for any other byte outside printable ASCII.
func unescapeTXT(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b = append(b, c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			v := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0')
			if v <= 255 {
				b = append(b, byte(v))
				i += 3
				continue
			}
		}
		i++
		b = append(b, s[i])
	}
	return string(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
