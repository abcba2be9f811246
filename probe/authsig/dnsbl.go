package authsig

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// ReverseIPv4 returns the octets of an IPv4 address in reverse order,
// "d.c.b.a" for a.b.c.d, the form DNS lists are queried with (RFC 5782 §2.1).
// An IPv4-mapped IPv6 address counts as IPv4. It returns "" for anything
// else.
func ReverseIPv4(ip netip.Addr) string {
	ip = ip.Unmap()
	if !ip.Is4() {
		return ""
	}
	b := ip.As4()
	return strconv.Itoa(int(b[3])) + "." + strconv.Itoa(int(b[2])) + "." +
		strconv.Itoa(int(b[1])) + "." + strconv.Itoa(int(b[0]))
}

// ReverseIPv6 returns the 32 nibbles of an IPv6 address in reverse order,
// dot-separated, as IPv6 DNS lists are queried (RFC 5782 §2.4). It returns ""
// for an IPv4 or IPv4-mapped address.
func ReverseIPv6(ip netip.Addr) string {
	if !ip.Is6() || ip.Is4In6() {
		return ""
	}
	const hex = "0123456789abcdef"
	b := ip.As16()
	out := make([]byte, 0, 63)
	for i := len(b) - 1; i >= 0; i-- {
		out = append(out, hex[b[i]&0xf], '.', hex[b[i]>>4], '.')
	}
	return string(out[:len(out)-1])
}

// DNSBLName returns the name to query (type A) for ip in the DNS list zone:
// the reversed address, a dot, the zone (RFC 5782 §2.1, §2.4). The zone is
// normalised like a domain.
func DNSBLName(ip netip.Addr, zone string) (string, error) {
	zone = normalizeDomain(zone)
	if !validDomainName(zone) {
		return "", fmt.Errorf("authsig: dns list zone %q is not a domain name", zone)
	}
	rev := ReverseIPv4(ip)
	if rev == "" {
		rev = ReverseIPv6(ip)
	}
	if rev == "" {
		return "", fmt.Errorf("authsig: %v is not an IP address", ip)
	}
	return rev + "." + zone, nil
}

// Return codes that are not listings.
var (
	// dnsblTestPoint is RFC 5782 §5's "never listed" test point, which
	// URIBL also answers to refused queries; it and 127.0.0.0 are errors.
	dnsblTestPoint = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	// dnsblErrorLow starts the operator error codes, 127.255.255.252-255
	// (Spamhaus, 127.255.255.0/24: 252 typo in the zone name, 254 query
	// through a public resolver, 255 excessive queries; 253 unassigned).
	dnsblErrorLow = netip.AddrFrom4([4]byte{127, 255, 255, 252})
	// dnswlBlocked is dnswl.org's "query blocked" (over the free limit).
	dnswlBlocked = netip.AddrFrom4([4]byte{127, 0, 0, 255})
	// dnswlBlockedAlt is refused too: no dnswl.org category 255 exists.
	dnswlBlockedAlt = netip.AddrFrom4([4]byte{127, 0, 255, 255})
)

var loopback8 = netip.MustParsePrefix("127.0.0.0/8")

// ClassifyDNSBL reads the A records a DNS list returned for a query name.
// No records (the caller saw NXDOMAIN or NODATA) means not listed. Only
// 127.0.0.2 to 127.255.255.251 are listings (RFC 5782 §2.1, §5); any other
// answer is an error wrapping ErrDNSBLAnswer, and it wins over listings in
// the same answer, since it means the whole answer cannot be trusted:
//
//   - 127.255.255.252-255: the list operator refuses the query (Spamhaus:
//     typo in the zone, public or open resolver, too many queries);
//   - 127.0.0.1 and 127.0.0.0: the test point and the network address are
//     never listings (URIBL answers 127.0.0.1 to refused queries);
//   - anything outside 127.0.0.0/8, or IPv6: a resolver that rewrites
//     NXDOMAIN, or a dead zone whose domain was re-registered.
func ClassifyDNSBL(answers []netip.Addr) (listed bool, err error) {
	for _, a := range answers {
		if why := dnsblReject(a.Unmap()); why != "" {
			return false, fmt.Errorf("%w: %v (%s)", ErrDNSBLAnswer, a, why)
		}
		listed = true
	}
	return listed, nil
}

func dnsblReject(a netip.Addr) string {
	switch {
	case !a.Is4() || !loopback8.Contains(a):
		return "not in 127.0.0.0/8: resolver rewriting or dead list"
	case a.Compare(dnsblTestPoint) <= 0:
		return "127.0.0.1 and below are not listings"
	case a.Compare(dnsblErrorLow) >= 0:
		return "list operator error code"
	}
	return ""
}

// ClassifyDNSWL reads the A records a DNS allow list returned, with the
// encoding of ClassifyDNSBL plus the allow lists' own error codes: dnswl.org
// answers 127.0.0.255 when it blocks a querier (SpamAssassin's
// RCVD_IN_DNSWL_BLOCKED, rspamd's DNSWL_BLOCKED), and 127.0.255.255, which
// no category uses, is refused too. dnswl.org listings are 127.0.<category>.
// <trust 0-3>; any valid code counts as listed, including trust 0 ("none").
func ClassifyDNSWL(answers []netip.Addr) (listed bool, err error) {
	for _, a := range answers {
		if u := a.Unmap(); u == dnswlBlocked || u == dnswlBlockedAlt {
			return false, fmt.Errorf("%w: %v (allow list refused the query)", ErrDNSBLAnswer, a)
		}
	}
	return ClassifyDNSBL(answers)
}

// DNSBLResult is the caller's outcome for one DNS list.
type DNSBLResult struct {
	Zone   string
	Listed bool
	Err    error // from the lookup or from ClassifyDNSBL
}

// SummarizeDNSBL turns the per-list outcomes for one address into the auth
// keys dnsbl_clean and dnsbl_lists_on. listedOn holds the zones that list
// the address, sorted. known is false when no list lists it but some list
// could not answer: then "clean" cannot be claimed, and the caller should
// omit dnsbl_clean (dnsbl_lists_on stays empty). With no results at all
// (no lists configured) known is false too.
func SummarizeDNSBL(results []DNSBLResult) (clean bool, listedOn []string, known bool) {
	failed := false
	for _, r := range results {
		switch {
		case r.Err != nil:
			failed = true
		case r.Listed:
			listedOn = append(listedOn, r.Zone)
		}
	}
	slices.Sort(listedOn)
	listedOn = slices.Compact(listedOn)
	if len(listedOn) > 0 {
		return false, listedOn, true
	}
	return !failed && len(results) > 0, nil, !failed && len(results) > 0
}
