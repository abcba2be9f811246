package dnsname

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var foldTests = []struct {
	in, want string
}{
	{"", ""},
	{"example.com", "example.com"},
	{"Example.COM", "example.com"},
	{"EXAMPLE.COM.", "example.com."}, // the trailing dot is the caller's
	{".", "."},
	{"a..B", "a..b"}, // not a valid name, still folded
	{"_DMARC.Mail.Example.com", "_dmarc.mail.example.com"},
	{"xn--BCHER-KVA.Example", "xn--bcher-kva.example"},
	{"BÜCHER.de", "bÜcher.de"},     // U-labels are IDNA's: only ASCII folds
	{"İSTANBUL.tr", "İstanbul.tr"}, // no Unicode case rules either
	{"A\xffB", "a\xffb"},           // invalid UTF-8 kept byte for byte
	{"@[]^`{|}~ AZaz09-", "@[]^`{|}~ azaz09-"},
}

func TestFold(t *testing.T) {
	for _, tt := range foldTests {
		if got := Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFoldInto(t *testing.T) {
	var buf [16]byte
	for _, tt := range foldTests {
		got, ok := FoldInto(buf[:], tt.in)
		if fits := len(tt.in) <= len(buf); ok != fits || ok && string(got) != tt.want {
			t.Errorf("FoldInto(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, fits)
		}
	}
	buf = [16]byte{}
	if got, ok := FoldInto(buf[:], strings.Repeat("A", 17)); ok || got != nil || buf != [16]byte{} {
		t.Errorf("FoldInto of 17 bytes into 16 = %q, %v; buffer %q", got, ok, buf)
	}
	if got, ok := FoldInto(buf[:], strings.Repeat("A", 16)); !ok || string(got) != strings.Repeat("a", 16) {
		t.Errorf("FoldInto of 16 bytes into 16 = %q, %v", got, ok)
	}
}

// TestFoldedNamesDoNotAllocate: a name with nothing to fold comes back as
// it is, and FoldInto never allocates; the resolver's cache lookups and the
// lists' predicates rely on it.
func TestFoldedNamesDoNotAllocate(t *testing.T) {
	var buf [253]byte
	for _, name := range []string{"example.com", "example.com.", "_dmarc.mail.example.com", "bücher.de"} {
		if n := testing.AllocsPerRun(100, func() { sink = Fold(name) }); n != 0 {
			t.Errorf("Fold(%q): %v allocations", name, n)
		}
		if Fold(name) != name {
			t.Errorf("Fold(%q) changed it", name)
		}
	}
	for _, name := range []string{"Example.COM.", strings.Repeat("X", 300)} {
		if n := testing.AllocsPerRun(100, func() { _, _ = FoldInto(buf[:], name) }); n != 0 {
			t.Errorf("FoldInto(%q): %v allocations", name, n)
		}
	}
}

var sink string

// FuzzFold: on ASCII the fold is strings.ToLower; on anything it keeps
// the length and every byte that is not an ASCII capital, leaves no ASCII
// capital, is idempotent, and FoldInto agrees with it.
func FuzzFold(f *testing.F) {
	for _, tt := range foldTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Fold(s)
		if isASCII(s) && got != strings.ToLower(s) {
			t.Fatalf("Fold(%q) = %q, strings.ToLower gives %q", s, got, strings.ToLower(s))
		}
		if len(got) != len(s) {
			t.Fatalf("Fold(%q) = %q: length changed", s, got)
		}
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case 'A' <= c && c <= 'Z':
				if got[i] != c+'a'-'A' {
					t.Fatalf("Fold(%q) = %q: byte %d not lower-cased", s, got, i)
				}
			case got[i] != c:
				t.Fatalf("Fold(%q) = %q: byte %d changed", s, got, i)
			}
		}
		if again := Fold(got); again != got {
			t.Fatalf("Fold(Fold(%q)) = %q, not %q", s, again, got)
		}
		if utf8.ValidString(s) != utf8.ValidString(got) {
			t.Fatalf("Fold(%q) = %q: UTF-8 validity changed", s, got)
		}
		buf := make([]byte, len(s))
		if into, ok := FoldInto(buf, s); !ok || string(into) != got {
			t.Fatalf("FoldInto(%q) = %q, %v; Fold gives %q", s, into, ok, got)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
