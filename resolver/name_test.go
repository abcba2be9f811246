package resolver

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for an error
	}{
		{"example.com", "example.com"},
		{"example.com.", "example.com"},
		{"Example.COM.", "example.com"},
		{"_dmarc.Example.com", "_dmarc.example.com"},
		{"_25._tcp.mx.example.com", "_25._tcp.mx.example.com"},
		{"r3---sn-abc.example", "r3---sn-abc.example"}, // hyphens UTS 46 CheckHyphens would refuse
		{"-lead.example", "-lead.example"},
		{"4.3.2.1.in-addr.arpa.", "4.3.2.1.in-addr.arpa"},
		{"com", "com"},
		{"Bücher.example", "xn--bcher-kva.example"},
		{"ÖBB.at", "xn--bb-eka.at"},
		{"_dmarc.bücher.example", "_dmarc.xn--bcher-kva.example"},
		{"bücher。example", "xn--bcher-kva.example"},  // U+3002 is a dot
		{"bücher．example．", "xn--bcher-kva.example"}, // U+FF0E
		{"ｅｘａｍｐｌｅ.com", "example.com"},               // fullwidth letters map to ASCII
		{"faß.de", "xn--fa-hia.de"},                  // nontransitional: ß stays
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"日本語.jp", "xn--wgv71a119e.jp"},
		{"\u0627\u0031.example", "xn--1-ymc.example"}, // RTL label ending in a digit (RFC 5893)
		{strings.Repeat("a", 63) + ".test", strings.Repeat("a", 63) + ".test"},
		{strings.Repeat("abcdefghi.", 25) + "abc", strings.Repeat("abcdefghi.", 25) + "abc"},

		{"", ""},
		{".", ""},
		{"..", ""},
		{"a..b", ""},
		{".a", ""},
		{"a.b..", ""},
		{strings.Repeat("a", 64) + ".test", ""},
		{strings.Repeat("abcdefghi.", 25) + "abcd", ""},
		{strings.Repeat("ü", 64) + ".test", ""}, // A-label over 63
		{"exa mple.com", ""},
		{"a*.example", ""},
		{"a\\.b.example", ""},
		{"a\x00.example", ""},
		{"\xff.example", ""},
		{"bü\xffcher.example", ""},
		{"xn--zz--.example", ""}, // bad punycode
		{"\u00ad.example", ""},   // maps to an empty label
		{"a\u2488.example", ""},  // ⒈ maps to "1." (refused by STD3 rules)
		{"bü_cher.example", ""},  // underscore in a Unicode label
		{"\u0627a.example", ""},  // RTL label with a left-to-right letter (RFC 5893 rule 2)
	} {
		got, err := Normalize(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("Normalize(%q) = %q, want an error", tc.in, got)
			} else if !errors.Is(err, ErrInvalidName) {
				t.Errorf("Normalize(%q): %v does not wrap ErrInvalidName", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNormalizeFastPathDoesNotAllocate(t *testing.T) {
	for _, name := range []string{"example.com", "example.com.", "_dmarc.mail.example.com"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = normalize(name) }); n != 0 {
			t.Errorf("normalize(%q): %v allocations", name, n)
		}
	}
}
