// Package entry normalises the entries of the list files, so that the
// generator that writes the shipped files (internal/listgen) and the parser
// that reads shipped and operator files (package lists) agree byte for byte
// on what an entry is.
//
// Domains are written in their ASCII form: IDNA A-labels, lower case, no
// trailing dot. The conversion uses golang.org/x/net/idna with the UTS 46
// lookup profile, non-transitional (IDNA2008, RFC 5891 §5), STD3 rules and
// the Bidi rule (RFC 5893) — the same profile as the syntax stage
// (probe/address), so an entry and a probed domain meet in the same form.
//
// Local parts (role words, spamtrap mailboxes) are ASCII, lower-cased. The
// lists never fold non-ASCII case: a Unicode local part (RFC 6531) is
// compared byte for byte.
package entry

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/idna"

	"github.com/verifyd/verifyd/internal/dnsname"
)

// profile is the IDNA profile of the syntax stage (probe/address).
var profile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(true),
	idna.Transitional(false),
)

// MaxDomain is the longest domain in text form without the root dot
// (RFC 1035 §2.3.4 gives 255 octets on the wire, 253 in text).
const MaxDomain = 253

// MaxLocal is the longest local part (RFC 5321 §4.5.3.1.1).
const MaxLocal = 64

// Domain returns the list form of a domain entry: A-labels, lower case, one
// trailing dot dropped. It refuses names that no mail domain can have: an
// empty label, a label over 63 octets, a name over 253 octets, characters
// outside letters, digits and hyphen (after IDNA mapping), a single label
// (a list entry for a whole top-level domain is almost always a mistake),
// and an all-digit top-level label (RFC 3696 §2).
func Domain(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", errors.New("empty domain")
	}
	a := s
	if !plainLDH(s) {
		var err error
		a, err = profile.ToASCII(s)
		if err != nil {
			return "", fmt.Errorf("not a valid domain name: %v", err)
		}
	} else {
		a = dnsname.Fold(s)
	}
	if len(a) > MaxDomain {
		return "", fmt.Errorf("domain longer than %d octets", MaxDomain)
	}
	for rest := a; ; {
		label, tail, more := strings.Cut(rest, ".")
		if label == "" || len(label) > 63 {
			return "", errors.New("every label must be 1 to 63 octets")
		}
		if !more {
			break
		}
		rest = tail
	}
	last := strings.LastIndexByte(a, '.')
	if last < 0 {
		return "", errors.New("a domain entry needs at least two labels")
	}
	if allDigits(a[last+1:]) {
		return "", errors.New("top-level label is all digits")
	}
	return a, nil
}

// plainLDH reports whether s is already a well-formed ASCII domain without
// A-labels, so the IDNA round trip can be skipped (it is the common case and
// the conversion is comparatively slow). Upper case is allowed here; the
// caller lower-cases.
func plainLDH(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
			continue
		}
		label := s[start:i]
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if len(label) >= 4 && label[2] == '-' && label[3] == '-' {
			// "xn--" A-labels and other reserved "??--" forms go through
			// the IDNA checks (RFC 5891 §4.2.3.1).
			return false
		}
		start = i + 1
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// atext marks the ASCII characters of RFC 5322 §3.2.3 atext.
var atext = func() (t [128]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-/=?^_`{|}~" {
		t[c] = true
	}
	return t
}()

// Local returns the list form of a local part entry: ASCII letters
// lower-cased. It accepts a Dot-string (RFC 5321 §4.1.2) of ASCII atext and
// UTF-8 octets; quoted local parts are not supported in the lists.
func Local(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty local part")
	}
	if len(s) > MaxLocal {
		return "", fmt.Errorf("local part longer than %d octets", MaxLocal)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
		case c == '.':
			if i == 0 || i == len(s)-1 || s[i-1] == '.' {
				return "", errors.New("local part has a leading, trailing or doubled dot")
			}
		case !atext[c]:
			return "", fmt.Errorf("character %q is not allowed in a local part entry", c)
		}
	}
	return LowerASCII(s), nil
}

// LowerASCII returns s with ASCII letters lower-cased; s itself when it has
// none (no allocation). It is for local parts, whose case the provider's
// rules decide; domain names fold with dnsname.Fold.
func LowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
