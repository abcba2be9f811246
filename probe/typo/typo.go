// Package typo suggests the domain a person meant when the one they typed
// looks like a slip of a well-known mailbox domain: ann@gmial.com for
// ann@gmail.com, bob@hotmail.con for bob@hotmail.com.
//
// A slip is one of the mistakes of typing a word by hand, each one edit
// of the intended domain:
//
//   - Deletion: a letter left out (gmil.com);
//   - Doubling: a letter typed twice (gmaill.com);
//   - Transposition: two neighbouring letters swapped (gmial.com);
//   - Adjacent: a letter replaced by a key next to it on a QWERTY
//     keyboard (gnail.com: n is next to m);
//   - Extra key: a key next to one typed hit with it, a letter too many
//     (hoitmail.com: i beside o; Word to the Wise's typo traps have it);
//   - in the top-level part, any of the above (hotmail.con, yahoo.cmo,
//     gmail.co), alone or beside one in the name (hotmial.co).
//
// Suggest only compares: whether the typed domain receives mail (and so
// must never be corrected), and whether the suggestion does, is the
// caller's to know (the engine's DNS answers). Its targets are a short
// list of the domains that matter (domains.txt: mailcheck's list and the
// large providers), and any the caller adds (an account's own).
//
// Precision before recall: the target fewest slips away is suggested,
// and none when two are as near (tmail.com is one slip from gmail.com and
// from ymail.com); a short first label (three letters or fewer: qq.com,
// aol.com) is only corrected in its top-level part, where a one-letter
// change of the name would as likely be another domain, but a slip of
// its name still makes another target as near ambiguous (ail.com is
// mail.com without its m, or aol.com with i beside o).
package typo

import (
	_ "embed"
	"strings"
)

// Kind is the slip that makes a typed domain from the one suggested.
type Kind string

// The kinds of slip.
const (
	Deletion      Kind = "deletion"
	Doubling      Kind = "doubling"
	Transposition Kind = "transposition"
	Adjacent      Kind = "adjacent_key"
	ExtraKey      Kind = "extra_key"
)

// Suggestion is the domain Suggest thinks was meant, and the slips: Kind
// in its first label ("" for none), TLD when the top-level part slipped
// too (or alone).
type Suggestion struct {
	Domain string
	Kind   Kind
	TLD    bool
}

// Suggester holds the target domains.
type Suggester struct {
	targets []target
	known   map[string]bool
}

type target struct {
	domain string
	sld    string // the first label
}

//go:embed domains.txt
var shipped string

// Shipped returns the Suggester of the shipped targets (domains.txt).
func Shipped() *Suggester { return New(Parse(shipped)) }

// Parse reads a list of targets: a domain a line, # comments and blank
// lines skipped.
func Parse(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, strings.ToLower(l))
	}
	return out
}

// New returns a Suggester of domains, in order of preference.
func New(domains []string) *Suggester {
	s := &Suggester{known: make(map[string]bool, len(domains))}
	for _, d := range domains {
		d = norm(d)
		if d == "" || s.known[d] {
			continue
		}
		s.known[d] = true
		s.targets = append(s.targets, newTarget(d))
	}
	return s
}

// norm is a domain as targets are kept: lower case, no final dot.
func norm(domain string) string { return strings.TrimSuffix(strings.ToLower(domain), ".") }

func newTarget(d string) target {
	sld, _, _ := strings.Cut(d, ".")
	return target{domain: d, sld: sld}
}

// Known reports whether domain is one of the targets: it is never
// corrected (googlemail.com is not a slip of gmail.com).
func (s *Suggester) Known(domain string) bool {
	return s.known[norm(domain)]
}

