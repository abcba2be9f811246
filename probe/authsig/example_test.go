package authsig_test

import (
	"fmt"

	"github.com/verifyd/verifyd/probe/authsig"
)

// zone is a stand-in for the caching resolver: TXT records by name.
var zone = map[string][]string{
	"example.com":           {"google-site-verification=abc", "v=spf1 mx redirect=_spf.example.com"},
	"_spf.example.com":      {"v=spf1 ip4:192.0.2.0/24 include:_spf.mail.example.net ~all"},
	"_spf.mail.example.net": {"v=spf1 ip4:198.51.100.0/24 -all"},
	"_dmarc.example.com":    {"v=DMARC1; p=reject; sp=quarantine; aspf=s; rua=mailto:dmarc@example.com"},
}

func lookup(name string) ([]string, error) { return zone[name], nil }

func ExampleSPF() {
	res := authsig.SPF([]string{"v=spf1 mx redirect=_spf.example.com"})
	fmt.Println(res.Posture, res.Redirect, res.Lookups)
	// Output: redirect _spf.example.com 2
}

func ExampleFollowSPF() {
	res, err := authsig.FollowSPF("example.com", lookup)
	if err != nil {
		fmt.Println("omit the spf key:", err)
		return
	}
	fmt.Println(res.Posture, res.Lookups)
	// Output: softfail 3
}

func ExampleDiscoverDMARC() {
	res, err := authsig.DiscoverDMARC("mail.example.com", lookup)
	if err != nil {
		fmt.Println("omit the dmarc keys:", err)
		return
	}
	r := res.Record
	fmt.Println(res.Status, res.Domain, r.Policy, r.SubdomainPolicy, r.ASPF, r.ADKIM, r.RUASet())
	fmt.Println("applied to mail.example.com:", res.EffectivePolicy("mail.example.com"))
	// Output:
	// found example.com reject quarantine s r true
	// applied to mail.example.com: quarantine
}

func ExampleTrust() {
	keys := authsig.TrustKeys{"acme-2025.1": 3} // issued by the operator
	res := authsig.Trust([]string{"v=SVC1; k=acme-2025.1; l=5"}, keys)
	fmt.Println(res.Certified, res.Level, res.KeyID)
	// Output: true 3 acme-2025.1
}
