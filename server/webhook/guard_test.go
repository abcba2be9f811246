package webhook

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		reason string // "" public; else a word of the reason
		always bool
	}{
		{"93.184.215.14", "", false},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", "", false},
		{"127.0.0.1", "loopback", false},
		{"127.71.0.9", "loopback", false},
		{"::1", "loopback", false},
		{"::ffff:127.0.0.1", "loopback", false},
		{"10.0.0.1", "private", false},
		{"172.16.5.4", "private", false},
		{"172.32.0.1", "", false},
		{"192.168.1.1", "private", false},
		{"::ffff:192.168.1.1", "private", false},
		{"fd00::1", "unique local", false},
		{"169.254.169.254", "link-local", false},
		{"fe80::1", "link-local", false},
		{"100.64.0.1", "carrier-grade", false},
		{"100.127.255.254", "carrier-grade", false},
		{"100.128.0.1", "", false},
		{"0.1.2.3", "this network", false},
		{"192.0.0.8", "IETF", false},
		{"192.0.2.10", "documentation", false},
		{"198.18.0.1", "benchmarking", false},
		{"240.0.0.1", "reserved", false},
		{"64:ff9b::a00:1", "NAT64 of a private", false},
		{"64:ff9b::5db8:d70e", "", false},
		{"::ffff:0:7f00:1", "IPv4-translated (RFC 2765) of a loopback", false},
		{"::ffff:0:a00:1", "IPv4-translated (RFC 2765) of a private", false},
		{"::ffff:0:5db8:d70e", "IPv4-translated (RFC 2765)", false},
		{"::ffff:0:0:0", "IPv4-translated (RFC 2765) of a unspecified", true},
		{"2002:7f00:1::", "6to4 of a loopback", false},
		{"2001:db8::1", "documentation", false},
		{"2001:0:4136:e378::1", "Teredo", false},
		{"0.0.0.0", "unspecified", true},
		{"::", "unspecified", true},
		{"224.0.0.1", "multicast", true},
		{"ff02::1", "multicast", true},
		{"255.255.255.255", "broadcast", true},
	} {
		r, always := classify(netip.MustParseAddr(tc.ip))
		if (tc.reason == "") != (r == "") || !strings.Contains(r, tc.reason) || always != tc.always {
			t.Errorf("%s: %q always=%v, want %q always=%v", tc.ip, r, always, tc.reason, tc.always)
		}
		strict, open := &Guard{}, &Guard{AllowPrivate: true}
		if err := strict.Check("", netip.MustParseAddr(tc.ip)); (err == nil) != (tc.reason == "") || (err != nil && !errors.Is(err, ErrRefused)) {
			t.Errorf("%s: strict guard says %v", tc.ip, err)
		}
		if err := open.Check("", netip.MustParseAddr(tc.ip)); (err == nil) != !tc.always {
			t.Errorf("%s: allow_private guard says %v", tc.ip, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	g := &Guard{}
	for _, tc := range []struct {
		url, problem string
	}{
		{"https://hooks.example.com/verifyd?token=x", ""},
		{"http://hooks.example.com:8080/x", ""},
		{"https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/x", ""},
		{"https://93.184.215.14/x", ""},
		{"https://hooks.example.com./x", ""},
		{"https://1572395042/x", ""}, // 93.184.216.34, a public address in decimal
		// Every spelling a browser reads as an internal address is one
		// (the WHATWG host parser), refused at once, not left to delivery.
		{"https://localhost/x", "loopback"},
		{"https://LOCALHOST./x", "loopback"},
		{"https://api.localhost/x", "loopback"},
		{"http://2130706433/", "loopback"},
		{"http://0x7f.1/", "loopback"},
		{"http://127.1/", "loopback"},
		{"http://0177.0.0.1/", "loopback"},
		{"http://0x7F000001/", "loopback"},
		{"http://127.0.0.1./", "loopback"},
		{"http://%31%32%37.0.0.1/", "absolute"},                                        // Go refuses escapes in a host: 400 too
		{"http://\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11/", "loopback"}, // full-width digits and dots
		{"http://0xa9.0xfe.0xa9.0xfe/latest/meta-data/", "link-local"},
		{"http://012.0.0.1/", "private"}, // 10.0.0.1
		{"http://0x/", "unspecified"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:7f00:1]/", "loopback"},
		{"http://[::ffff:0:7f00:1]/", "IPv4-translated (RFC 2765) of a loopback"},
		// Hosts a browser refuses are refused.
		{"http://1.2.3.4.5/", "not a valid host"},
		{"http://256.1.1.1/", "not a valid host"},
		{"http://1.2.3.16777216/", "not a valid host"},
		{"http://08.1.1.1/", "not a valid host"},
		{"http://hooks.0x7g/", ""}, // does not end in a number: a name
		{"http://hooks.0x7f/", "not a valid host"},
		{"http://99999999999999999999999/", "not a valid host"},
		{"/relative/path", "absolute"},
		{"hooks.example.com/x", "absolute"},
		{"ftp://hooks.example.com/x", "http or https"},
		{"javascript:alert(1)", "absolute"},
		{"https://", "host"},
		{"https://hooks.example.com:0/x", "port"},
		{"https://hooks.example.com:99999/x", "port"},
		{"http://10.0.0.1/x", "private"},
		{"http://127.0.0.1:8080/x", "loopback"},
		{"http://[::1]/x", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://0.0.0.0/", "unspecified"},
		{"https://hooks.example.com/" + strings.Repeat("a", MaxURLLength), "at most"},
	} {
		_, err := g.CheckURL(tc.url)
		if (err == nil) != (tc.problem == "") || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("%q: %v, want %q", tc.url, err, tc.problem)
		}
	}
	if _, err := (&Guard{AllowPrivate: true}).CheckURL("http://127.0.0.1:8080/x"); err != nil {
		t.Errorf("allow_private: %v", err)
	}
}

// TestGuardDial: the dialer refuses names resolving to internal
// addresses, never connecting; with allow_private it connects.
func TestGuardDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res := fakeResolver{
		"inside.example":  {netip.MustParseAddr("127.0.0.1")},
		"mixed.example":   {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.1")},
		"mapped.example":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"nowhere.example": nil,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	strict := &Guard{Resolver: res}
	for _, host := range []string{"inside.example", "mixed.example", "mapped.example", "127.0.0.1", "::1"} {
		c, err := strict.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected through the guard", host)
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want a refusal", host, err)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial reached the listener")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := strict.DialContext(ctx, "tcp", "unknown.example:80"); err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("unresolvable: %v", err)
	}

	open := &Guard{Resolver: res, AllowPrivate: true}
	c, err := open.DialContext(ctx, "tcp", net.JoinHostPort("inside.example", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("allow_private: %v", err)
	}
	c.Close()
	<-accepted
}

// TestGuardControlHook: the socket-level check refuses the address
// actually being connected, whatever the resolver said before (DNS
// rebinding): the dialer calls it with the literal address of the socket.
func TestGuardControlHook(t *testing.T) {
	hook := (&Guard{}).control("rebind.example")
	for addr, refused := range map[string]bool{
		"127.0.0.1:80":         true,
		"[::ffff:10.0.0.1]:80": true,
		"[::ffff:0:a00:1]:80":  true,
		"[fe80::1%eth0]:80":    true,
		"93.184.215.14:443":    false,
		"not an address":       true,
	} {
		err := hook("tcp", addr, nil)
		if (err != nil) != refused || (err != nil && !errors.Is(err, ErrRefused)) {
			t.Errorf("%s: %v, want refused=%v", addr, err, refused)
		}
	}
	if err := (&Guard{AllowPrivate: true}).control("x")("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("allow_private: %v", err)
	}
}
