package world

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

// ProfileTypos is a world for measuring did-you-mean suggestions: the
// domains people mean (the large providers, and businesses a customer's
// list holds), each with one address that exists, and addresses at
// domains people type by mistake, each labelled with the address meant
// (Expectation.Meant). The mistakes come from two places:
//
//   - the published corpus (typos.txt): what people typed, from Word to
//     the Wise's typo traps, the tests of the email_typo gem and of
//     mailcheck, with the domains those sources say are real (they take
//     mail here);
//   - generated slips of every meant domain: a letter left out, a letter
//     doubled, two neighbours swapped, a key beside the right one on a
//     QWERTY keyboard, each in the name, and one of those in the
//     top-level part (the keyboard is this package's own table).
//
// A typed domain that is also a real domain of the world takes mail:
// whatever its verdict, no suggestion is right for it. The others do not
// exist (most), are parked with a null MX (RFC 7505), or were registered
// to catch mistyped mail and take it (a catch-all): for the last no
// suggestion is right either, since their mail is delivered (to someone
// else). GenOptions.Domains is the number of businesses (default 200);
// the behaviour fractions are not used.
const ProfileTypos = "typos"

// Groups of ProfileTypos' expectations (Expectation.Group, before the
// mailbox label Generate adds): the domains meant, the real domains of
// the sources, and the slips: "generated <kind>" or the source's name,
// then the typed domain's fate.
const (
	TypoGroupMeant = "meant"
	TypoGroupReal  = "real"
	// The typed domain's fates.
	TypoNXDomain  = "nxdomain"
	TypoParked    = "parked"
	TypoTakesMail = "takes mail"
	TypoRealOther = "another real domain"
)

// The generated slips' kinds (Expectation.Group "generated <kind>").
const (
	SlipDeletion      = "deletion"
	SlipDoubling      = "doubling"
	SlipTransposition = "transposition"
	SlipAdjacent      = "adjacent key"
	SlipTLD           = "tld"
)

//go:embed typos.txt
var typoCorpus string

// TypoEntry is one line of the published corpus: Typed meant Meant, or,
// with Meant empty, Typed is a real domain the source says is left
// alone.
type TypoEntry struct {
	Source, Typed, Meant string
}

// TypoCorpus returns the published corpus, in its order.
func TypoCorpus() []TypoEntry {
	var out []TypoEntry
	src := ""
	for _, l := range strings.Split(typoCorpus, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "@ "):
			src = strings.TrimPrefix(l, "@ ")
		case strings.HasPrefix(l, "= "):
			out = append(out, TypoEntry{Source: src, Typed: strings.TrimPrefix(l, "= ")})
		default:
			typed, meant, _ := strings.Cut(l, " ")
			out = append(out, TypoEntry{Source: src, Typed: typed, Meant: meant})
		}
	}
	return out
}

// typoProviders are the consumer mailbox domains of the world, beside
// the corpus' own.
var typoProviders = []string{
	"gmail.com", "googlemail.com", "yahoo.com", "ymail.com", "aol.com", "hotmail.com", "outlook.com",
	"live.com", "msn.com", "icloud.com", "me.com", "comcast.net", "verizon.net", "att.net", "gmx.net",
	"gmx.de", "web.de", "yandex.ru", "mail.ru", "proton.me", "fastmail.com", "zoho.com", "qq.com",
	"163.com", "orange.fr", "free.fr", "libero.it", "t-online.de", "rediffmail.com", "sbcglobal.net",
}

// Business names: a first part and a second, in one of the TLDs.
var (
	typoFirst  = []string{"north", "blue", "silver", "red", "green", "bright", "clear", "swift", "iron", "oak", "cedar", "maple", "river", "stone", "sun", "star", "summit", "pacific", "atlas", "harbor", "granite", "copper", "falcon", "willow"}
	typoSecond = []string{"wind", "peak", "field", "bridge", "works", "labs", "point", "gate", "line", "path", "craft", "forge", "logic", "media", "systems", "trade", "ware", "vale", "wood", "ridge", "bay", "stack", "metrics", "supply"}
	typoTLDs   = []string{"com", "com", "com", "com", "net", "org", "io", "co", "de", "co.uk"}
)

// typoKeyboard is the QWERTY keyboard, each row half a key right of the
// one above; typoNeighbours (built from it) is what keys touch each.
var typoKeyboard = [...]string{"1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"}

var typoNeighbours = func() map[byte]string {
	at := map[byte][2]int{}
	for r, row := range typoKeyboard {
		for c := range len(row) {
			at[row[c]] = [2]int{r, c}
		}
	}
	out := map[byte]string{}
	for k, p := range at {
		var n []byte
		for k2, q := range at {
			dr, dc := q[0]-p[0], q[1]-p[1]
			// Same row: beside. Row below: the keys below-left and below
			// (it is shifted right); row above: above and above-right.
			if (dr == 0 && (dc == 1 || dc == -1)) || (dr == 1 && (dc == 0 || dc == -1)) || (dr == -1 && (dc == 0 || dc == 1)) {
				n = append(n, k2)
			}
		}
		slices.Sort(n)
		out[k] = string(n)
	}
	return out
}()

