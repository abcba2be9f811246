package mtatest

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verifyd/verifyd/bench/world"
)

// The harness's own addresses: 127.35.200.0/24, apart from probe/realmta's
// 127.35.0-9.x, so that both packages' tests can run at once.
var (
	testDNS  = netip.MustParseAddr("127.35.200.53")
	testHost = map[Kind]netip.AddrPort{
		KindPostfix:   netip.MustParseAddrPort("127.35.200.1:25"),
		KindExim:      netip.MustParseAddrPort("127.35.200.2:25"),
		KindOpenSMTPD: netip.MustParseAddrPort("127.35.200.3:25"),
		KindPostgrey:  netip.MustParseAddrPort("127.35.200.4:10023"),
	}
)

// startDNS serves a small world's DNS on testDNS:53 for the MTAs' lookups
// (the client's name: NXDOMAIN).
func startDNS(t *testing.T) {
	t.Helper()
	w := &world.World{Domains: []*world.Domain{{Name: "mtatest.test"}}}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	dns, err := world.StartDNS(w, testDNS.String()+":53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
}

// TestEachMTAGreetsAndStops: Postfix, Exim and OpenSMTPD each start from
// Debian's packages, greet with their own banner and host name, answer
// EHLO, and stop without leaving a process or a file behind.
func TestEachMTAGreetsAndStops(t *testing.T) {
	if _, err := Available(); err != nil && os.Getenv("VERIFYD_MTA_TESTS") != "require" {
		t.Skip(err)
	}
	startDNS(t)
	banners := map[Kind]string{
		KindPostfix:   "ESMTP Postfix (Debian/GNU)",
		KindExim:      "ESMTP Exim 4.96",
		KindOpenSMTPD: "ESMTP OpenSMTPD",
	}
	for _, k := range []Kind{KindPostfix, KindExim, KindOpenSMTPD} {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			host := "mx." + string(k) + ".mtatest.test"
			d := Start(t, k, Config{Addr: testHost[k], Hostname: host, Nameserver: testDNS, Users: []string{"alice"}})
			greeting, ehlo := greet(t, d.Addr)
			if !strings.HasPrefix(greeting, "220 "+host+" ") || !strings.Contains(greeting, banners[k]) {
				t.Errorf("greeting %q, want 220 %s … %s", greeting, host, banners[k])
			}
			if len(ehlo) == 0 || !strings.HasPrefix(ehlo[0], "250") || !strings.Contains(ehlo[0], host) {
				t.Errorf("EHLO reply %q, want 250 %s", ehlo, host)
			}
			procs := d.Processes()
			if len(procs) == 0 {
				t.Fatal("no process found in the daemon's PID namespace")
			}
			unshare, dir := d.PID(), d.Dir
			if !slices.Contains(children(os.Getpid()), unshare) {
				t.Errorf("unshare (%d) is not among the test's children %v", unshare, children(os.Getpid()))
			}
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
			for _, p := range append(procs, unshare) {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil {
					t.Errorf("process %d still there after Stop", p)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still there after Stop (%v)", dir, err)
			}
			if c, err := net.DialTimeout("tcp", d.Addr.String(), time.Second); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections after Stop", d.Addr)
			}
		})
	}
}

// TestPostgreyGreylists: postgrey answers the policy protocol, deferring a
// new (client, sender, recipient) triplet and passing it once the delay
// is over.
func TestPostgreyGreylists(t *testing.T) {
	d := Postgrey(t, Config{Addr: testHost[KindPostgrey], Args: []string{"--delay=1"}})
	ask := func() string {
		c, err := net.DialTimeout("tcp", d.Addr.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, "request=smtpd_access_policy\nprotocol_state=RCPT\nclient_address=127.35.200.9\n"+
			"client_name=unknown\nsender=a@sender.test\nrecipient=b@grey.test\n\n")
		l, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(l)
	}
	if a := ask(); !strings.HasPrefix(a, "action=DEFER_IF_PERMIT Greylisted") {
		t.Fatalf("first attempt: %q, want action=DEFER_IF_PERMIT Greylisted…", a)
	}
	time.Sleep(1100 * time.Millisecond) // postgrey's --delay, on its clock
	if a := ask(); !strings.HasPrefix(a, "action=PREPEND X-Greylist: delayed") {
		t.Fatalf("after the delay: %q, want action=PREPEND X-Greylist…", a)
	}
}

// TestBrokenConfigurationFailsTheStart: a daemon that cannot start fails
// Start with its own complaint, and leaves nothing running.
func TestBrokenConfigurationFailsTheStart(t *testing.T) {
	root, err := Available()
	if err != nil {
		if os.Getenv("VERIFYD_MTA_TESTS") == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	before := countUnshare()
	_, err = start(root, KindOpenSMTPD, Config{
		Addr: netip.MustParseAddrPort("127.35.200.5:25"), Nameserver: testDNS,
		Files: map[string]string{"/etc/smtpd.conf": "listen on 127.35.200.5 port 25\nthis is not smtpd.conf\n"},
	})
	if err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("start: %v, want an error with smtpd's \"syntax error\"", err)
	}
	if n := countUnshare(); n > before {
		t.Errorf("%d unshare processes after a failed start, %d before", n, before)
	}
}

// countUnshare counts this process's unshare children.
func countUnshare() int {
	n := 0
	for _, p := range children(os.Getpid()) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(b)) == "unshare" {
			n++
		}
	}
	return n
}

// greet connects to addr and returns the greeting and the EHLO reply.
func greet(t *testing.T, addr netip.AddrPort) (string, []string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	read := func() []string {
		var lines []string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading a reply: %v (so far %q)", err, lines)
			}
			l = strings.TrimRight(l, "\r\n")
			lines = append(lines, l)
			if len(l) < 4 || l[3] != '-' {
				return lines
			}
		}
	}
	greeting := read()
	fmt.Fprint(c, "EHLO client.mtatest.test\r\n")
	ehlo := read()
	fmt.Fprint(c, "QUIT\r\n")
	read()
	return greeting[0], ehlo
}
