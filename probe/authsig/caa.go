package authsig

import (
	"fmt"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// CAANames returns the names whose CAA records (RFC 8659) bear on
// certificates for domain, in the order a CA climbs them (§3): the domain,
// then each parent, stopping before a name that is a single label (a TLD) or
// an ICANN public suffix such as "co.uk". Registries do not publish CAA for
// their customers, so the walk is cut there: the signal is about what the
// domain's owner (or a private-suffix operator above it, such as a hosting
// platform) decided. RFC 8659 itself climbs to the TLD. A domain that is
// itself a public suffix or a single label gives just itself.
func CAANames(domain string) []string {
	d := normalizeDomain(domain)
	names := []string{d}
	for c := d; ; {
		_, parent, ok := strings.Cut(c, ".")
		if !ok || !strings.Contains(parent, ".") || parent == "" {
			break // parent is a TLD (or c was one)
		}
		if suffix, icann := publicsuffix.PublicSuffix(parent); icann && suffix == parent {
			break
		}
		names = append(names, parent)
		c = parent
	}
	return names
}

// CAALookup is the caller's answer for one name of CAANames.
type CAALookup struct {
	Name  string
	Found bool  // at least one CAA record, whatever its tag or flags
	Err   error // the lookup failed (timeout, SERVFAIL); NXDOMAIN and NODATA are not errors
}

// HasCAA says whether the domain is covered by a CAA record set (the auth
// key caa): true when any name of the walk has one, whatever the other
// lookups did; false when every lookup answered and none has one; an error
// when none has one but some lookup failed, since the failed name might have
// had one. The caller should then omit the key.
func HasCAA(lookups []CAALookup) (bool, error) {
	var failed error
	for _, l := range lookups {
		if l.Found {
			return true, nil
		}
		if l.Err != nil && failed == nil {
			failed = fmt.Errorf("cannot look up CAA of %q: %w", l.Name, l.Err)
		}
	}
	return false, failed
}
