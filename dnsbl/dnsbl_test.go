package dnsbl

import (
	"errors"
	"net/netip"
	"testing"
)

func TestReverseIP(t *testing.T) {
	tests := []struct {
		ip, v4, v6 string
	}{
		{"192.0.2.99", "99.2.0.192", ""},
		{"::ffff:192.0.2.99", "99.2.0.192", ""},
		{"2001:db8:1:2:3:4:567:89ab", "", "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2"},
	}
	for _, tt := range tests {
		ip := netip.MustParseAddr(tt.ip)
		if got := ReverseIPv4(ip); got != tt.v4 {
			t.Errorf("ReverseIPv4(%s) = %q, want %q", ip, got, tt.v4)
		}
		if got := ReverseIPv6(ip); got != tt.v6 {
			t.Errorf("ReverseIPv6(%s) = %q, want %q", ip, got, tt.v6)
		}
	}
	if ReverseIPv4(netip.Addr{}) != "" || ReverseIPv6(netip.Addr{}) != "" {
		t.Error("zero Addr reversed")
	}
}

func TestName(t *testing.T) {
	got, err := Name(netip.MustParseAddr("192.0.2.99"), "zen.spamhaus.org")
	if err != nil || got != "99.2.0.192.zen.spamhaus.org" {
		t.Errorf("Name = %q, %v", got, err)
	}
	got, err = Name(netip.MustParseAddr("::ffff:192.0.2.99"), "zen.spamhaus.org")
	if err != nil || got != "99.2.0.192.zen.spamhaus.org" {
		t.Errorf("Name(4in6) = %q, %v", got, err)
	}
	got, err = Name(netip.MustParseAddr("2001:db8::1"), "bl.example")
	if err != nil || got != "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.bl.example" {
		t.Errorf("Name(v6) = %q, %v", got, err)
	}
	if _, err := Name(netip.Addr{}, "bl.example"); err == nil {
		t.Error("Name(zero Addr) succeeded")
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		answers []netip.Addr
		listed  bool
		wantErr bool
	}{
		{"NXDOMAIN", nil, false, false},
		{"generic listing", addrs("127.0.0.2"), true, false},
		{"Spamhaus PBL", addrs("127.0.0.10", "127.0.0.11"), true, false},
		{"highest listing code", addrs("127.255.255.251"), true, false},
		{"4in6 listing", addrs("::ffff:127.0.0.4"), true, false},
		{"test point", addrs("127.0.0.1"), false, true},
		{"network address", addrs("127.0.0.0"), false, true},
		{"Spamhaus typo in zone", addrs("127.255.255.252"), false, true},
		{"reserved 253", addrs("127.255.255.253"), false, true},
		{"Spamhaus public resolver", addrs("127.255.255.254"), false, true},
		{"Spamhaus excessive queries", addrs("127.255.255.255"), false, true},
		{"error wins over a listing", addrs("127.0.0.2", "127.255.255.254"), false, true},
		{"wildcarding resolver", addrs("198.51.100.7"), false, true},
		{"private address", addrs("10.0.0.2"), false, true},
		{"IPv6 answer", addrs("2001:db8::2"), false, true},
	}
	for _, tt := range tests {
		listed, err := Classify(tt.answers)
		if listed != tt.listed || (err != nil) != tt.wantErr {
			t.Errorf("%s: Classify(%v) = %v, %v; want %v, error %v", tt.name, tt.answers, listed, err, tt.listed, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrAnswer) {
			t.Errorf("%s: error %v is not ErrAnswer", tt.name, err)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte{127, 0, 0, 2})
	f.Add([]byte{127, 255, 255, 254, 127, 0, 0, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var as []netip.Addr
		for i := 0; i+4 <= len(b); i += 4 {
			as = append(as, netip.AddrFrom4([4]byte(b[i:i+4])))
		}
		listed, err := Classify(as)
		if listed && err != nil {
			t.Fatalf("listed with an error")
		}
		if listed != (len(as) > 0 && err == nil) {
			t.Fatalf("Classify(%v) = %v, %v", as, listed, err)
		}
		lo, hi := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.255.255.251")
		for _, a := range as {
			if in := a.Compare(lo) >= 0 && a.Compare(hi) <= 0; !in && err == nil {
				t.Fatalf("Classify accepted %v", a)
			}
		}
	})
}
