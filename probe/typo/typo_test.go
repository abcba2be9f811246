package typo

import (
	"fmt"
	"strings"
	"testing"
)

// qwerty lists, for each letter, the keys that touch it on a QWERTY
// keyboard, written out by hand from the keyboard (not from the
// package's model of it), for the tests' adjacent-key slips.
var qwerty = map[byte]string{
	'q': "wa12", 'w': "qeas23", 'e': "wrsd34", 'r': "etdf45", 't': "ryfg56", 'y': "tugh67", 'u': "yihj78",
	'i': "uojk89", 'o': "ipkl90", 'p': "ol0-", 'a': "qwsz", 's': "awedzx", 'd': "serfxc", 'f': "drtgcv",
	'g': "ftyhvb", 'h': "gyujbn", 'j': "huiknm", 'k': "jiolm", 'l': "kop", 'z': "asx", 'x': "zsdc",
	'c': "xdfv", 'v': "cfgb", 'b': "vghn", 'n': "bhjm", 'm': "njk",
}

func TestAdjacentKeys(t *testing.T) {
	for k, ns := range qwerty {
		for i := 0; i < len(ns); i++ {
			if !adjacent(k, ns[i]) {
				t.Errorf("%c and %c touch on a QWERTY keyboard; adjacent says no", k, ns[i])
			}
		}
		for c := byte('a'); c <= 'z'; c++ {
			if c != k && !strings.ContainsRune(ns, rune(c)) && adjacent(k, c) {
				t.Errorf("%c and %c do not touch; adjacent says they do", k, c)
			}
		}
	}
}

// TestSlipKinds: one case of each slip, written out.
func TestSlipKinds(t *testing.T) {
	s := Shipped()
	for typed, want := range map[string]Suggestion{
		"gmil.com":       {Domain: "gmail.com", Kind: Deletion},
		"gmaill.com":     {Domain: "gmail.com", Kind: Doubling},
		"ggmail.com":     {Domain: "gmail.com", Kind: Doubling},
		"gmial.com":      {Domain: "gmail.com", Kind: Transposition},
		"gnail.com":      {Domain: "gmail.com", Kind: Adjacent},
		"hoitmail.com":   {Domain: "hotmail.com", Kind: ExtraKey}, // i beside o
		"hotrmail.com":   {Domain: "hotmail.com", Kind: ExtraKey}, // r beside t
		"gmail.comn":     {Domain: "gmail.com", TLD: true},        // n beside m
		"hotmail.con":    {Domain: "hotmail.com", TLD: true},
		"yahoo.cmo":      {Domain: "yahoo.com", TLD: true},
		"gmail.co":       {Domain: "gmail.com", TLD: true},
		"outlook.comm":   {Domain: "outlook.com", TLD: true},
		"hotmial.co":     {Domain: "hotmail.com", Kind: Transposition, TLD: true},
		"qq.con":         {Domain: "qq.com", TLD: true},
		"yahoo.co.ukk":   {Domain: "yahoo.co.uk", TLD: true},
		"GMIAL.COM":      {Domain: "gmail.com", Kind: Transposition},
		"gmial.com.":     {Domain: "gmail.com", Kind: Transposition},
		"protonmial.com": {Domain: "protonmail.com", Kind: Transposition},
	} {
		got, ok := s.Suggest(typed)
		if !ok || got != want {
			t.Errorf("Suggest(%q) = %+v, %v; want %+v", typed, got, ok, want)
		}
	}
}