// slips returns every domain one slip of kind from domain: in its first
// label for the name kinds, in the rest for SlipTLD. No dot is removed
// or typed.
func slips(domain, kind string) []string {
	name, rest, _ := strings.Cut(domain, ".")
	part, rebuild := name, func(s string) string { return s + "." + rest }
	if kind == SlipTLD {
		part, rebuild = rest, func(s string) string { return name + "." + s }
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != part && s != "" && !strings.HasPrefix(s, ".") && !strings.HasSuffix(s, ".") &&
			!strings.Contains(s, "..") && strings.Count(s, ".") == strings.Count(part, ".") && !seen[s] {
			seen[s] = true
			out = append(out, rebuild(s))
		}
	}
	for i := range len(part) {
		c := part[i]
		switch kind {
		case SlipDeletion, SlipTLD:
			if c != '.' {
				add(part[:i] + part[i+1:])
			}
		}
		switch kind {
		case SlipDoubling, SlipTLD:
			if c != '.' && c != '-' {
				add(part[:i+1] + part[i:])
			}
		}
		switch kind {
		case SlipTransposition, SlipTLD:
			if i+1 < len(part) && part[i+1] != c && c != '.' && part[i+1] != '.' {
				add(part[:i] + string(part[i+1]) + string(c) + part[i+2:])
			}
		}
		switch kind {
		case SlipAdjacent, SlipTLD:
			for _, k := range []byte(typoNeighbours[c]) {
				add(part[:i] + string(k) + part[i+1:])
			}
		}
	}
	return out
}

// generateTypos is Generate for ProfileTypos.
func generateTypos(g *generator) (*World, []Expectation, error) {
	// Every mailbox made is as it should be: the one address of a real
	// domain is valid, and the account learns its domain from it.
	g.o.MailboxFull, g.o.MailboxDisabled, g.o.MailboxOverQuota = 0, 0, 0
	o := g.o
	rng := g.rng
	corpus := TypoCorpus()
	// The real domains: providers, the corpus' meant and left-alone
	// domains, and the businesses; isMeant says whether slips of one are
	// made (every real domain has a key).
	isMeant := map[string]bool{}
	var order []string
	addReal := func(d string, m bool) {
		if _, ok := isMeant[d]; !ok {
			order = append(order, d)
		}
		isMeant[d] = isMeant[d] || m
	}
	for _, d := range typoProviders {
		addReal(d, true)
	}
	for _, e := range corpus {
		if e.Meant == "" {
			addReal(e.Typed, false)
		} else {
			addReal(e.Meant, true)
		}
	}
	countMeant := func() (n int) {
		for _, m := range isMeant {
			if m {
				n++
			}
		}
		return n
	}
	for n, tries := countMeant(), 0; n < len(typoProviders)+o.Domains && tries < 100*o.Domains; tries++ {
		d := typoFirst[rng.IntN(len(typoFirst))] + typoSecond[rng.IntN(len(typoSecond))] + "." + typoTLDs[rng.IntN(len(typoTLDs))]
		if _, ok := isMeant[d]; !ok {
			addReal(d, true)
			n++
		}
	}
	// The meant domains first, then the others, each in the order first
	// seen.
	var meant, others []string
	for _, d := range order {
		if isMeant[d] {
			meant = append(meant, d)
		} else {
			others = append(others, d)
		}
	}
	// Each real domain: a host of its own that takes mail for its known
	// mailboxes; one address that exists.
	byName := map[string]*Domain{}
	newDomain := func(name string) *Domain {
		d := &Domain{Name: name, Policy: PolicyAccept, Mailboxes: map[string]MailboxState{}}
		g.w.Domains = append(g.w.Domains, d)
		byName[name] = d
		return d
	}
	for _, name := range append(slices.Clone(meant), others...) {
		d := newDomain(name)
		h := g.newHost("mx." + name)
		d.MX = []MX{{Pref: 10, Host: h.Name}}
		group := TypoGroupReal
		if isMeant[name] {
			group = TypoGroupMeant
		}
		g.addresses(d, 1, 1, false, group)
	}
	// The slips: the corpus', then one of each kind for each meant domain.
	type slip struct{ typed, meant, group string }
	var all []slip
	for _, e := range corpus {
		if e.Meant != "" && e.Typed != e.Meant {
			all = append(all, slip{e.Typed, e.Meant, e.Source})
		}
	}
	for _, m := range meant {
		for _, k := range []string{SlipDeletion, SlipDoubling, SlipTransposition, SlipAdjacent, SlipTLD} {
			if c := slips(m, k); len(c) > 0 {
				all = append(all, slip{c[rng.IntN(len(c))], m, "generated " + k})
			}
		}
	}
	// A typed domain's fate, drawn once per domain.
	fates := map[string]string{}
	catcher := g.newHost("mx.typo-catcher.test")
	for _, s := range all {
		fate, ok := fates[s.typed]
		if !ok {
			_, real := isMeant[s.typed]
			switch r := rng.Float64(); {
			case real:
				fate = TypoRealOther
			case r < 0.85:
				fate = TypoNXDomain
				newDomain(s.typed).NXDomain = true
			case r < 0.95:
				fate = TypoParked
				newDomain(s.typed).MX = []MX{{Pref: 0, Host: "."}}
			default:
				fate = TypoTakesMail
				d := newDomain(s.typed)
				d.MX, d.Policy = []MX{{Pref: 10, Host: catcher.Name}}, PolicyCatchAll
			}
			fates[s.typed] = fate
		}
		// An address of its own: a person's name and a number.
		d := byName[s.typed]
		seen := g.seenOf(d)
		local := ""
		for local == "" || seen[local] {
			local = fmt.Sprintf("%s%d", firstNames[rng.IntN(len(firstNames))], rng.IntN(100_000))
		}
		seen[local] = true
		if fate == TypoRealOther {
			d.Mailboxes[local] = MailboxOK // someone real has it
		}
		e := Expectation{Email: local + "@" + s.typed, Group: s.group + " · " + fate}
		if fate == TypoNXDomain || fate == TypoParked {
			e.Meant = local + "@" + s.meant
		}
		g.exp = append(g.exp, e)
	}
	return g.finish()
}
