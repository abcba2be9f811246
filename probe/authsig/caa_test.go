package authsig

import (
	"errors"
	"reflect"
	"testing"
)

func TestCAANames(t *testing.T) {
	tests := []struct {
		domain string
		want   []string
	}{
		{"example.com", []string{"example.com"}},
		{"Mail.Example.COM.", []string{"mail.example.com", "example.com"}},
		{"a.b.c.example.com", []string{"a.b.c.example.com", "b.c.example.com", "c.example.com", "example.com"}},
		// Stops above the registrable name: co.uk is an ICANN suffix.
		{"www.example.co.uk", []string{"www.example.co.uk", "example.co.uk"}},
		// A private suffix (a hosting platform) is climbed past: its operator
		// controls certificates for its customers' names.
		{"app.example.blogspot.com", []string{"app.example.blogspot.com", "example.blogspot.com", "blogspot.com"}},
		// Unknown TLDs (the simulated world): everything but the TLD.
		{"mx1.alpha.test", []string{"mx1.alpha.test", "alpha.test"}},
		{"com", []string{"com"}},
		{"co.uk", []string{"co.uk"}},
		{"bücher.de", []string{"xn--bcher-kva.de"}},
	}
	for _, tt := range tests {
		if got := CAANames(tt.domain); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("CAANames(%q) = %q, want %q", tt.domain, got, tt.want)
		}
	}
}

func TestHasCAA(t *testing.T) {
	fail := errors.New("timeout")
	tests := []struct {
		name    string
		lookups []CAALookup
		want    bool
		wantErr bool
	}{
		{"no names", nil, false, false},
		{"none anywhere", []CAALookup{{Name: "a.example.com"}, {Name: "example.com"}}, false, false},
		{"on the domain", []CAALookup{{Name: "a.example.com", Found: true}, {Name: "example.com"}}, true, false},
		{"on a parent", []CAALookup{{Name: "a.example.com"}, {Name: "example.com", Found: true}}, true, false},
		{"found despite a failure", []CAALookup{{Name: "a.example.com", Err: fail}, {Name: "example.com", Found: true}}, true, false},
		{"failure and none found: unknown", []CAALookup{{Name: "a.example.com"}, {Name: "example.com", Err: fail}}, false, true},
	}
	for _, tt := range tests {
		got, err := HasCAA(tt.lookups)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: HasCAA = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
		if tt.wantErr && !errors.Is(err, fail) {
			t.Errorf("%s: error %v does not wrap the lookup's", tt.name, err)
		}
	}
}

func FuzzCAANames(f *testing.F) {
	f.Add("a.b.example.co.uk")
	f.Add("..")
	f.Fuzz(func(t *testing.T, domain string) {
		names := CAANames(domain)
		if len(names) == 0 || names[0] != normalizeDomain(domain) {
			t.Fatalf("CAANames(%q) = %q", domain, names)
		}
		for i := 1; i < len(names); i++ {
			if len(names[i]) >= len(names[i-1]) || names[i-1][len(names[i-1])-len(names[i])-1:] != "."+names[i] {
				t.Fatalf("CAANames(%q) = %q: %q is not a parent of %q", domain, names, names[i], names[i-1])
			}
		}
	})
}