// TestNeverSuggest: what is never corrected.
func TestNeverSuggest(t *testing.T) {
	s := Shipped()
	for typed, why := range map[string]string{
		"gmail.com":      "a target itself",
		"googlemail.com": "a provider's other domain is not a slip",
		"ymail.com":      "likewise (one letter from gmail.com)",
		"mail.com":       "a target one deletion from gmail.com",
		"gxail.com":      "x is not next to m: not a typing slip",
		"gxmail.com":     "an extra x, next to neither g nor m",
		"gmailcom":       "no dot",
		"gmail":          "no dot",
		"example.com":    "far from every target",
		"qw.com":         "a short name is corrected in its top-level part only",
		"aol.cm.com":     "a dot added is not a slip of a letter",
		"gmal.cmo.uk":    "three slips",
		"tmail.com":      "one slip from gmail.com and from ymail.com: a guess",
		"ail.com":        "one slip from mail.com and from aol.com (a short name, never suggested, still makes it a guess)",
		"":               "empty",
	} {
		if got, ok := s.Suggest(typed); ok {
			t.Errorf("Suggest(%q) = %+v; want none (%s)", typed, got, why)
		}
	}
	// The caller's own domains: never corrected, and corrected to.
	if got, ok := s.Suggest("acme-corp.com", "acme-corp.com"); ok {
		t.Errorf("an account's own domain corrected to %+v", got)
	}
	if got, ok := s.Suggest("acme-crop.com", "acme-corp.com"); !ok || got.Domain != "acme-corp.com" {
		t.Errorf("a slip of an account's own domain: %+v, %v", got, ok)
	}
}

// slips generates every one-slip variant of domain's name and of its
// top-level part, by the definitions of the package doc (not by its
// code): each letter left out, doubled, swapped with the next, replaced
// by each key that touches it (the hand-written qwerty table).
func slips(domain string) map[string]string {
	out := map[string]string{}
	name, rest, _ := strings.Cut(domain, ".")
	variants := func(w string) map[string]string {
		v := map[string]string{}
		for i := 0; i < len(w); i++ {
			if w[i] == '.' {
				continue
			}
			v[w[:i]+w[i+1:]] = "deletion"
			v[w[:i+1]+w[i:]] = "doubling"
			if i+1 < len(w) && w[i+1] != '.' && w[i] != w[i+1] {
				v[w[:i]+string(w[i+1])+string(w[i])+w[i+2:]] = "transposition"
			}
			for _, n := range qwerty[w[i]] {
				v[w[:i]+string(n)+w[i+1:]] = "adjacent"
			}
		}
		return v
	}
	if len(name) > 3 {
		for n, k := range variants(name) {
			if n != "" {
				out[n+"."+rest] = k
			}
		}
	}
	for r, k := range variants(rest) {
		if r != "" && !strings.HasPrefix(r, ".") && !strings.HasSuffix(r, ".") {
			out[name+"."+r] = "tld " + k
		}
	}
	return out
}

// TestGeneratedSlips: every one-slip variant of every shipped target. A
// suggestion is right when it is the domain the slip was made from;
// precision is the right share of the suggestions, recall the share of
// slips that got a right one. A variant that is itself a target is not a
// typo, and is never corrected.
func TestGeneratedSlips(t *testing.T) {
	s := Shipped()
	var typos, suggested, right int
	perKind := map[string][3]int{}
	var wrong []string
	for _, target := range Parse(shipped) {
		for typed, kind := range slips(target) {
			if s.Known(typed) {
				if got, ok := s.Suggest(typed); ok {
					t.Errorf("target %s corrected to %s", typed, got.Domain)
				}
				continue
			}
			typos++
			k := perKind[kind]
			k[0]++
			got, ok := s.Suggest(typed)
			if ok {
				suggested++
				k[1]++
				if got.Domain == target {
					right++
					k[2]++
				} else if len(wrong) < 20 {
					wrong = append(wrong, fmt.Sprintf("%s (from %s) -> %s", typed, target, got.Domain))
				}
			}
			perKind[kind] = k
		}
	}
	precision := float64(right) / float64(suggested)
	recall := float64(right) / float64(typos)
	t.Logf("%d slips of %d targets: %d suggestions, %d right: precision %.4f, recall %.4f", typos, len(s.targets), suggested, right, precision, recall)
	for k, v := range perKind {
		t.Logf("  %-18s %5d slips, %5d suggested, %5d right", k, v[0], v[1], v[2])
	}
	for _, w := range wrong {
		t.Logf("  wrong: %s", w)
	}
	if precision < 0.99 {
		t.Errorf("precision %.4f, want at least 0.99", precision)
	}
	if recall < 0.80 {
		t.Errorf("recall %.4f, want at least 0.80", recall)
	}
}
