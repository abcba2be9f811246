package resolver

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/verifyd/verifyd/internal/dnsname"
)

// Name limits of RFC 1035 §2.3.4, for the textual form without the
// trailing dot (253 characters is 255 octets on the wire).
const (
	maxLabelLen = 63
	maxNameLen  = 253
	// maxInputLen bounds a non-ASCII name before IDNA conversion.
	maxInputLen = 1024
)

// Normalize returns name in the form the resolver queries and caches it
// under: lower-case ASCII, non-ASCII labels converted to A-labels with the
// UTS 46 lookup profile (RFC 5891), without the trailing dot. Every name is
// taken as fully qualified: "example.com" and "example.com." are the same
// name. The error wraps ErrInvalidName.
func Normalize(name string) (string, error) {
	return normalize(name)
}

func invalidName(name, why string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidName, name, why)
}

// normalize is Normalize. Its fast path, for a name that is already
// lower-case ASCII without A-labels, returns a substring of name and does
// not allocate.
func normalize(name string) (string, error) {
	s := name
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if s == "" {
		return "", invalidName(name, "empty name")
	}
	if len(s) > maxNameLen && (isASCII(s) || len(s) > maxInputLen) {
		return "", invalidName(name, "name longer than 253 characters")
	}
	upper, slow := false, false
	labelStart := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			n := i - labelStart
			if n == 0 {
				return "", invalidName(name, "empty label")
			}
			if n > maxLabelLen && !slow {
				return "", invalidName(name, "label longer than 63 characters")
			}
			if n >= 4 && hasACEPrefix(s[labelStart:]) {
				slow = true // an A-label: let IDNA check its punycode
			}
			labelStart = i + 1
			continue
		}
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		case 'A' <= c && c <= 'Z':
			upper = true
		case c >= utf8.RuneSelf:
			slow = true
		default:
			if !slow {
				return "", invalidName(name, fmt.Sprintf("character %q not allowed", c))
			}
		}
	}
	if slow {
		return normalizeIDN(name)
	}
	if upper {
		s = dnsname.Fold(s)
	}
	return s, nil
}

// normalizeIDN handles a name with non-ASCII characters or A-labels: it
// splits the name at the dots UTS 46 maps to "." and converts every label
// that is not plain ASCII with idna.Lookup. Converting label by label keeps
// the underscores of ASCII labels, which the Lookup profile's STD3 rules
// would refuse in a whole name.
func normalizeIDN(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", invalidName(name, "not valid UTF-8")
	}
	s := strings.Map(func(r rune) rune {
		switch r {
		case '\u3002', '\uff0e', '\uff61': // ideographic, fullwidth, halfwidth full stops
			return '.'
		}
		return r
	}, name)
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if s == "" {
		return "", invalidName(name, "empty name")
	}
	labels := strings.Split(s, ".")
	for i, l := range labels {
		if l == "" {
			return "", invalidName(name, "empty label")
		}
		if isASCII(l) && !hasACEPrefix(l) {
			l = dnsname.Fold(l)
		} else {
			a, err := idna.Lookup.ToASCII(l)
			if err != nil {
				return "", fmt.Errorf("%w %q: %v", ErrInvalidName, name, err)
			}
			l = a
			if l == "" {
				return "", invalidName(name, "empty label")
			}
		}
		if len(l) > maxLabelLen {
			return "", invalidName(name, "label longer than 63 characters")
		}
		for j := 0; j < len(l); j++ {
			c := l[j]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", invalidName(name, fmt.Sprintf("character %q not allowed", c))
			}
		}
		labels[i] = l
	}
	out := strings.Join(labels, ".")
	if len(out) > maxNameLen {
		return "", invalidName(name, "name longer than 253 characters")
	}
	return out, nil
}

// hasACEPrefix reports whether the label at the start of s begins with the
// ACE prefix "xn--" (any case).
func hasACEPrefix(s string) bool {
	return len(s) >= 4 && (s[0]|0x20) == 'x' && (s[1]|0x20) == 'n' && s[2] == '-' && s[3] == '-'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fqdn returns the canonical name n with the trailing dot, for the wire.
func fqdn(n string) string { return n + "." }

// presentName turns a domain name from a reply (presentation form, maybe
// mixed case, with the trailing dot) into the form results use: lower-case
// without the trailing dot. The root is "".
func presentName(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return dnsname.Fold(s)
}
