package lists

import (
	"slices"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		local, domain string
		want          string
		notes         []string
	}{
		// Gmail: dots, plus, case; googlemail.com is gmail.com.
		{"john.smith", "gmail.com", "johnsmith", []string{NoteDots}},
		{"John.Smith+News", "gmail.com", "johnsmith", []string{NoteLowercased, NotePlusTag, NoteDots}},
		{"j.o.h.n+a.b", "GMAIL.COM", "john", []string{NotePlusTag, NoteDots}},
		{"john", "googlemail.com", "john", []string{NoteDomainAlias}},
		{"johnsmith", "gmail.com.", "johnsmith", nil},
		{"+tag", "gmail.com", "+tag", nil}, // nothing before "+": left alone
		// Microsoft, Apple, Fastmail: plus only; dots are significant.
		{"first.last+shop", "outlook.com", "first.last", []string{NotePlusTag}},
		{"First.Last", "hotmail.com", "first.last", []string{NoteLowercased}},
		{"a+b+c", "live.com", "a", []string{NotePlusTag}},
		{"me+x", "icloud.com", "me", []string{NotePlusTag}},
		{"me+x", "fastmail.com", "me", []string{NotePlusTag}},
		// Proton: plus, and ".", "-", "_" do not matter.
		{"Jo.Ann-Lee_x+promo", "proton.me", "joannleex", []string{NoteLowercased, NotePlusTag, NoteSeparators}},
		{"a-b", "pm.me", "ab", []string{NoteSeparators}},
		// Yahoo: "-" marks a disposable address; nothing is removed.
		{"base-keyword", "yahoo.com", "base-keyword", []string{NoteYahooDisposable}},
		{"name+tag", "yahoo.com", "name+tag", nil},
		// Unknown providers: untouched, case included (RFC 5321 §2.4).
		{"John.Smith+x", "example.com", "John.Smith+x", nil},
		{"John", "", "John", nil},
		// Quoted local parts: untouched.
		{`"john smith"`, "gmail.com", `"john smith"`, nil},
	} {
		got, notes := Normalize(tc.local, tc.domain)
		if got != tc.want || !slices.Equal(notes, tc.notes) {
			t.Errorf("Normalize(%q, %q) = %q, %q; want %q, %q", tc.local, tc.domain, got, notes, tc.want, tc.notes)
		}
	}
}

func TestCanonicalDomain(t *testing.T) {
	for in, want := range map[string]string{
		"googlemail.com":  "gmail.com",
		"GoogleMail.com.": "gmail.com",
		"gmail.com":       "gmail.com",
		"Example.COM":     "example.com",
		"outlook.com":     "outlook.com",
	} {
		if got := CanonicalDomain(in); got != want {
			t.Errorf("CanonicalDomain(%q) = %q, want %q", in, got, want)
		}
	}
}
