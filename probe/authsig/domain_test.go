package authsig

import "testing"

func TestOrgDomain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"a.b.example.com", "example.com"},
		{"Mail.Example.COM.", "example.com"},
		{"a.b.example.co.uk", "example.co.uk"},
		{"example.co.uk", "example.co.uk"},
		{"foo.example.blogspot.com", "example.blogspot.com"}, // private section of the list
		{"mx1.alpha.test", "alpha.test"},                     // unknown TLD: default rule
		{"com", "com"},
		{"co.uk", "co.uk"},
		{"bücher.de", "xn--bcher-kva.de"},
		{"www.xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"", ""},
		{"a..example.com", "a..example.com"},
	}
	for _, tt := range tests {
		if got := OrgDomain(tt.in); got != tt.want {
			t.Errorf("OrgDomain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		DMARCName("Example.com."):  "_dmarc.example.com",
		MTASTSName("example.com"):  "_mta-sts.example.com",
		TLSRPTName("example.com"):  "_smtp._tls.example.com",
		TrustName("example.com"):   "_svc-trust.example.com",
		DKIMName("s1", "b.test."):  "s1._domainkey.b.test",
		BIMIName("default", "b.c"): "default._bimi.b.c",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestValidHostname(t *testing.T) {
	for in, want := range map[string]bool{
		"example.com": true, "a-b.example.com": true, "x1.example.c0m": true,
		"example": false, "-a.example.com": false, "a-.example.com": false, "a_b.example.com": false,
		"192.0.2.1": false, "a..b.com": false, "": false,
	} {
		if got := validHostname(in); got != want {
			t.Errorf("validHostname(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzOrgDomain(f *testing.F) {
	f.Add("a.b.example.co.uk")
	f.Fuzz(func(t *testing.T, d string) {
		org := OrgDomain(d)
		n := normalizeDomain(d)
		if len(org) > len(n) || (org != n && n[len(n)-len(org)-1:] != "."+org) {
			t.Fatalf("OrgDomain(%q) = %q, not a suffix of %q", d, org, n)
		}
	})
}
