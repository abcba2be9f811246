package authsig

import (
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/verifyd/verifyd/internal/dnsname"
)

// TXTLookup fetches the TXT records at name, each already joined from its
// character-strings (RFC 7208 §3.3). It returns (nil, nil) when the name does
// not exist or has no TXT records (NXDOMAIN, NODATA), and an error only for a
// failure that says nothing about the records (timeout, SERVFAIL). The
// orchestrator passes one that goes through the caching resolver and carries
// its own context; tests pass a map.
type TXTLookup func(name string) ([]string, error)

// Names of the DNS records each signal reads. domain is normalised (see
// normalizeDomain); selector is used as given.

// DKIMName is "<selector>._domainkey.<domain>" (RFC 6376 §3.6.2.1).
func DKIMName(selector, domain string) string {
	return selector + "._domainkey." + normalizeDomain(domain)
}

// dkimParent is "_domainkey.<domain>", the name every selector's is
// below.
func dkimParent(domain string) string { return "_domainkey." + normalizeDomain(domain) }

// DMARCName is "_dmarc.<domain>" (RFC 7489 §6.1).
func DMARCName(domain string) string { return "_dmarc." + normalizeDomain(domain) }

// MTASTSName is "_mta-sts.<domain>" (RFC 8461 §3.1).
func MTASTSName(domain string) string { return "_mta-sts." + normalizeDomain(domain) }

// TLSRPTName is "_smtp._tls.<domain>" (RFC 8460 §3).
func TLSRPTName(domain string) string { return "_smtp._tls." + normalizeDomain(domain) }

// BIMIName is "<selector>._bimi.<domain>"; the selector is "default" unless a
// message names another (BIMI draft §4.2).
func BIMIName(selector, domain string) string {
	return selector + "._bimi." + normalizeDomain(domain)
}

// TrustName is "_svc-trust.<domain>" (svc trust programme, see README.md).
func TrustName(domain string) string { return "_svc-trust." + normalizeDomain(domain) }

// OrgDomain returns the Organizational Domain of domain as RFC 7489 §3.2
// defines it: the public suffix plus one label, taken from the public suffix
// list compiled into golang.org/x/net/publicsuffix (ICANN and private
// sections). A name that is itself a public suffix, or that the list cannot
// handle (empty labels), is its own organizational domain. Names under a
// suffix the list does not know (".test" in the simulated world) follow the
// list's default rule "*": the last label is the suffix.
//
// The result is lower-case, without a trailing dot, in A-label form.
func OrgDomain(domain string) string {
	d := normalizeDomain(domain)
	org, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return org
}

// normalizeDomain drops one trailing dot, converts U-labels to A-labels
// and folds ASCII case (dnsname.Fold). Names that IDNA rejects are only
// lower-cased, Unicode case included (strings.ToLower: they are no DNS
// names, so dnsname's rule is not theirs): they will fail their DNS
// lookup, which is the answer they deserve.
func normalizeDomain(d string) string {
	d = strings.TrimSuffix(d, ".")
	if isASCII(d) {
		return dnsname.Fold(d)
	}
	if a, err := idna.Lookup.ToASCII(d); err == nil {
		return a
	}
	return strings.ToLower(d)
}

// validDomainName reports whether d can be looked up: printable ASCII
// without spaces, labels of 1 to 63 octets, at most 253 octets, at least two
// labels (RFC 7208 §4.3 asks for a multi-label name). Underscores and other
// non-LDH octets are allowed, as in TXT owner names (_spf.example.com).
func validDomainName(d string) bool {
	if len(d) == 0 || len(d) > 253 {
		return false
	}
	labels := 0
	for label := range strings.SplitSeq(d, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			if label[i] <= ' ' || label[i] >= 0x7f {
				return false
			}
		}
		labels++
	}
	return labels >= 2
}

// validHostname is validDomainName restricted to letters, digits and hyphens
// (RFC 1123 §2.1), with no label starting or ending with a hyphen and a
// top label that is not all digits: a host to send reports to or fetch a
// logo from, not an IP address.
func validHostname(d string) bool {
	if !validDomainName(d) {
		return false
	}
	var last string
	for label := range strings.SplitSeq(d, ".") {
		if label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isAlnum(label[i]) && label[i] != '-' {
				return false
			}
		}
		last = label
	}
	for i := 0; i < len(last); i++ {
		if isAlpha(last[i]) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isAlpha(c) || isDigit(c) }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