// Suggest returns the target domain fewest slips from domain (one in its
// first label, one in the rest, or both), and the slips. It returns
// false for a target itself, for a domain no target is a slip of, and
// for one two targets are as near. extra are more targets (an account's
// own domains), never corrected themselves.
func (s *Suggester) Suggest(domain string, extra ...string) (Suggestion, bool) {
	d := norm(domain)
	if d == "" || s.known[d] || !strings.Contains(d, ".") {
		return Suggestion{}, false
	}
	// The target fewest slips away; two as near: no suggestion.
	var best Suggestion
	bestSlips, tie := 3, false
	consider := func(t target) {
		k, tld, ok := slip(d, t)
		if !ok {
			return
		}
		n := 0
		if k != "" {
			n++
		}
		if tld {
			n++
		}
		// A short name (three letters or fewer: aol, qq) is never
		// corrected in its name, where a one-letter change as likely
		// makes another domain; but it makes a target as near ambiguous
		// (ail.com: mail.com or aol.com).
		short := k != "" && len(t.sld) <= 3
		switch {
		case n < bestSlips:
			best, bestSlips, tie = Suggestion{Domain: t.domain, Kind: k, TLD: tld}, n, short
		case n == bestSlips:
			tie = true
		}
	}
	for _, t := range s.targets {
		consider(t)
	}
	for _, e := range extra {
		switch e = norm(e); {
		case e == d:
			return Suggestion{}, false // one of the caller's own
		case !s.known[e] && strings.Contains(e, "."):
			consider(newTarget(e))
		}
	}
	if bestSlips == 3 || tie {
		return Suggestion{}, false
	}
	return best, true
}

// slip says whether typed is a slip of t: at most one slip in the first
// label (the name) and at most one in the rest (the top-level part:
// hotmial.co is hotmail.com, a slip in each), and which.
func slip(typed string, t target) (name Kind, tld, ok bool) {
	tn, tr, _ := strings.Cut(typed, ".")
	wr := t.domain[len(t.sld)+1:]
	if tn != t.sld {
		if name, ok = edit(tn, t.sld); !ok {
			return "", false, false
		}
	}
	if tr != wr {
		if _, ok = edit(tr, wr); !ok {
			return "", false, false
		}
		tld = true
	}
	return name, tld, name != "" || tld
}

// edit says whether typed is one slip of want, and which: the two differ
// in one place, found by their common prefix and suffix. A dot is never
// part of a slip (it would change the domain's shape, not a letter).
func edit(typed, want string) (Kind, bool) {
	p := 0
	for p < len(typed) && p < len(want) && typed[p] == want[p] {
		p++
	}
	q := 0
	for q < len(typed)-p && q < len(want)-p && typed[len(typed)-1-q] == want[len(want)-1-q] {
		q++
	}
	a, b := typed[p:len(typed)-q], want[p:len(want)-q] // what was typed, what was meant
	if strings.ContainsRune(a, '.') || strings.ContainsRune(b, '.') {
		return "", false
	}
	switch {
	case len(a) == 0 && len(b) == 1:
		return Deletion, true
	case len(a) == 1 && len(b) == 0:
		// A letter typed twice: the one beside it is the same; or a key
		// hit with the one beside it: they touch on the keyboard.
		before, after := byte(0), byte(0)
		if p > 0 {
			before = typed[p-1]
		}
		if p+1 < len(typed) {
			after = typed[p+1]
		}
		switch {
		case before == a[0] || after == a[0]:
			return Doubling, true
		case adjacent(a[0], before) || adjacent(a[0], after):
			return ExtraKey, true
		}
	case len(a) == 2 && len(b) == 2 && a[0] == b[1] && a[1] == b[0]:
		return Transposition, true
	case len(a) == 1 && len(b) == 1 && adjacent(a[0], b[0]):
		return Adjacent, true
	}
	return "", false
}

// rows is the QWERTY keyboard, for adjacent keys.
var rows = [...]string{"1234567890-", "qwertyuiop", "asdfghjkl", "zxcvbnm"}

// keyPos is each key's row and column. The rows are staggered, each
// about half a key right of the one above: a key touches the keys beside
// it, columns c-1 and c of the row below and c and c+1 of the row above
// (s: a, d; z, x; w, e).
var keyPos = func() map[byte][2]int {
	m := map[byte][2]int{}
	for r, row := range rows {
		for c := 0; c < len(row); c++ {
			m[row[c]] = [2]int{r, c}
		}
	}
	return m
}()

// adjacent reports whether keys x and y touch on a QWERTY keyboard.
func adjacent(x, y byte) bool {
	px, okx := keyPos[x]
	py, oky := keyPos[y]
	if !okx || !oky || x == y {
		return false
	}
	dr, dc := py[0]-px[0], py[1]-px[1]
	switch dr {
	case 0:
		return dc == 1 || dc == -1
	case 1: // y on the row below x: the row below is shifted right by half a key
		return dc == 0 || dc == -1
	case -1:
		return dc == 0 || dc == 1
	}
	return false
}
