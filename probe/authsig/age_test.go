package authsig_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifyd/verifyd/probe/authsig"
)

func TestParseWHOISCreated(t *testing.T) {
	date := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	tests := []struct {
		name, answer string
		want         time.Time
		wantErr      error // nil: any error when want is zero
	}{
		{"verisign", "   Domain Name: EXAMPLE.COM\r\n   Registry Domain ID: 2336799_DOMAIN_COM-VRSN\r\n   Updated Date: 2024-08-14T07:01:34Z\r\n   Creation Date: 1995-08-14T04:00:00Z\r\n", date("1995-08-14T04:00:00Z"), nil},
		{"fractional seconds", "Creation Date: 2010-03-04T05:06:07.123Z\n", date("2010-03-04T05:06:07.123Z"), nil},
		{"ripe style", "domain:  example.nl\ncreated:         2001-02-03\nsource: X\n", date("2001-02-03T00:00:00Z"), nil},
		{"nominet style", "    Registered on: 03-Feb-2001\n", date("2001-02-03T00:00:00Z"), nil},
		{"pl style", "created:               2001.02.03 12:13:14\n", date("2001-02-03T12:13:14Z"), nil},
		{"with zone words", "Creation Date: 2001-02-03 04:05:06 (UTC)\n", date("2001-02-03T04:05:06Z"), nil},
		{"offset", "Registration Time: 2001-02-03T04:05:06+08:00\n", date("2001-02-02T20:05:06Z"), nil},
		{"first creation line wins", "Creation Date: 2001-02-03\nCreation Date: 1999-01-01\n", date("2001-02-03T00:00:00Z"), nil},
		{"malformed date, then a good one", "created: sometime\nRegistered on: 2002-01-01\n", date("2002-01-01T00:00:00Z"), nil},
		{"not registered (gtld)", `No match for "NOWHERE.COM".` + "\r\n>>> Last update <<<\r\n", time.Time{}, authsig.ErrNotRegistered},
		{"not registered (cctld)", "% comment\nNOT FOUND\n", time.Time{}, authsig.ErrNotRegistered},
		{"not registered (denic)", "Domain: nowhere.de\nStatus: free\n", time.Time{}, authsig.ErrNotRegistered},
		{"no creation date (denic)", "Domain: example.de\nStatus: connect\nChanged: 2018-03-12T21:44:25+01:00\n", time.Time{}, nil},
		{"empty", "", time.Time{}, nil},
		{"key inside a value is no key", "Remarks: the Creation Date: 2001-02-03 is secret\n", time.Time{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := authsig.ParseWHOISCreated(tt.answer)
			switch {
			case !tt.want.IsZero():
				if err != nil || !got.Equal(tt.want) {
					t.Errorf("got %v, %v; want %v", got, err, tt.want)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got %v, %v; want %v", got, err, tt.wantErr)
				}
			case err == nil || errors.Is(err, authsig.ErrNotRegistered):
				t.Errorf("got %v, %v; want an error other than not registered", got, err)
			}
		})
	}
}

func TestParseRDAPRegistration(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // RFC 3339; "" for an error
	}{
		{"registration event", `{"objectClassName":"domain","events":[{"eventAction":"last changed","eventDate":"2024-01-01T00:00:00Z"},{"eventAction":"registration","eventDate":"1997-09-15T04:00:00Z"}]}`, "1997-09-15T04:00:00Z"},
		{"offset and fraction", `{"events":[{"eventAction":"registration","eventDate":"2010-03-04T05:06:07.5+02:00"}]}`, "2010-03-04T03:06:07.5Z"},
		{"no registration event", `{"events":[{"eventAction":"expiration","eventDate":"2030-01-01T00:00:00Z"}]}`, ""},
		{"no events", `{"objectClassName":"domain"}`, ""},
		{"bad date", `{"events":[{"eventAction":"registration","eventDate":"15/09/1997"}]}`, ""},
		{"not json", `<html>Not Found</html>`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := authsig.ParseRDAPRegistration(strings.NewReader(tt.body))
			if tt.want == "" {
				if err == nil {
					t.Errorf("got %v, want an error", got)
				}
				return
			}
			want, _ := time.Parse(time.RFC3339Nano, tt.want)
			if err != nil || !got.Equal(want) {
				t.Errorf("got %v, %v; want %v", got, err, want)
			}
		})
	}
}

