// Package dnsbl reads DNS block and allow lists (RFC 5782): the name an
// address is looked up under, and what the list's answer means. It does no
// I/O; the caller looks the name up through its own resolver. Two callers
// use it: the auth signals (probe/authsig: is the MX address listed) and
// the egress self-check (egress: is one of our own addresses listed).
//
//  1. Name(ip, zone) is the query name: the address reversed, a dot, the
//     zone. An IPv4 address (an IPv4-mapped IPv6 one too) gives its four
//     octets in reverse order, "d.c.b.a" (ReverseIPv4, RFC 5782 §2.1); an
//     IPv6 address its 32 nibbles in reverse order (ReverseIPv6, §2.4).
//  2. The caller asks for its A records. NXDOMAIN or NODATA means not
//     listed.
//  3. Classify reads the A records: only 127.0.0.2 to 127.255.255.251 are
//     listings (§2.1, §5); the list operators' error codes, the test point
//     and any address outside 127.0.0.0/8 make the answer an error wrapping
//     ErrAnswer.
package dnsbl

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// ErrAnswer: a DNS list answered with an address that is not a listing: an
// operator error code, the 127.0.0.1 test point, or an address outside
// 127.0.0.0/8. See Classify.
var ErrAnswer = errors.New("dnsbl: dns list answered with an error code, not a listing")

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

// Name returns the name to query (type A) for ip in the DNS list zone: the
// reversed address, a dot, the zone (RFC 5782 §2.1, §2.4). The zone is used
// as given: the caller checks and normalizes its configured zones once (the
// auth signals' collector when it starts, the self-check on every run).
func Name(ip netip.Addr, zone string) (string, error) {
	rev := ReverseIPv4(ip)
	if rev == "" {
		rev = ReverseIPv6(ip)
	}
	if rev == "" {
		return "", fmt.Errorf("dnsbl: %v is not an IP address", ip)
	}
	return rev + "." + zone, nil
}

// Return codes that are not listings.
var (
	// testPoint is RFC 5782 §5's "never listed" test point, which URIBL
	// also answers to refused queries; it and 127.0.0.0 are errors.
	testPoint = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	// errorLow starts the operator error codes, 127.255.255.252-255
	// (Spamhaus, 127.255.255.0/24: 252 typo in the zone name, 254 query
	// through a public resolver, 255 excessive queries; 253 unassigned).
	errorLow = netip.AddrFrom4([4]byte{127, 255, 255, 252})

	loopback8 = netip.MustParsePrefix("127.0.0.0/8")
)

// Classify reads the A records a DNS list returned for a query name. No
// records (the caller saw NXDOMAIN or NODATA) means not listed. Only
// 127.0.0.2 to 127.255.255.251 are listings (RFC 5782 §2.1, §5); any other
// answer is an error wrapping ErrAnswer, and it wins over listings in the
// same answer, since it means the whole answer cannot be trusted:
//
//   - 127.255.255.252-255: the list operator refuses the query (Spamhaus:
//     typo in the zone, public or open resolver, too many queries);
//   - 127.0.0.1 and 127.0.0.0: the test point and the network address are
//     never listings (URIBL answers 127.0.0.1 to refused queries);
//   - anything outside 127.0.0.0/8, or IPv6: a resolver that rewrites
//     NXDOMAIN, or a dead zone whose domain was re-registered.
func Classify(answers []netip.Addr) (listed bool, err error) {
	for _, a := range answers {
		if why := reject(a.Unmap()); why != "" {
			return false, fmt.Errorf("%w: %v (%s)", ErrAnswer, a, why)
		}
		listed = true
	}
	return listed, nil
}

func reject(a netip.Addr) string {
	switch {
	case !a.Is4() || !loopback8.Contains(a):
		return "not in 127.0.0.0/8: resolver rewriting or dead list"
	case a.Compare(testPoint) <= 0:
		return "127.0.0.1 and below are not listings"
	case a.Compare(errorLow) >= 0:
		return "list operator error code"
	}
	return ""
}
