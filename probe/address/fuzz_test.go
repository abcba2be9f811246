package address

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// reasons is every reason Parse may give; the fuzz test holds it to them.
var reasons = map[string]bool{
	reasonEmpty: true, reasonTooLong: true, reasonSpace: true, reasonNoAt: true,
	reasonEmptyLocal: true, reasonLocalTooLong: true, reasonLocalChar: true,
	reasonUTF8: true, reasonLeadingDot: true, reasonTrailingDot: true,
	reasonDoubleDot: true, reasonUnbalancedQuote: true, reasonMisplacedQuote: true,
	reasonEscape: true, reasonComment: true, reasonEmptyDomain: true,
	reasonDomainTooLong: true, reasonLabelTooLong: true, reasonEmptyLabel: true,
	reasonDomainDot: true, reasonDomainChar: true, reasonUnderscore: true,
	reasonHyphen: true, reasonReservedHyphens: true, reasonIDNA: true,
	reasonDotless: true, reasonNumericTLD: true, reasonLiteral: true,
	reasonBadLiteral: true,
}

// FuzzParse checks that Parse never panics, fails only with a known reason,
// returns addresses within the RFC 5321 limits, and that both forms of a
// parsed address parse again to the same address.
func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.in)
	}
	// Characters that UTS 46 maps, decomposes, ignores or treats as
	// deviations, to steer the fuzzer into the IDNA paths.
	for _, d := range []string{"İstanbul.tr", "ẞ.de", "σς.gr", "e\u0301.fr", "ﬀ.com", "Ⅻ.com", "a\u200cb.ir", "א1.il", "١٢.eg", "ｘｎ--bcher-kva.ｄｅ", "\u0345x.com", "a\u3002b\uff0ec\uff61d"} {
		f.Add("ü@" + d)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): error %T %v is not a *SyntaxError", s, err, err)
			}
			if se.Input != s || !reasons[se.Reason] {
				t.Fatalf("Parse(%q): SyntaxError{%q, %q}", s, se.Input, se.Reason)
			}
			return
		}
		checkAddress(t, s, a)
		for _, form := range []string{a.String(), a.ASCII()} {
			b, err := Parse(form)
			if err != nil {
				t.Fatalf("Parse(%q) = %+v, but its form %q does not parse: %v", s, a, form, err)
			}
			if b != a {
				t.Fatalf("Parse(%q) = %+v, but its form %q parses to %+v", s, a, form, b)
			}
		}
	})
}

func checkAddress(t *testing.T, s string, a Address) {
	t.Helper()
	switch {
	case a.Local == "" || len(a.Local) > maxLocal:
		t.Fatalf("Parse(%q): local part %q has %d octets", s, a.Local, len(a.Local))
	case len(a.ASCIIDomain) > maxDomain:
		t.Fatalf("Parse(%q): domain %q has %d octets", s, a.ASCIIDomain, len(a.ASCIIDomain))
	case len(a.ASCII())+2 > maxPath:
		t.Fatalf("Parse(%q): path <%s> too long", s, a.ASCII())
	case !utf8.ValidString(a.Local) || !utf8.ValidString(a.Domain):
		t.Fatalf("Parse(%q) = %+v: invalid UTF-8", s, a)
	case a.UTF8Local == IsASCII(a.Local):
		t.Fatalf("Parse(%q) = %+v: UTF8Local wrong", s, a)
	case a.Quoted != (a.Local[0] == '"'):
		t.Fatalf("Parse(%q) = %+v: Quoted wrong", s, a)
	case a.Domain == "":
		t.Fatalf("Parse(%q) = %+v: empty user-form domain", s, a)
	}
	for i := 0; i < len(a.ASCIIDomain); i++ {
		if c := a.ASCIIDomain[i]; c != '.' && c != '-' && !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') {
			t.Fatalf("Parse(%q): ASCIIDomain %q has %q", s, a.ASCIIDomain, c)
		}
	}
}

// FuzzFastDomain holds the ASCII fast path of parseDomain to the IDNA path
// it stands in for: they must accept the same domains with the same result.
// (Reasons may differ in order of discovery.)
func FuzzFastDomain(f *testing.F) {
	for _, d := range []string{"example.com", "Example.COM", "a-b.c", "ab--cd.com", "-a.com", "a.123", "a..b", "a.b.", "a_b.com", "xn--bcher-kva.de", "x"} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d string) {
		if d == "" || d[0] == '[' || !IsASCII(d) {
			return
		}
		u1, a1, r1 := parseDomain(d)
		u2, a2, r2 := parseIDNA(d)
		if (r1 == "") != (r2 == "") || u1 != u2 || a1 != a2 {
			t.Fatalf("domain %q: fast path (%q, %q, %q), IDNA path (%q, %q, %q)", d, u1, a1, r1, u2, a2, r2)
		}
	})
}
