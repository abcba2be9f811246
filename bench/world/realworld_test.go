package world

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestRealWorldProfile(t *testing.T) {
	o := GenOptions{Profile: ProfileRealWorld, Domains: 1000, Seed: 3}
	w, exp, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 10000 {
		t.Errorf("%d addresses, want 10,000 (domains × addresses per domain)", len(exp))
	}
	// Every provider is played by some host, and each self-hosted
	// behaviour is met at least once.
	played := map[string]bool{}
	for _, h := range w.Hosts {
		played[h.Provider] = true
	}
	for p := range Providers {
		// SpamExperts has no published share: no host plays it.
		if !played[p] && p != "spamexperts" {
			t.Errorf("no host plays %s", p)
		}
	}
	groups := map[string]int{}
	consumer := map[string]int{}
	for _, e := range exp {
		if e.Group == "" || e.Status == "" {
			t.Fatalf("%s: no group or status: %+v", e.Email, e)
		}
		groups[strings.SplitN(e.Group, " · ", 2)[0]]++
		if d := e.Email[strings.LastIndexByte(e.Email, '@')+1:]; !strings.HasSuffix(d, ".test") {
			consumer[d]++
		}
	}
	for _, s := range selfHosted {
		if groups["self-hosted "+s.name] == 0 {
			t.Errorf("no self-hosted domain shows %q", s.name)
		}
	}
	// Half the addresses at consumer providers, gmail.com at its share.
	total := 0
	for _, n := range consumer {
		total += n
	}
	if total != 5000 {
		t.Errorf("%d consumer addresses, want 5,000", total)
	}
	if got := float64(consumer["gmail.com"]) / float64(total); math.Abs(got-0.501) > 0.005 {
		t.Errorf("gmail.com has %.3f of the consumer addresses, want 0.501", got)
	}
	// Yahoo's addresses are all risky/catch_all but for refused mailboxes.
	for _, e := range exp {
		if strings.HasSuffix(e.Email, "@yahoo.com") && e.Status == StatusValid {
			t.Errorf("%s expected valid at Yahoo", e.Email)
		}
	}
	// The same seed gives the same world.
	w2, exp2, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exp, exp2) || len(w.Hosts) != len(w2.Hosts) {
		t.Error("the same options gave another world")
	}
}
