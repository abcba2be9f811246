package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// errBadHost is a webhook URL host that is neither a domain name nor an
// IP address as a browser reads one.
var errBadHost = errors.New("is not a valid host name or IP address")

// webhookHost reads the host of a webhook URL (url.URL.Hostname: brackets
// gone, percent-escapes decoded) the way a browser does, following the
// WHATWG URL Standard's host parser (§3.5), so that no spelling of an
// internal address slips past the guard as a "name":
//
//  1. An IPv6 literal is an address.
//  2. Otherwise the host is mapped to ASCII (UTS #46: full-width digits and
//     dots become ASCII, upper case becomes lower).
//  3. A host whose last label is a number ("ends in a number") must be an
//     IPv4 address in one of the forms inet_aton(3) and browsers accept:
//     1 to 4 parts, each decimal, octal (leading 0) or hexadecimal (0x),
//     the last filling the remaining bytes: 127.1, 0x7f.1, 0177.0.0.1,
//     2130706433 are all 127.0.0.1. One that does not parse is an error,
//     never a name.
//  4. "localhost" and every name under .localhost are loopback (RFC 6761
//     §6.3): a resolver must answer them so, whatever DNS says.
//
// It returns the address when the host is one, else the ASCII name.
func webhookHost(host string) (name string, ip netip.Addr, err error) {
	if host == "" {
		return "", netip.Addr{}, errBadHost
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Zone() != "" {
			return "", netip.Addr{}, errBadHost
		}
		return "", ip, nil
	}
	ascii := strings.ToLower(host)
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			if ascii, err = idna.Lookup.ToASCII(host); err != nil {
				return "", netip.Addr{}, errBadHost
			}
			break
		}
	}
	if endsInNumber(ascii) {
		ip, err := parseIPv4WHATWG(ascii)
		if err != nil {
			return "", netip.Addr{}, err
		}
		return "", ip, nil
	}
	trimmed := strings.TrimSuffix(ascii, ".")
	if trimmed == "localhost" || strings.HasSuffix(trimmed, ".localhost") {
		return ascii, netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
	}
	return ascii, netip.Addr{}, nil
}

// endsInNumber is the WHATWG "ends in a number" checker: the last label
// (ignoring one trailing dot) is all digits, or 0x followed by hex digits.
func endsInNumber(host string) bool {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" {
		if len(parts) == 1 {
			return false
		}
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	if len(last) >= 2 && (last[:2] == "0x" || last[:2] == "0X") {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return false
}

// parseIPv4WHATWG is the WHATWG IPv4 parser (URL Standard §3.5).
func parseIPv4WHATWG(host string) (netip.Addr, error) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, fmt.Errorf("%w: %q has more than four numeric parts", errBadHost, host)
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, fmt.Errorf("%w: %q is a malformed IPv4 address", errBadHost, host)
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("%w: %q is an IPv4 address out of range", errBadHost, host)
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, fmt.Errorf("%w: %q is an IPv4 address out of range", errBadHost, host)
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// parseIPv4Number reads one part: 0x… hexadecimal, 0… octal, else
// decimal; "0x" alone is 0. Values past 2^32 are reported as such (the
// caller's range check refuses them).
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if v = v*base + d; v > 1<<40 {
			v = 1 << 40 // out of range either way; no overflow
		}
	}
	return v, true
}
