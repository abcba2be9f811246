package authsig

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/verifyd/verifyd/dnsbl"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestClassifyDNSWL(t *testing.T) {
	tests := []struct {
		name    string
		answers []netip.Addr
		listed  bool
		wantErr bool
	}{
		{"not listed", nil, false, false},
		{"trust none", addrs("127.0.10.0"), true, false},
		{"trust high", addrs("127.0.3.3"), true, false},
		{"blocked", addrs("127.0.0.255"), false, true},
		{"blocked, alternative code", addrs("127.0.255.255"), false, true},
		{"test point", addrs("127.0.0.1"), false, true},
		{"wildcarding resolver", addrs("203.0.113.5"), false, true},
	}
	for _, tt := range tests {
		listed, err := ClassifyDNSWL(tt.answers)
		if listed != tt.listed || (err != nil) != tt.wantErr {
			t.Errorf("%s: ClassifyDNSWL(%v) = %v, %v; want %v, error %v", tt.name, tt.answers, listed, err, tt.listed, tt.wantErr)
		}
		if err != nil && !errors.Is(err, dnsbl.ErrAnswer) {
			t.Errorf("%s: error %v is not dnsbl.ErrAnswer", tt.name, err)
		}
	}
}

func TestSummarizeDNSBL(t *testing.T) {
	fail := errors.New("timeout")
	tests := []struct {
		name     string
		results  []DNSBLResult
		clean    bool
		listedOn []string
		known    bool
	}{
		{"no lists configured", nil, false, nil, false},
		{"clean", []DNSBLResult{{Zone: "a.example"}, {Zone: "b.example"}}, true, nil, true},
		{"listed on two, sorted", []DNSBLResult{{Zone: "z.example", Listed: true}, {Zone: "a.example"}, {Zone: "b.example", Listed: true}},
			false, []string{"b.example", "z.example"}, true},
		{"listed despite a failure", []DNSBLResult{{Zone: "a.example", Err: fail}, {Zone: "b.example", Listed: true}},
			false, []string{"b.example"}, true},
		{"a failure and no listing: unknown", []DNSBLResult{{Zone: "a.example"}, {Zone: "b.example", Err: fail}}, false, nil, false},
	}
	for _, tt := range tests {
		clean, on, known := SummarizeDNSBL(tt.results)
		if clean != tt.clean || !reflect.DeepEqual(on, tt.listedOn) || known != tt.known {
			t.Errorf("%s: SummarizeDNSBL = %v %q %v, want %v %q %v", tt.name, clean, on, known, tt.clean, tt.listedOn, tt.known)
		}
	}
}
