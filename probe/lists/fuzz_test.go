package lists

import (
	"strings"
	"testing"
)

// FuzzLookups feeds arbitrary input to every predicate and checks the
// properties the engine relies on: no panic, ASCII case does not matter,
// and a "+tag" does not change a role.
func FuzzLookups(f *testing.F) {
	for _, s := range []string{
		"mailinator.com", "a.b.mailinator.com.", "GMAIL.COM", "", ".", "..", "a..b",
		"no-reply", "No.Reply+x", "+", "@", "spamtrap-test+x@example.invalid", "a@b@c",
		"x@sub.spamtrap.invalid", strings.Repeat("a", 300), "\xff\xfe.com",
	} {
		f.Add(s)
	}
	l := Embedded()
	f.Fuzz(func(t *testing.T, s string) {
		up := strings.ToUpper(s)
		if !isASCII(s) {
			up = s
		}
		if l.IsDisposable(s) != l.IsDisposable(up) {
			t.Errorf("IsDisposable(%q) depends on case", s)
		}
		if l.IsFree(s) != l.IsFree(up) {
			t.Errorf("IsFree(%q) depends on case", s)
		}
		if l.IsRole(s) != l.IsRole(up) {
			t.Errorf("IsRole(%q) depends on case", s)
		}
		if l.IsSpamtrap(s) != l.IsSpamtrap(up) {
			t.Errorf("IsSpamtrap(%q) depends on case", s)
		}
		if l.IsRole(s) && len(s) < 60 && !l.IsRole(s+"+tag") {
			t.Errorf("IsRole(%q) but not with a +tag", s)
		}
		Normalize(s, s)
		CanonicalDomain(s)
	})
}

// FuzzParse feeds arbitrary file contents to the parser of each list: it
// must not panic, and what it accepts must be usable.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"a.example\n!b.example # c\n", "\uFEFFx@y.example\r\n@z.example\n", "!\n", "a b\n",
		"bücher.example\n", "xn--zz.example\n", "sales\n!sales\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, name := range names {
			l := newLists()
			if err := l.apply(name, name+".txt", data); err != nil {
				if !strings.Contains(err.Error(), name+".txt:") {
					t.Errorf("error without file:line: %v", err)
				}
				continue
			}
			l.recount()
			for _, line := range strings.Split(data, "\n") {
				line = strings.TrimSpace(line)
				l.IsDisposable(line)
				l.IsFree(line)
				l.IsRole(line)
				l.IsSpamtrap(line)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
