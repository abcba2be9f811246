package world

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// registryTestWorld has a registered domain, a Unicode one, one without a
// date and one that does not exist.
func registryTestWorld() *World {
	w := &World{
		Hosts: []*Host{{Name: "mx.old.test", IP: "127.66.0.1"}},
		Domains: []*Domain{
			{Name: "old.test", Registered: "1997-09-15"},
			{Name: "bücher.test", Registered: "2011-05-06T07:08:09Z"},
			{Name: "undated.test"},
			{Name: "gone.test", NXDomain: true, Registered: "2001-01-01"},
		},
	}
	w.Defaults()
	return w
}

func TestRDAPServer(t *testing.T) {
	w := registryTestWorld()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := Start(w, Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1, RDAPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.WHOIS != nil {
		t.Fatal("WHOIS started without being asked for")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := client.Get(r.RDAP.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/rdap+json" {
			t.Errorf("%s: content type %q", path, ct)
		}
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, v
	}
	registration := func(v map[string]any) string {
		evs, _ := v["events"].([]any)
		for _, e := range evs {
			m := e.(map[string]any)
			if m["eventAction"] == "registration" {
				return m["eventDate"].(string)
			}
		}
		return ""
	}
	for _, tt := range []struct {
		path, ldh, date string
		code            int
	}{
		{"domain/old.test", "old.test", "1997-09-15T00:00:00Z", 200},
		{"domain/OLD.TEST.", "old.test", "1997-09-15T00:00:00Z", 200},
		{"domain/xn--bcher-kva.test", "xn--bcher-kva.test", "2011-05-06T07:08:09Z", 200},
		{"domain/bücher.test", "xn--bcher-kva.test", "2011-05-06T07:08:09Z", 200},
		{"domain/undated.test", "", "", 404},
		{"domain/gone.test", "", "", 404},
		{"domain/nowhere.test", "", "", 404},
		{"nameserver/ns.old.test", "", "", 400},
	} {
		code, v := get(tt.path)
		if code != tt.code {
			t.Errorf("%s: status %d, want %d", tt.path, code, tt.code)
			continue
		}
		if code != 200 {
			if v["errorCode"] != float64(code) {
				t.Errorf("%s: error object %v", tt.path, v)
			}
			continue
		}
		if v["objectClassName"] != "domain" || v["ldhName"] != tt.ldh || registration(v) != tt.date {
			t.Errorf("%s: %v, want %s registered %s", tt.path, v, tt.ldh, tt.date)
		}
	}
	r.RDAP.SetFault(http.StatusServiceUnavailable)
	if code, _ := get("domain/old.test"); code != http.StatusServiceUnavailable {
		t.Errorf("with a fault: status %d", code)
	}
	r.RDAP.SetFault(0)
	if code, _ := get("domain/old.test"); code != 200 {
		t.Errorf("fault cleared: status %d", code)
	}
	if r.RDAP.Queries() != 10 {
		t.Errorf("%d queries counted, want 10", r.RDAP.Queries())
	}
}

func TestWHOISServer(t *testing.T) {
	w := registryTestWorld()
	s, err := StartWHOIS(w, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ask := func(q string) string {
		t.Helper()
		c, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, q+"\r\n"); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tt := range []struct{ q, want string }{
		{"old.test", "Creation Date: 1997-09-15T00:00:00Z\r\n"},
		{"Old.Test", "Domain Name: OLD.TEST\r\n"},
		{"bücher.test", "Creation Date: 2011-05-06T07:08:09Z\r\n"},
		{"undated.test", `No match for "UNDATED.TEST".`},
		{"gone.test", `No match for "GONE.TEST".`},
	} {
		if got := ask(tt.q); !strings.Contains(got, tt.want) {
			t.Errorf("%q: answer %q does not contain %q", tt.q, got, tt.want)
		}
	}
	if s.Queries() != 5 {
		t.Errorf("%d queries counted", s.Queries())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("still listening after Close")
	}
}

func TestRegistryServersRefuseNonLoopback(t *testing.T) {
	w := registryTestWorld()
	if _, err := StartRDAP(w, "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("rdap on 0.0.0.0: %v", err)
	}
	if _, err := StartWHOIS(w, "192.0.2.1:43"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("whois on 192.0.2.1: %v", err)
	}
}

func TestDNSBLZones(t *testing.T) {
	w := dnsTestWorld()
	w.DNSBL = []*DNSBLZone{
		{Zone: "Block.Lists.Test.", Listed: map[string]string{"127.0.1.1": "127.0.0.2", "fd00::1": "127.0.0.4", "127.0.1.2": "127.255.255.254"}},
		{Zone: "allow.lists.test", Listed: map[string]string{"127.0.2.1": "127.0.5.1"}},
	}
	w.Defaults()
	s := dnsStartTest(t, w)
	for _, tt := range []struct {
		name  string
		rcode int
		a     string
	}{
		{"1.1.0.127.block.lists.test.", dns.RcodeSuccess, "127.0.0.2"},
		{"2.1.0.127.block.lists.test.", dns.RcodeSuccess, "127.255.255.254"},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.block.lists.test.", dns.RcodeSuccess, "127.0.0.4"},
		{"1.2.0.127.block.lists.test.", dns.RcodeNameError, ""},
		{"1.2.0.127.allow.lists.test.", dns.RcodeSuccess, "127.0.5.1"},
		{"1.1.0.127.allow.lists.test.", dns.RcodeNameError, ""},
		{"1.0.127.block.lists.test.", dns.RcodeSuccess, ""}, // an empty non-terminal: NODATA
	} {
		r := dnsQuery(t, s, "udp", tt.name, dns.TypeA)
		if r.Rcode != tt.rcode {
			t.Errorf("%s: rcode %s, want %s", tt.name, dns.RcodeToString[r.Rcode], dns.RcodeToString[tt.rcode])
			continue
		}
		got := ""
		if len(r.Answer) == 1 {
			got = r.Answer[0].(*dns.A).A.String()
		}
		if got != tt.a || len(r.Answer) > 1 {
			t.Errorf("%s: answer %v, want %q", tt.name, r.Answer, tt.a)
		}
	}
	// A list can fail like any zone.
	s.SetFault("block.lists.test", DNSFaultServFail)
	if r := dnsQuery(t, s, "udp", "1.1.0.127.block.lists.test.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("after SetFault: rcode %s", dns.RcodeToString[r.Rcode])
	}
}

func TestValidateNewFields(t *testing.T) {
	w := registryTestWorld()
	w.Domains[0].Registered = "15 Sept 1997"
	w.DNSBL = []*DNSBLZone{
		{Zone: "bl.test", Listed: map[string]string{"not-an-ip": "127.0.0.2", "127.0.0.9": "listed"}},
		{Zone: "bl.test"},
		{Zone: "old.test"},
		{},
	}
	err := w.Validate()
	for _, want := range []string{"registered", "bad listed address", "is not an IPv4 address", "listed twice", "also a domain", "zone is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

func TestGenerateRegistryAndLists(t *testing.T) {
	o := GenOptions{Domains: 400, Seed: 3, Auth: 0.5, DNSBL: 0.1, DNSWL: 0.25}
	w, _, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	registered := 0
	for _, d := range w.Domains {
		hasAuth := false
		for _, r := range d.Records {
			if r.Name == "_dmarc" {
				hasAuth = true
			}
		}
		at, ok := d.RegisteredAt()
		if ok != hasAuth {
			t.Fatalf("%s: registered %q, auth records %v", d.Name, d.Registered, hasAuth)
		}
		if ok {
			registered++
			if at.Year() < 1995 || at.Year() > 2025 {
				t.Errorf("%s: registered %s", d.Name, at)
			}
		}
	}
	if registered < 160 || registered > 240 {
		t.Errorf("%d of 400 domains registered, want about 200", registered)
	}
	if len(w.DNSBL) != 2 || w.DNSBL[0].Zone != "dnsbl.test" || w.DNSBL[1].Zone != "dnswl.test" {
		t.Fatalf("lists: %+v", w.DNSBL)
	}
	bl, wl := len(w.DNSBL[0].Listed), len(w.DNSBL[1].Listed)
	if n := len(w.Hosts); bl < n*5/100 || bl > n*15/100 || wl < n*18/100 || wl > n*32/100 {
		t.Errorf("%d hosts: %d block-listed, %d allow-listed", n, bl, wl)
	}
	// They survive the world file.
	path := filepath.Join(t.TempDir(), "w.json")
	if err := w.Save(path); err != nil {
		t.Fatal(err)
	}
	w3, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w3.DNSBL, w.DNSBL) || !reflect.DeepEqual(w3.Domains, w.Domains) {
		t.Error("lists or registration dates changed in the world file")
	}
	// The new fields take their own random stream: the rest of the world
	// is what the seed gave before they existed.
	o2 := o
	o2.DNSBL, o2.DNSWL = 0, 0
	w2, _, err := Generate(o2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.Domains {
		if w.Domains[i].Policy != w2.Domains[i].Policy || len(w.Domains[i].Records) != len(w2.Domains[i].Records) {
			t.Fatalf("domain %d differs when only the list fractions change", i)
		}
	}
	if _, _, err := Generate(GenOptions{Domains: 1, DNSBL: 2}); err == nil {
		t.Error("a DNSBL fraction of 2 was accepted")
	}
}

func TestRegistryServersCloseLeavesNoGoroutines(t *testing.T) {
	count := func() int {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		c := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "world.(*WHOISServer)") || strings.Contains(g, "world.StartRDAP") {
				c++
			}
		}
		return c
	}
	w := registryTestWorld()
	r, err := Start(w, Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1, RDAPAddr: "127.0.0.1:0", WHOISAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	// A client that connects and says nothing holds a WHOIS goroutine.
	c, err := net.Dial("tcp", r.WHOIS.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.Get(r.RDAP.URL() + "domain/old.test")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(); n < 2 {
		t.Fatalf("%d registry goroutines while serving, want at least 2", n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The RDAP server's connection goroutines see their connection
	// closed and return a moment after Close (http.Server.Close does not
	// wait for them): they must all be gone soon, not at once.
	deadline = time.Now().Add(10 * time.Second)
	for count() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d registry goroutines 10 s after Close", n)
	}
}
