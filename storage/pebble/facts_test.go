package pebble

import (
	"maps"
	"testing"
	"time"
)

// TestFacts: a fact is read back until it expires, survives a restart,
// and FactsOfKind lists the live facts of one kind only.
func TestFacts(t *testing.T) {
	db := openTest(t)
	now := db.clock.Now()
	for _, f := range []struct{ kind, key, value string }{
		{"bounces", "shop.example", "b=2 d=1"},
		{"bounces", "gone.example", "b=5 d=0"},
		{"catchall", "shop.example", "no"},
	} {
		exp := now.Add(time.Hour)
		if f.key == "gone.example" {
			exp = now.Add(time.Minute)
		}
		if err := db.PutFact(f.kind, f.key, f.value, exp); err != nil {
			t.Fatal(err)
		}
	}
	if v, exp, ok, err := db.Fact("bounces", "shop.example"); err != nil || !ok || v != "b=2 d=1" || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("Fact: %q %v %v %v", v, exp, ok, err)
	}
	if _, _, ok, err := db.Fact("bounces", "nowhere.example"); err != nil || ok {
		t.Fatalf("an absent fact: %v %v", ok, err)
	}
	db.reopen(t)
	m, err := db.FactsOfKind("bounces")
	if err != nil || !maps.Equal(m, map[string]string{"shop.example": "b=2 d=1", "gone.example": "b=5 d=0"}) {
		t.Fatalf("FactsOfKind after a restart: %v %v", m, err)
	}
	db.clock.Advance(2 * time.Minute)
	if _, _, ok, _ := db.Fact("bounces", "gone.example"); ok {
		t.Error("an expired fact is still read")
	}
	if m, _ := db.FactsOfKind("bounces"); len(m) != 1 || m["shop.example"] == "" {
		t.Errorf("FactsOfKind after an expiry: %v", m)
	}
}