func TestRDAPBootstrap(t *testing.T) {
	m, err := authsig.ParseRDAPBootstrap([]byte(`{"version":"1.0","services":[
		[["com","NET"],["http://rdap.example/com/","https://rdap.example/com/"]],
		[["org"],["https://rdap.example/org"]],
		[["bad"],["ftp://rdap.example/"]]]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"com": "https://rdap.example/com/", "net": "https://rdap.example/com/", "org": "https://rdap.example/org/", "bad": ""} {
		if m[name] != want {
			t.Errorf("%s: %q, want %q", name, m[name], want)
		}
	}
	for _, bad := range []string{`{`, `{"services":[[["com"]]]}`, `{"services":[[[],["https://x/"]]]}`} {
		if _, err := authsig.ParseRDAPBootstrap([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestPublicAddress(t *testing.T) {
	for ip, want := range map[string]bool{
		"8.8.8.8": true, "2a00:1450:4001:80b::200e": true, "93.184.215.14": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "100.64.0.1": false,
		"169.254.169.254": false, "0.0.0.0": false, "192.0.2.1": false, "198.18.0.1": false, "224.0.0.1": false,
		"255.255.255.255": false, "::1": false, "fc00::1": false, "fe80::1": false, "2001:db8::1": false,
		"::ffff:127.0.0.1": false, "::ffff:8.8.8.8": true,
	} {
		if got := authsig.PublicAddress(netip.MustParseAddr(ip)); got != want {
			t.Errorf("%s: %v, want %v", ip, got, want)
		}
	}
}

// loopbackOnly is the tests' AgeOptions.Allow: nothing can leave the
// machine.
func loopbackOnly(ip netip.Addr) bool { return ip.IsLoopback() }

// rdapStub is an RDAP server on loopback answering from a map.
type rdapStub struct {
	url   string
	port  string
	hits  atomic.Int64
	dates map[string]string
	code  atomic.Int32 // forced status, 0 for none
}

func startRDAPStub(t *testing.T, dates map[string]string) *rdapStub {
	t.Helper()
	s := &rdapStub{dates: dates}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if c := s.code.Load(); c != 0 {
			if c/100 == 3 {
				w.Header().Set("Location", "http://192.0.2.1/elsewhere")
			}
			w.WriteHeader(int(c))
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/rdap/domain/")
		d, ok := s.dates[name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"objectClassName":"domain","ldhName":%q,"events":[{"eventAction":"registration","eventDate":%q}]}`, name, d)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.url = "http://" + ln.Addr().String() + "/rdap/"
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	return s
}

// startWHOISStub is a WHOIS server on loopback answering from a map.
func startWHOISStub(t *testing.T, dates map[string]string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 512)
				n, _ := c.Read(buf)
				q := strings.TrimSpace(string(buf[:n]))
				if d, ok := dates[q]; ok {
					fmt.Fprintf(c, "Domain Name: %s\r\nCreation Date: %s\r\n", strings.ToUpper(q), d)
				} else {
					fmt.Fprintf(c, "No match for %q.\r\n", q)
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), &hits
}

func newAge(t *testing.T, m *mockDNS, mod func(*authsig.AgeOptions)) *authsig.DomainAge {
	t.Helper()
	o := authsig.AgeOptions{
		Resolver: m, Bootstrap: []byte(`{"version":"1.0","services":[]}`), WHOIS: map[string]string{},
		Allow: loopbackOnly, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&o)
	}
	a, err := authsig.NewDomainAge(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func TestDomainAgeRegistered(t *testing.T) {
	rdap := startRDAPStub(t, map[string]string{"old.test": "1997-09-15T04:00:00Z"})
	whoisAddr, whoisHits := startWHOISStub(t, map[string]string{"old.test": "1997-09-15T04:00:00Z", "legacy.whois": "2003-04-05T00:00:00Z"})
	m := newMockDNS()
	m.ip["rdap.registry.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	m.ip["evil.registry.test"] = []netip.Addr{netip.MustParseAddr("10.0.0.1")}
	port := rdap.port
	a := newAge(t, m, func(o *authsig.AgeOptions) {
		o.RDAP = map[string]string{
			"test":       rdap.url,
			"byname":     "http://rdap.registry.test:" + port + "/rdap",
			"evil":       "http://evil.registry.test:" + port + "/rdap/",
			"external":   "http://192.0.2.1/rdap/",
			"fallback":   rdap.url,
			"co.uk":      rdap.url,                 // the longest suffix wins...
			"uk":         "http://192.0.2.1/rdap/", // ...over this one
			"brokenrdap": "http://127.0.0.1:1/",    // nothing listens: WHOIS next
		}
		o.WHOIS = map[string]string{"whois": whoisAddr, "fallback": whoisAddr, "brokenrdap": whoisAddr, "external": "192.0.2.1:43"}
	})
	want := time.Date(1997, 9, 15, 4, 0, 0, 0, time.UTC)
	ctx := ctx10s(t)
	tests := []struct {
		domain  string
		want    time.Time
		wantErr error
	}{
		{"old.test", want, nil},
		{"mail.old.test", want, nil},                          // the organizational domain is looked up
		{"old.byname", time.Time{}, authsig.ErrNotRegistered}, // by host name, resolved through the Resolver
		{"legacy.whois", time.Date(2003, 4, 5, 0, 0, 0, 0, time.UTC), nil},
		{"nowhere.whois", time.Time{}, authsig.ErrNotRegistered},
		{"nowhere.test", time.Time{}, authsig.ErrNotRegistered}, // a 404 ends the search: no WHOIS
		{"old.evil", time.Time{}, authsig.ErrAddressNotAllowed},
		{"old.external", time.Time{}, authsig.ErrAddressNotAllowed},
		{"old.unknown", time.Time{}, authsig.ErrNoAgeSource},
		{"www.old.co.uk", time.Time{}, authsig.ErrNotRegistered},
	}
	for _, tt := range tests {
		got, err := a.Registered(ctx, tt.domain)
		switch {
		case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
			t.Errorf("%s: %v, %v; want %v", tt.domain, got, err, tt.wantErr)
		case tt.wantErr == nil && (err != nil || !got.Equal(tt.want)):
			t.Errorf("%s: %v, %v; want %v", tt.domain, got, err, tt.want)
		}
	}
	// RDAP failing (a 5xx, a redirect, which is not followed) falls back to
	// WHOIS.
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusFound} {
		rdap.code.Store(int32(code))
		before := whoisHits.Load()
		if got, err := a.Registered(ctx, "old.fallback"); err != nil || !got.Equal(want) {
			// The WHOIS stub knows old.test, not old.fallback.
			if !errors.Is(err, authsig.ErrNotRegistered) || whoisHits.Load() != before+1 {
				t.Errorf("rdap %d: %v, %v; whois asked %d times", code, got, err, whoisHits.Load()-before)
			}
		}
	}
	rdap.code.Store(0)
	if _, err := a.Registered(ctx, "old.brokenrdap"); !errors.Is(err, authsig.ErrNotRegistered) {
		t.Errorf("rdap down: %v, want WHOIS's not registered", err)
	}
}

func TestDomainAgeDefaultRefusesLoopback(t *testing.T) {
	rdap := startRDAPStub(t, map[string]string{"old.test": "1997-09-15T04:00:00Z"})
	a := newAge(t, newMockDNS(), func(o *authsig.AgeOptions) {
		o.Allow = nil // PublicAddress
		o.RDAP = map[string]string{"test": rdap.url}
	})
	if _, err := a.Registered(ctx10s(t), "old.test"); !errors.Is(err, authsig.ErrAddressNotAllowed) {
		t.Errorf("default policy reached a loopback server: %v", err)
	}
	if rdap.hits.Load() != 0 {
		t.Error("the server was reached")
	}
}

// TestDomainAgeDays checks the background lookups: Days never waits, the
// first call gets 0 and queues a lookup, a later one the age; unknown
// domains are cached for NegativeTTL.
func TestDomainAgeDays(t *testing.T) {
	rdap := startRDAPStub(t, map[string]string{"old.test": "2000-01-01T00:00:00Z"})
	clock := &fakeClock{t: time.Date(2000, 1, 31, 12, 0, 0, 0, time.UTC)}
	a := newAge(t, newMockDNS(), func(o *authsig.AgeOptions) {
		o.RDAP = map[string]string{"test": rdap.url}
		o.Now = clock.Now
		o.NegativeTTL = time.Hour
	})
	if d, ok := a.Days("old.test"); ok || d != 0 {
		t.Fatalf("first call: %d, %v; want 0, false", d, ok)
	}
	waitDays := func(domain string) (int, bool) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if d, ok := a.Days(domain); ok {
				return d, ok
			}
			time.Sleep(5 * time.Millisecond)
		}
		return 0, false
	}
	if d, ok := waitDays("www.old.test"); !ok || d != 30 {
		t.Fatalf("later: %d, %v; want 30 days", d, ok)
	}
	hits := rdap.hits.Load()
	clock.Advance(24 * time.Hour)
	if d, ok := a.Days("old.test"); !ok || d != 31 || rdap.hits.Load() != hits {
		t.Errorf("a day later: %d, %v, %d more queries", d, ok, rdap.hits.Load()-hits)
	}
	// An unknown domain: one query, then cached as unknown (while the query
	// is under way, it is not queued again).
	a.Days("nowhere.test")
	deadline := time.Now().Add(10 * time.Second)
	for rdap.hits.Load() == hits && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for range 5 {
		if _, ok := a.Days("nowhere.test"); ok {
			t.Fatal("an unregistered domain has an age")
		}
	}
	if n := rdap.hits.Load() - hits; n != 1 {
		t.Errorf("%d queries for an unregistered domain, want 1", n)
	}
}

