package address

import (
	"errors"
	"strings"
	"testing"
)

// domainOf returns an ASCII domain of exactly n octets (n >= 5) made of
// labels of at most 63 octets, ending in ".com".
func domainOf(n int) string {
	var b strings.Builder
	body := n - len("com") // octets of "label." segments before "com"
	for body > 0 {
		k := min(body, 64)
		if body-k == 1 { // never leave a one-octet remainder: it would be an empty label
			k--
		}
		b.WriteString(strings.Repeat("a", k-1))
		b.WriteByte('.')
		body -= k
	}
	b.WriteString("com")
	return b.String()
}

// parseTests are the table rows, also the fuzz seeds. A row with reason ""
// must parse to want; any other row must fail with that reason.
var parseTests = []struct {
	in     string
	want   Address
	reason string
}{
	// Plain ASCII.
	{in: "user@example.com", want: Address{Local: "user", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "x@example.com", want: Address{Local: "x", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "user+tag@example.com", want: Address{Local: "user+tag", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "first.last@example.com", want: Address{Local: "first.last", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "a.b.c.d@mail.example.co.uk", want: Address{Local: "a.b.c.d", Domain: "mail.example.co.uk", ASCIIDomain: "mail.example.co.uk"}},
	{in: "!#$%&'*+-/=?^_`{|}~@example.com", want: Address{Local: "!#$%&'*+-/=?^_`{|}~", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "user@123.example.com", want: Address{Local: "user", Domain: "123.example.com", ASCIIDomain: "123.example.com"}},
	{in: "user@a-b.example.com", want: Address{Local: "user", Domain: "a-b.example.com", ASCIIDomain: "a-b.example.com"}},
	// The domain is lower-cased, the local part never (RFC 5321 §2.4).
	{in: "USER@EXAMPLE.COM", want: Address{Local: "USER", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "John.Doe@Example.Com", want: Address{Local: "John.Doe", Domain: "example.com", ASCIIDomain: "example.com"}},

	// Quoted local parts: canonical form is the Dot-string when possible,
	// else the minimal Quoted-string.
	{in: `"john doe"@example.com`, want: Address{Local: `"john doe"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"john@home"@example.com`, want: Address{Local: `"john@home"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"john\"doe"@example.com`, want: Address{Local: `"john\"doe"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"a\\b"@example.com`, want: Address{Local: `"a\\b"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"a\ b"@example.com`, want: Address{Local: `"a b"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"john"@example.com`, want: Address{Local: "john", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: `"john.doe"@example.com`, want: Address{Local: "john.doe", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: `"\j\o\h\n"@example.com`, want: Address{Local: "john", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: `".john"@example.com`, want: Address{Local: `".john"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"john..doe"@example.com`, want: Address{Local: `"john..doe"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"(x)"@example.com`, want: Address{Local: `"(x)"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"用户 名"@example.com`, want: Address{Local: `"用户 名"`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true, UTF8Local: true}},
	{in: "\"us\u3000er\"@example.com", want: Address{Local: "\"us\u3000er\"", Domain: "example.com", ASCIIDomain: "example.com", Quoted: true, UTF8Local: true}},

	// UTF-8 local parts (RFC 6531 §3.3), kept as given.
	{in: "josé@example.com", want: Address{Local: "josé", Domain: "example.com", ASCIIDomain: "example.com", UTF8Local: true}},
	{in: "用户@例子.广告", want: Address{Local: "用户", Domain: "例子.广告", ASCIIDomain: "xn--fsqu00a.xn--4rr70v", UTF8Local: true}},
	// Fullwidth: UTS 46 maps the domain; the local part is a valid UTF-8
	// local part and is not mapped (only the receiving host may).
	{in: "ｕｓｅｒ@ｅｘａｍｐｌｅ.ｃｏｍ", want: Address{Local: "ｕｓｅｒ", Domain: "example.com", ASCIIDomain: "example.com", UTF8Local: true}},

	// IDN domains: A-labels for DNS/SMTP, U-labels for the receipt.
	{in: "user@bücher.de", want: Address{Local: "user", Domain: "bücher.de", ASCIIDomain: "xn--bcher-kva.de"}},
	{in: "user@BÜCHER.DE", want: Address{Local: "user", Domain: "bücher.de", ASCIIDomain: "xn--bcher-kva.de"}},
	{in: "user@XN--BCHER-KVA.DE", want: Address{Local: "user", Domain: "bücher.de", ASCIIDomain: "xn--bcher-kva.de"}},
	{in: "user@xn--fsqu00a.xn--4rr70v", want: Address{Local: "user", Domain: "例子.广告", ASCIIDomain: "xn--fsqu00a.xn--4rr70v"}},
	{in: "user@例子。广告", want: Address{Local: "user", Domain: "例子.广告", ASCIIDomain: "xn--fsqu00a.xn--4rr70v"}},
	{in: "user@ｅｘａｍｐｌｅ．ｃｏｍ", want: Address{Local: "user", Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: "user@exa\u00admple.com", want: Address{Local: "user", Domain: "example.com", ASCIIDomain: "example.com"}}, // soft hyphen is ignored by UTS 46
	{in: "user@faß.de", want: Address{Local: "user", Domain: "faß.de", ASCIIDomain: "xn--fa-hia.de"}},               // non-transitional: ß stays
	{in: "user@عربي.com", want: Address{Local: "user", Domain: "عربي.com", ASCIIDomain: "xn--ngbrx4e.com"}},
	// Emoji are not IDNA2008 (RFC 5892 disallows symbols) but UTS 46 marks
	// them valid (NV8) and x/net/idna follows UTS 46, so they are accepted;
	// such domains exist (.ws, .to) and DNS decides whether they resolve.
	{in: "user@i❤.ws", want: Address{Local: "user", Domain: "i❤.ws", ASCIIDomain: "xn--i-7iq.ws"}},
	{in: "user@😀.com", want: Address{Local: "user", Domain: "😀.com", ASCIIDomain: "xn--e28h.com"}},

	// Length limits (RFC 5321 §4.5.3.1), in octets.
	{in: strings.Repeat("a", 64) + "@example.com", want: Address{Local: strings.Repeat("a", 64), Domain: "example.com", ASCIIDomain: "example.com"}},
	{in: strings.Repeat("a", 65) + "@example.com", reason: reasonLocalTooLong},
	{in: strings.Repeat("é", 32) + "@example.com", want: Address{Local: strings.Repeat("é", 32), Domain: "example.com", ASCIIDomain: "example.com", UTF8Local: true}},
	{in: strings.Repeat("é", 33) + "@example.com", reason: reasonLocalTooLong},
	{in: `"` + strings.Repeat("a", 61) + ` "@example.com`, want: Address{Local: `"` + strings.Repeat("a", 61) + ` "`, Domain: "example.com", ASCIIDomain: "example.com", Quoted: true}},
	{in: `"` + strings.Repeat("a", 62) + ` "@example.com`, reason: reasonLocalTooLong},                                                                       // quotes count
	{in: `"` + strings.Repeat(`\a`, 64) + `"@example.com`, want: Address{Local: strings.Repeat("a", 64), Domain: "example.com", ASCIIDomain: "example.com"}}, // canonical form counts
	{in: "user@" + strings.Repeat("a", 63) + ".com", want: Address{Local: "user", Domain: strings.Repeat("a", 63) + ".com", ASCIIDomain: strings.Repeat("a", 63) + ".com"}},
	{in: "user@" + strings.Repeat("a", 64) + ".com", reason: reasonLabelTooLong},
	{in: "user@" + strings.Repeat("ü", 60) + ".de", reason: reasonLabelTooLong}, // the A-label is what counts
	// A 253-octet domain passes the domain limit but no address can carry
	// it within the 256-octet path; 254 fails the domain limit itself.
	{in: "x@" + domainOf(253), reason: reasonTooLong},
	{in: "x@" + domainOf(254), reason: reasonDomainTooLong},
	// The path: "<" 64 "@" 189 ">" is 256 octets.
	{in: strings.Repeat("a", 64) + "@" + domainOf(189), want: Address{Local: strings.Repeat("a", 64), Domain: domainOf(189), ASCIIDomain: domainOf(189)}},
	{in: strings.Repeat("a", 64) + "@" + domainOf(190), reason: reasonTooLong},
	{in: strings.Repeat("a", maxInput) + "@example.com", reason: reasonTooLong},

	// The whole input.
	{in: "", reason: reasonEmpty},
	{in: " user@example.com", reason: reasonSpace},
	{in: "user@example.com ", reason: reasonSpace},
	{in: "user@example.com\n", reason: reasonSpace},
	{in: "\u00a0user@example.com", reason: reasonSpace},
	{in: "user@example.com\u3000", reason: reasonSpace},
	{in: "userexample.com", reason: reasonNoAt},
	{in: "user＠example.com", reason: reasonNoAt}, // fullwidth @ does not split
	{in: "@example.com", reason: reasonEmptyLocal},
	{in: "user@", reason: reasonEmptyDomain},
	{in: "John Doe <user@example.com>", reason: reasonLocalChar},
	{in: "<user@example.com>", reason: reasonLocalChar},

	// Local part.
	{in: "user@@example.com", reason: reasonLocalChar},
	{in: "us er@example.com", reason: reasonLocalChar},
	{in: "a\\b@example.com", reason: reasonLocalChar},
	{in: "us\x00er@example.com", reason: reasonLocalChar},
	{in: "us\x7fer@example.com", reason: reasonLocalChar},
	{in: "us\u0085er@example.com", reason: reasonLocalChar}, // C1 control
	{in: "us\u3000er@example.com", reason: reasonLocalChar}, // ideographic space, unquoted
	{in: "user\u2028x@example.com", reason: reasonLocalChar},
	{in: "user\ufdd0@example.com", reason: reasonLocalChar},
	{in: "us\xffer@example.com", reason: reasonUTF8},
	{in: "john..doe@example.com", reason: reasonDoubleDot},
	{in: ".john@example.com", reason: reasonLeadingDot},
	{in: "john.@example.com", reason: reasonTrailingDot},
	{in: `a"b@example.com`, reason: reasonMisplacedQuote},
	{in: `"a"b@example.com`, reason: reasonMisplacedQuote},
	{in: `"a"."b"@example.com`, reason: reasonMisplacedQuote}, // obs-local-part
	{in: `"unterminated@example.com`, reason: reasonUnbalancedQuote},
	{in: `"a\"@example.com`, reason: reasonUnbalancedQuote},
	{in: `""@example.com`, reason: reasonEmptyLocal},
	{in: `"a\é"@example.com`, reason: reasonEscape},
	{in: "\"a\\\tb\"@example.com", reason: reasonEscape},
	{in: "\"a\tb\"@example.com", reason: reasonLocalChar},
	{in: "\"a\xffb\"@example.com", reason: reasonUTF8},
	{in: "(comment)user@example.com", reason: reasonComment},
	{in: "user(comment)@example.com", reason: reasonComment},

	// Domain.
	{in: "user@example.com(comment)", reason: reasonComment},
	{in: "user@example..com", reason: reasonEmptyLabel},
	{in: "user@.example.com", reason: reasonEmptyLabel},
	{in: "user@xn--.com", reason: reasonHyphen},
	{in: "user@example.com.", reason: reasonDomainDot},
	{in: "user@例子.广告。", reason: reasonDomainDot}, // U+3002 maps to a dot
	{in: "user@exam ple.com", reason: reasonDomainChar},
	{in: `user@"example".com`, reason: reasonDomainChar},
	{in: "user@ex\xffample.com", reason: reasonUTF8},
	{in: "user@exa_mple.com", reason: reasonUnderscore},
	{in: "user@_dmarc.example.com", reason: reasonUnderscore},
	{in: "user@bücher_x.de", reason: reasonUnderscore},
	{in: "user@-example.com", reason: reasonHyphen},
	{in: "user@example-.com", reason: reasonHyphen},
	{in: "user@a-.bücher.de", reason: reasonHyphen},
	{in: "user@ab--cd.com", reason: reasonReservedHyphens},
	{in: "user@xn--a.com", reason: reasonIDNA}, // not valid Punycode for a U-label
	{in: "user@-bücher.de", reason: reasonIDNA},
	{in: "user@1عربي.com", reason: reasonIDNA},    // Bidi rule, RFC 5893
	{in: "user@a\u200db.com", reason: reasonIDNA}, // CONTEXTJ, RFC 5892
	{in: "user@⒈.com", reason: reasonIDNA},        // disallowed under STD3 rules
	{in: "user@a＠b.com", reason: reasonIDNA},
	{in: "user@\ufffd.com", reason: reasonIDNA},
	{in: "user@localhost", reason: reasonDotless},
	{in: "user@例子", reason: reasonDotless},
	{in: "user@example.123", reason: reasonNumericTLD},
	{in: "user@1.2.3.4", reason: reasonNumericTLD},
	{in: "user@[192.0.2.1]", reason: reasonLiteral},
	{in: "user@[IPv6:2001:db8::1]", reason: reasonLiteral},
	{in: "user@[ipv6:::ffff:192.0.2.1]", reason: reasonLiteral},
	{in: "user@[300.1.1.1]", reason: reasonBadLiteral},
	{in: "user@[IPv6:fe80::1%eth0]", reason: reasonBadLiteral},
	{in: "user@[example.com]", reason: reasonBadLiteral},
	{in: "user@[192.0.2.1", reason: reasonBadLiteral},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		got, err := Parse(tt.in)
		if tt.reason != "" {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Errorf("Parse(%q) = %+v, %v; want reason %q", tt.in, got, err, tt.reason)
				continue
			}
			if se.Reason != tt.reason || se.Input != tt.in {
				t.Errorf("Parse(%q): reason %q (input %q); want %q", tt.in, se.Reason, se.Input, tt.reason)
			}
			if got != (Address{}) {
				t.Errorf("Parse(%q) failed but returned %+v", tt.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
		}
	}
}

func TestDomainOf(t *testing.T) {
	for n := 5; n <= 300; n++ {
		d := domainOf(n)
		if len(d) != n || strings.Contains(d, "..") || strings.HasPrefix(d, ".") {
			t.Fatalf("domainOf(%d) = %q (len %d)", n, d, len(d))
		}
	}
}

// TestDomainLimit pins the 253-octet domain limit, which the table cannot
// reach through Parse because the path limit is tighter.
func TestDomainLimit(t *testing.T) {
	if _, ascii, reason := parseDomain(domainOf(253)); reason != "" || ascii != domainOf(253) {
		t.Errorf("253-octet domain: %q, %q", ascii, reason)
	}
	if _, _, reason := parseDomain(domainOf(254)); reason != reasonDomainTooLong {
		t.Errorf("254-octet domain: reason %q, want %q", reason, reasonDomainTooLong)
	}
}

func TestAddressForms(t *testing.T) {
	a, err := Parse(`"john doe"@BÜCHER.de`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), `"john doe"@bücher.de`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := a.ASCII(), `"john doe"@xn--bcher-kva.de`; got != want {
		t.Errorf("ASCII() = %q, want %q", got, want)
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Parse("user@exa_mple.com")
	if got, want := err.Error(), `address: underscore in domain: "user@exa_mple.com"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// Long input is cut on a rune boundary; control characters are escaped.
	long := "\x00" + strings.Repeat("é", 100) + "@example.com"
	_, err = Parse(long)
	want := `address: invalid character in local part: "\x00` + strings.Repeat("é", 39) + `"...`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestIsASCII(t *testing.T) {
	for s, want := range map[string]bool{"": true, "user@example.com": true, "\x7f": true, "josé": false, "\xff": false} {
		if got := IsASCII(s); got != want {
			t.Errorf("IsASCII(%q) = %v, want %v", s, got, want)
		}
	}
}

var sink Address

func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct{ name, in string }{
		{"ascii", "john.doe+tag@example.com"},
		{"ascii-upper-domain", "John.Doe@Example.COM"},
		{"quoted", `"john doe"@example.com`},
		{"utf8-local", "josé@example.com"},
		{"idn", "user@bücher.de"},
		{"a-label", "user@xn--bcher-kva.de"},
		{"invalid", "john..doe@example.com"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = Parse(bm.in)
			}
		})
	}
}

// TestNewInput: one form for every spelling of an address: the local
// part's case kept, the domain folded (and in U-labels), a quoted local
// part that needs no quotes unquoted; an input that does not parse is
// kept as given, with its error.
func TestNewInput(t *testing.T) {
	for _, tc := range []struct{ in, email, ascii string }{
		{"Ann@Shop.TEST", "Ann@shop.test", "shop.test"},
		{"ann@shop.test", "ann@shop.test", "shop.test"},
		{`"ann"@SHOP.test`, "ann@shop.test", "shop.test"},
		{"user@XN--BCHER-KVA.de", "user@bücher.de", "xn--bcher-kva.de"},
		{"user@BÜCHER.de", "user@bücher.de", "xn--bcher-kva.de"},
	} {
		in := NewInput(tc.in)
		if in.Err != nil || in.Email != tc.email || in.ASCIIDomain() != tc.ascii {
			t.Errorf("%q: %q %q %v, want %q %q", tc.in, in.Email, in.ASCIIDomain(), in.Err, tc.email, tc.ascii)
		}
	}
	in := NewInput("not an address@")
	if in.Err == nil || in.Email != "not an address@" || in.ASCIIDomain() != "" {
		t.Errorf("a bad address: %+v", in)
	}
}
