package world

import (
	"slices"
	"strings"
	"testing"
)

// TestSlips: each kind makes what its name says, by examples worked by
// hand, and never touches a dot.
func TestSlips(t *testing.T) {
	for _, c := range []struct {
		domain, kind string
		has, hasNot  []string
	}{
		{"gmail.com", SlipDeletion, []string{"mail.com", "gail.com", "gmil.com", "gmal.com", "gmai.com"}, []string{"gmailcom"}},
		{"gmail.com", SlipDoubling, []string{"ggmail.com", "gmaill.com"}, []string{"gmail.comm"}},
		{"gmail.com", SlipTransposition, []string{"mgail.com", "gamil.com", "gmial.com", "gmali.com"}, []string{"gmai.lcom"}},
		// m touches n and j, k (the row above is shifted left of it).
		{"gmail.com", SlipAdjacent, []string{"gnail.com", "gjail.com", "gkail.com", "gmsil.com", "gmaul.com"}, []string{"gmail.con", "gbail.com"}},
		{"gmail.com", SlipTLD, []string{"gmail.co", "gmail.cmo", "gmail.con", "gmail.comm", "gmail.xom"}, []string{"gmail.com", "gmailcom"}},
		{"shop.co.uk", SlipTLD, []string{"shop.co.ul", "shop.c.uk", "shop.oc.uk"}, []string{"shop.couk", "shop.co..uk"}},
	} {
		got := slips(c.domain, c.kind)
		for _, h := range c.has {
			if !slices.Contains(got, h) {
				t.Errorf("slips(%s, %s) lacks %s", c.domain, c.kind, h)
			}
		}
		for _, h := range c.hasNot {
			if slices.Contains(got, h) {
				t.Errorf("slips(%s, %s) has %s", c.domain, c.kind, h)
			}
		}
	}
}

// TestTypoWorld: the typos profile's world validates; every slip whose
// domain takes no mail has its meant address at a real domain with that
// address's own local part, and no other has one; the real domains' one
// address exists; the published corpus is all there.
func TestTypoWorld(t *testing.T) {
	w, exp, err := Generate(GenOptions{Profile: ProfileTypos, Domains: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	real := map[string]bool{}
	groups := map[string]int{}
	for _, e := range exp {
		g, _, _ := strings.Cut(e.Group, " · ")
		groups[g]++
		if g == TypoGroupMeant || g == TypoGroupReal {
			real[e.Email[strings.IndexByte(e.Email, '@')+1:]] = true
			if e.Status != StatusValid || e.Meant != "" {
				t.Errorf("%s (%s): %s, meant %q; want valid, none", e.Email, e.Group, e.Status, e.Meant)
			}
		}
	}
	n := 0
	for _, e := range exp {
		g, rest, _ := strings.Cut(e.Group, " · ")
		if g == TypoGroupMeant || g == TypoGroupReal {
			continue
		}
		n++
		local, typed, _ := strings.Cut(e.Email, "@")
		fate, _, _ := strings.Cut(rest, " · ")
		d := w.Domain(typed)
		switch fate {
		case TypoNXDomain, TypoParked:
			if e.Meant == "" || !strings.HasPrefix(e.Meant, local+"@") || !real[e.Meant[len(local)+1:]] {
				t.Errorf("%s (%s): meant %q", e.Email, e.Group, e.Meant)
			}
			if fate == TypoNXDomain && !d.NXDomain || fate == TypoParked && (len(d.MX) != 1 || d.MX[0].Host != ".") {
				t.Errorf("%s (%s): domain %+v", e.Email, e.Group, d)
			}
		case TypoTakesMail, TypoRealOther:
			if e.Meant != "" {
				t.Errorf("%s (%s): meant %q, want none (its domain takes mail)", e.Email, e.Group, e.Meant)
			}
			if d == nil || d.NXDomain || len(d.MX) == 0 || d.MX[0].Host == "." {
				t.Errorf("%s (%s): domain %+v takes no mail", e.Email, e.Group, d)
			}
		default:
			t.Errorf("%s: group %q", e.Email, e.Group)
		}
	}
	corpus := 0
	for _, c := range TypoCorpus() {
		if c.Meant != "" {
			corpus++
		}
	}
	if groups["typo-traps"]+groups["email_typo"]+groups["mailcheck"] != corpus {
		t.Errorf("published slips %v, want %d", groups, corpus)
	}
	if groups["generated deletion"] < 50 || groups["generated tld"] < 50 {
		t.Errorf("generated slips %v", groups)
	}
	t.Logf("%d slips, groups %v", n, groups)
}
