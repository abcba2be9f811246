package entry

import (
	"strings"
	"testing"
)

func TestDomain(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"example.com", "example.com", true},
		{"Example.COM.", "example.com", true},
		{"bücher.de", "xn--bcher-kva.de", true},
		{"XN--BCHER-KVA.DE", "xn--bcher-kva.de", true},
		{"gmaıl.net", "xn--gmal-nza.net", true}, // dotless i stays distinct
		{"ｅｘａｍｐｌｅ.ｃｏｍ", "example.com", true},    // UTS 46 width mapping
		{"a-b.example", "a-b.example", true},
		{strings.Repeat("a", 63) + ".example", strings.Repeat("a", 63) + ".example", true},
		{"", "", false},
		{".", "", false},
		{"com", "", false},
		{"a..example", "", false},
		{".a.example", "", false},
		{"-a.example", "", false},
		{"a-.example", "", false},
		{"ab--cd.example", "", false}, // hyphens in positions 3 and 4
		{"xn--zz.example", "", false}, // not valid punycode
		{"under_score.example", "", false},
		{"sp ace.example", "", false},
		{"1.2.3.4", "", false},
		{strings.Repeat("a", 64) + ".example", "", false},
		{strings.Repeat("a.", 126) + "ab", "", false}, // 254 octets
	} {
		got, err := Domain(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Domain(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Admin", "admin", true},
		{"no-reply", "no-reply", true},
		{"a#b", "a#b", true},
		{"josé", "josé", true}, // UTF-8 kept, not folded
		{"JOSÉ", "josÉ", true},
		{"", "", false},
		{".a", "", false},
		{"a.", "", false},
		{"a..b", "", false},
		{"a b", "", false},
		{`"q"`, "", false},
		{"a@b", "", false},
		{strings.Repeat("a", 65), "", false},
	} {
		got, err := Local(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Local(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestLowerASCII(t *testing.T) {
	if s := "already.lower"; LowerASCII(s) != s {
		t.Error("changed a lower-case string")
	}
	if got := LowerASCII("MiXeD-ÄB"); got != "mixed-Äb" {
		t.Errorf("LowerASCII = %q", got)
	}
}
