package address

import (
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/verifyd/verifyd/internal/dnsname"
)

// profile converts domains for lookup: UTS 46 mapping and validation,
// non-transitional (IDNA2008 deviations such as "ß" are kept, not mapped to
// "ss"), STD3 ASCII rules, hyphen and joiner checks and the Bidi rule. It is
// idna.Lookup spelled out, so that an upgrade of x/net that retunes Lookup
// does not silently change what verifyd accepts. Length checks are left to
// checkASCIIDomain, which gives better reasons.
var profile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(true),
	idna.Transitional(false),
	idna.VerifyDNSLength(false),
)

// parseDomain checks a non-empty domain (RFC 5321 §4.1.2 Domain, with RFC
// 6531 §3.3 U-labels) and returns it in the user's form (U-labels) and in
// A-labels, both lower-case, or the reason it is refused.
func parseDomain(d string) (user, ascii, reason string) {
	if d[0] == '[' {
		return "", "", checkLiteral(d)
	}
	if IsASCII(d) {
		reason, aLabel := checkASCIIDomain(d)
		if reason != "" {
			return "", "", reason
		}
		if !aLabel {
			// For an all-ASCII domain without A-labels, UTS 46 processing
			// is the ASCII case fold (dnsname.Fold) plus the checks just
			// made; skip the tables. FuzzFastDomain holds this path to
			// the IDNA one.
			d = dnsname.Fold(d)
			return d, d, ""
		}
	}
	return parseIDNA(d)
}

// parseIDNA converts a domain that has U-labels or A-labels with the UTS 46
// lookup profile, then checks the A-label form like any ASCII domain.
func parseIDNA(d string) (user, ascii, reason string) {
	if !utf8.ValidString(d) {
		// x/net/idna maps invalid UTF-8 to U+FFFD instead of failing.
		return "", "", reasonUTF8
	}
	// ASCII characters outside letters, digits, hyphen and dot are never
	// valid under STD3 rules; name them rather than blame IDNA.
	for i := 0; i < len(d); i++ {
		if c := d[i]; c < utf8.RuneSelf && c != '.' && !isLDH(c) {
			return "", "", charReason(c)
		}
	}
	if d[len(d)-1] == '.' {
		return "", "", reasonDomainDot
	}
	ascii, err := profile.ToASCII(d)
	if err != nil {
		// A plain ASCII label next to the U-labels may be what is wrong
		// ("-a.bücher.de"); report it as the fast path would.
		for label := range strings.SplitSeq(d, ".") {
			if label != "" && IsASCII(label) {
				if reason, _ := checkLabel(label); reason != "" {
					return "", "", reason
				}
			}
		}
		return "", "", reasonIDNA
	}
	if reason, _ := checkASCIIDomain(ascii); reason != "" {
		return "", "", reason
	}
	user, err = profile.ToUnicode(ascii)
	if err != nil {
		// ToASCII does not fully validate: "\ufffd" encodes to an
		// A-label that ToUnicode then refuses.
		return "", "", reasonIDNA
	}
	return user, ascii, ""
}

// checkASCIIDomain checks an all-ASCII domain: its length (RFC 5321
// §4.5.3.1.2, as the DNS text limit of 253), every label (checkLabel), no
// empty label or trailing dot, at least two labels, and a top-level label
// that is not all digits (RFC 3696 §2). aLabel reports a label starting
// with "xn--", which only IDNA can validate. Upper case is accepted.
func checkASCIIDomain(d string) (reason string, aLabel bool) {
	if len(d) > maxDomain {
		return reasonDomainTooLong, false
	}
	labels := 0
	numeric := false
	for start := 0; start <= len(d); {
		end := strings.IndexByte(d[start:], '.')
		if end < 0 {
			end = len(d)
		} else {
			end += start
		}
		label := d[start:end]
		if label == "" {
			if end == len(d) {
				return reasonDomainDot, false
			}
			return reasonEmptyLabel, false
		}
		reason, isA := checkLabel(label)
		if reason != "" {
			return reason, false
		}
		aLabel = aLabel || isA
		labels++
		numeric = allDigits(label)
		start = end + 1
	}
	switch {
	case labels < 2:
		return reasonDotless, false
	case numeric:
		return reasonNumericTLD, false
	}
	return "", aLabel
}

// checkLabel checks one non-empty ASCII label against RFC 5321 §4.1.2
// sub-domain = Let-dig [Ldh-str] (a leading digit is fine, RFC 1123 §2.1),
// its length (RFC 1035 §2.3.4) and the reserved "--" in positions 3 and 4
// (RFC 5890 §2.3.1, RFC 5891 §4.2.3.1), which only A-labels may use.
// aLabel reports an "xn--" label.
func checkLabel(label string) (reason string, aLabel bool) {
	for i := 0; i < len(label); i++ {
		if c := label[i]; !isLDH(c) {
			return charReason(c), false
		}
	}
	switch {
	case len(label) > maxLabel:
		return reasonLabelTooLong, false
	case label[0] == '-' || label[len(label)-1] == '-':
		return reasonHyphen, false
	case len(label) >= 4 && label[2] == '-' && label[3] == '-':
		if (label[0]|0x20) == 'x' && (label[1]|0x20) == 'n' {
			return "", true
		}
		return reasonReservedHyphens, false
	}
	return "", false
}

// isLDH reports whether c is an ASCII letter, digit or hyphen.
func isLDH(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

// charReason names the problem with an ASCII character that is not allowed in
// a domain.
func charReason(c byte) string {
	switch c {
	case '_':
		return reasonUnderscore
	case '(', ')':
		return reasonComment
	}
	return reasonDomainChar
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkLiteral classifies an address literal (RFC 5321 §4.1.3):
//
//	address-literal  = "[" ( IPv4-address-literal /
//	                   IPv6-address-literal /
//	                   General-address-literal ) "]"
//	IPv6-address-literal = "IPv6:" IPv6-addr
//
// Every literal is refused; a well-formed IPv4 or IPv6 one with
// reasonLiteral, anything else (including General-address-literal, whose
// tags IANA has never registered) with reasonBadLiteral.
func checkLiteral(d string) string {
	if len(d) < 2 || d[len(d)-1] != ']' {
		return reasonBadLiteral
	}
	in := d[1 : len(d)-1]
	const v6 = "IPv6:"
	if len(in) > len(v6) && strings.EqualFold(in[:len(v6)], v6) {
		ip, err := netip.ParseAddr(in[len(v6):])
		if err == nil && ip.Is6() && ip.Zone() == "" {
			return reasonLiteral
		}
		return reasonBadLiteral
	}
	if ip, err := netip.ParseAddr(in); err == nil && ip.Is4() {
		return reasonLiteral
	}
	return reasonBadLiteral
}