func TestNewDomainAgeOptions(t *testing.T) {
	_, err := authsig.NewDomainAge(authsig.AgeOptions{
		Bootstrap: []byte("{"), RDAP: map[string]string{"x": "gopher://h/"}, WHOIS: map[string]string{"y": "no-port"}, Timeout: -1,
	})
	for _, want := range []string{"resolver is required", "bootstrap", "scheme", "host:port", "timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	// The shipped bootstrap file names the IANA servers of common TLDs.
	a, err := authsig.NewDomainAge(authsig.AgeOptions{Resolver: newMockDNS(), Allow: func(netip.Addr) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := os.ReadFile("rdap-dns.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := authsig.ParseRDAPBootstrap(b)
	if err != nil {
		t.Fatal(err)
	}
	for tld, want := range map[string]string{
		"com": "https://rdap.verisign.com/com/v1/", "net": "https://rdap.verisign.com/net/v1/",
		"org": "https://rdap.publicinterestregistry.org/rdap/", "uk": "https://rdap.nominet.uk/uk/",
		"info": "https://rdap.identitydigital.services/rdap/", "dev": "https://pubapi.registry.google/rdap/",
	} {
		if m[tld] != want {
			t.Errorf("%s: %q, want %q", tld, m[tld], want)
		}
	}
}
