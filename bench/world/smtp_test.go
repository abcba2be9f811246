package world

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Clients dial from these loopback addresses, standing in for the prober's
// egress addresses.
const (
	clientA = "127.0.0.1"
	clientB = "127.0.0.2"
	clientC = "127.0.0.3"
)

// testSubnet gives every test world hosts of its own: 127.77.n.1, .2 ...
var testSubnet atomic.Int32

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type testWorld struct {
	w     *World
	srv   *SMTPServers
	clock *fakeClock
}

// startWorld starts SMTP servers for hosts (their IPs filled in when empty)
// and domains on a free port, with a fake clock, closed at the end of the
// test.
func startWorld(t testing.TB, hosts []*Host, domains []*Domain, opts ...func(*SMTPOptions)) *testWorld {
	t.Helper()
	n := int(testSubnet.Add(1))
	for i, h := range hosts {
		if h.IP == "" {
			h.IP = fmt.Sprintf("127.%d.%d.%d", 77+n/250, n%250, i+1)
		}
	}
	w := &World{Hosts: hosts, Domains: domains}
	w.Defaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o := SMTPOptions{Port: -1, Now: clock.Now}
	for _, f := range opts {
		f(&o)
	}
	srv, err := StartSMTP(w, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testWorld{w: w, srv: srv, clock: clock}
}

// dial connects to the host at ip from the loopback address from.
func (tw *testWorld) dial(t testing.TB, ip, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp4", tw.srv.Addr(ip))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// rawClient speaks SMTP byte for byte.
type rawClient struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func (tw *testWorld) raw(t testing.TB, ip, from string) *rawClient {
	t.Helper()
	c := tw.dial(t, ip, from)
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

// reply reads one reply, all its lines, with their CRLFs.
func (rc *rawClient) reply() string {
	rc.t.Helper()
	var b strings.Builder
	for {
		line, err := rc.r.ReadString('\n')
		if err != nil {
			rc.t.Fatalf("reading reply after %q: %v", b.String(), err)
		}
		b.WriteString(line)
		if len(line) < 4 || line[3] != '-' {
			return b.String()
		}
	}
}

func (rc *rawClient) send(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// cmd sends line and returns the reply.
func (rc *rawClient) cmd(line string) string {
	rc.t.Helper()
	rc.send(line + "\r\n")
	return rc.reply()
}

// expect sends line and checks that the reply starts with want.
func (rc *rawClient) expect(line, want string) {
	rc.t.Helper()
	if got := rc.cmd(line); !strings.HasPrefix(got, want) {
		rc.t.Errorf("%s: got %q, want %q...", line, got, want)
	}
}

// expectEOF checks that the server closed the connection.
func (rc *rawClient) expectEOF() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := rc.r.ReadByte(); err != io.EOF {
		rc.t.Errorf("want EOF from the server, got %q, %v", b, err)
	}
}

// greeted reads the banner and says EHLO.
func (tw *testWorld) greeted(t testing.TB, ip, from string) *rawClient {
	t.Helper()
	rc := tw.raw(t, ip, from)
	if got := rc.reply(); !strings.HasPrefix(got, "220 ") {
		t.Fatalf("banner: %q", got)
	}
	if got := rc.cmd("EHLO probe.test"); !strings.HasPrefix(got, "250") {
		t.Fatalf("EHLO: %q", got)
	}
	return rc
}

func (tw *testWorld) client(t testing.TB, ip, from string) *smtp.Client {
	t.Helper()
	c, err := smtp.NewClient(tw.dial(t, ip, from), "mx.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("probe.test"); err != nil {
		t.Fatal(err)
	}
	return c
}

// code returns the reply code and enhanced code of a net/smtp error (250
// and "" for nil).
func code(t testing.TB, err error) (int, string) {
	t.Helper()
	if err == nil {
		return 250, ""
	}
	var te *textproto.Error
	if !errors.As(err, &te) {
		t.Fatalf("not an SMTP reply: %v", err)
	}
	enh, _, _ := strings.Cut(te.Msg, " ")
	return te.Code, enh
}

func checkRcpts(t *testing.T, c *smtp.Client, rows []struct {
	rcpt string
	code int
	enh  string
}) {
	t.Helper()
	for _, r := range rows {
		code, enh := code(t, c.Rcpt(r.rcpt))
		if code != r.code || (r.enh != "" && enh != r.enh) {
			t.Errorf("RCPT %s: got %d %s, want %d %s", r.rcpt, code, enh, r.code, r.enh)
		}
	}
}

func TestSMTPAcceptPolicy(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.alpha.test"}}, []*Domain{{
		Name:      "alpha.test",
		Mailboxes: map[string]MailboxState{"alice": MailboxOK, "full": MailboxFull, "off": MailboxDisabled},
	}})
	c := tw.client(t, tw.w.Hosts[0].IP, clientA)
	if err := c.Mail("probe@verifyd.test"); err != nil {
		t.Fatal(err)
	}
	checkRcpts(t, c, []struct {
		rcpt string
		code int
		enh  string
	}{
		{"alice@alpha.test", 250, ""},
		{"Alice@ALPHA.test", 250, ""},
		{"\"alice\"@alpha.test", 250, ""},
		{"bob@alpha.test", 550, "5.1.1"},
		{"full@alpha.test", 552, "5.2.2"},
		{"off@alpha.test", 550, "5.2.1"},
		{"alice@beta.test", 550, "5.1.2"},
		{"alice@[127.77.0.1]", 550, "5.1.2"},
		{"postmaster", 250, ""},
	})
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
}

func TestSMTPCatchAll(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.any.test"}}, []*Domain{{
		Name:      "any.test",
		Policy:    PolicyCatchAll,
		Mailboxes: map[string]MailboxState{"full": MailboxFull, "off": MailboxDisabled},
	}})
	c := tw.client(t, tw.w.Hosts[0].IP, clientA)
	if err := c.Mail(""); err != nil {
		t.Fatal(err)
	}
	checkRcpts(t, c, []struct {
		rcpt string
		code int
		enh  string
	}{
		{"anyone@any.test", 250, ""},
		{"x7k2q9zz@any.test", 250, ""},
		{"full@any.test", 552, "5.2.2"},
		{"off@any.test", 550, "5.2.1"},
	})
}

func TestSMTPRejectPolicy(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.strict.test"}}, []*Domain{{
		Name:      "strict.test",
		Policy:    PolicyReject,
		Mailboxes: map[string]MailboxState{"alice": MailboxOK},
	}})
	c := tw.client(t, tw.w.Hosts[0].IP, clientA)
	if err := c.Mail("probe@verifyd.test"); err != nil {
		t.Fatal(err)
	}
	checkRcpts(t, c, []struct {
		rcpt string
		code int
		enh  string
	}{
		{"alice@strict.test", 550, "5.7.1"},
		{"nobody@strict.test", 550, "5.7.1"},
	})
}

func TestSMTPGreylist(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.grey.test"}, {Name: "mx2.grey.test"}}, []*Domain{
		{
			Name:          "grey.test",
			Policy:        PolicyGreylist,
			GreylistDelay: Duration(time.Minute),
			Mailboxes:     map[string]MailboxState{"alice": MailboxOK, "full": MailboxFull},
		},
		{
			Name:      "beta.test", // accept, with one greylisting mailbox
			Mailboxes: map[string]MailboxState{"slow": MailboxGreylist, "fast": MailboxOK},
		},
	})
	mx, mx2 := tw.w.Hosts[0].IP, tw.w.Hosts[1].IP
	rcpt := func(ip, from, addr string) string {
		t.Helper()
		rc := tw.greeted(t, ip, from)
		rc.expect("MAIL FROM:<probe@verifyd.test>", "250 2.1.0")
		got := rc.cmd("RCPT TO:<" + addr + ">")
		rc.expect("QUIT", "221 2.0.0")
		return strings.TrimSuffix(got, "\r\n")
	}
	for _, step := range []struct {
		advance    time.Duration
		ip, from   string
		addr, want string
	}{
		{0, mx, clientA, "alice@grey.test", "450 4.2.0 greylisted, try again later"},
		{0, mx, clientA, "full@grey.test", "450 4.2.0"},
		{0, mx, clientA, "nobody@grey.test", "450 4.2.0"},
		{0, mx, clientA, "slow@beta.test", "450 4.2.0"},
		{0, mx, clientA, "fast@beta.test", "250 2.1.5"},
		{30 * time.Second, mx, clientA, "alice@grey.test", "450 4.2.0"}, // still waiting
		{30 * time.Second, mx, clientA, "ALICE@grey.test", "250 2.1.5"}, // 60s after the first try
		{0, mx2, clientA, "alice@grey.test", "250 2.1.5"},               // the pair, not the host
		{0, mx, clientA, "full@grey.test", "552 5.2.2"},
		{0, mx, clientA, "nobody@grey.test", "550 5.1.1"},
		{0, mx, clientA, "slow@beta.test", "250 2.1.5"},
		{0, mx, clientB, "alice@grey.test", "450 4.2.0"}, // another client address starts over
		{0, mx, clientB, "slow@beta.test", "450 4.2.0"},
		{time.Minute, mx, clientB, "alice@grey.test", "250 2.1.5"},
	} {
		tw.clock.Advance(step.advance)
		if got := rcpt(step.ip, step.from, step.addr); !strings.HasPrefix(got, step.want) {
			t.Errorf("+%v %s RCPT %s: got %q, want %q", step.advance, step.from, step.addr, got, step.want)
		}
	}
}

func TestSMTPDomainNames(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.idn.test", SMTPUTF8: true}}, []*Domain{
		{Name: "xn--bcher-kva.test", Policy: PolicyCatchAll}, // bücher.test, published in A-labels
		{Name: "münchen.test", Policy: PolicyCatchAll},       // a world file that names it in Unicode
	})
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("MAIL FROM:<probe@verifyd.test> SMTPUTF8", "250 2.1.0")
	for _, addr := range []string{
		"a@xn--bcher-kva.test", "a@XN--BCHER-KVA.TEST", "a@bücher.test", "a@BÜCHER.test", "a@bücher.test.",
		"a@münchen.test", "a@xn--mnchen-3ya.test",
	} {
		rc.expect("RCPT TO:<"+addr+">", "250 2.1.5")
	}
	rc.expect("RCPT TO:<a@bucher.test>", "550 5.1.2 domain not handled here")
}

func TestSMTPBusy(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.busy.test", Mode: HostBusy}}, nil)
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	if got, want := rc.reply(), "421 4.7.0 mx.busy.test too busy, try later\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	rc.expectEOF()
	if !tw.srv.Log().Wait(1, 5*time.Second) {
		t.Fatal("session not logged")
	}
	if s := tw.srv.Log().Sessions()[0]; s.Outcome != OutcomeBusy {
		t.Errorf("outcome %q, want %q", s.Outcome, OutcomeBusy)
	}
}

func TestSMTPTooManyConnsPerClient(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.capped.test", MaxConnsPerClient: 2}}, nil)
	ip := tw.w.Hosts[0].IP
	var open []*rawClient
	for range 2 {
		rc := tw.raw(t, ip, clientA)
		if got := rc.reply(); !strings.HasPrefix(got, "220 ") {
			t.Fatalf("banner: %q", got)
		}
		open = append(open, rc)
	}
	over := tw.raw(t, ip, clientA)
	if got, want := over.reply(), "421 4.7.0 too many connections from your address\r\n"; got != want {
		t.Errorf("third session: got %q, want %q", got, want)
	}
	over.expectEOF()
	other := tw.raw(t, ip, clientB)
	if got := other.reply(); !strings.HasPrefix(got, "220 ") {
		t.Errorf("another client: got %q, want the banner", got)
	}
	// A closed session frees its slot.
	open[0].c.Close()
	if !tw.srv.Log().Wait(2, 5*time.Second) {
		t.Fatal("sessions not logged")
	}
	again := tw.raw(t, ip, clientA)
	if got := again.reply(); !strings.HasPrefix(got, "220 ") {
		t.Errorf("after one closed: got %q, want the banner", got)
	}
	outcomes := map[string]int{}
	for _, s := range tw.srv.Log().Sessions() {
		outcomes[s.Outcome]++
	}
	if outcomes[OutcomeTooManyConns] != 1 || outcomes[OutcomeClientClosed] != 1 {
		t.Errorf("outcomes %v", outcomes)
	}
}

func TestSMTPTarpit(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.tar.test", Mode: HostTarpit}}, nil)
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.send("EHLO probe.test\r\n")
	rc.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := rc.c.Read(make([]byte, 64))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("tarpit answered: %d bytes, %v", n, err)
	}
	rc.c.Close()
	if !tw.srv.Log().Wait(1, 5*time.Second) {
		t.Fatal("session not logged")
	}
	if s := tw.srv.Log().Sessions()[0]; s.Outcome != OutcomeTarpit || s.Helo != "" {
		t.Errorf("logged %+v", s)
	}
}

func TestSMTPRefuse(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.open.test"}, {Name: "mx.shut.test", Mode: HostRefuse}}, nil)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientA)}, Timeout: 5 * time.Second}
	_, err := d.Dial("tcp4", tw.srv.Addr(tw.w.Hosts[1].IP))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial refuse host: %v, want connection refused", err)
	}
}

func TestSMTPPortPick(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "a.test"}, {Name: "b.test"}, {Name: "c.test"}}, nil)
	if tw.srv.Port() <= 0 {
		t.Fatalf("port %d", tw.srv.Port())
	}
	for _, h := range tw.w.Hosts {
		rc := tw.raw(t, h.IP, clientA)
		if got, want := rc.reply(), "220 "+h.Name+" ESMTP mailworld\r\n"; got != want {
			t.Errorf("%s: got %q, want %q", h.Name, got, want)
		}
	}
	// A second world cannot take the same address and port.
	w2 := &World{SMTPPort: tw.srv.Port(), Hosts: []*Host{{Name: "dup.test", IP: tw.w.Hosts[1].IP}}}
	if srv, err := StartSMTP(w2, SMTPOptions{}); err == nil {
		srv.Close()
		t.Fatal("second world on the same address and port started")
	} else if !strings.HasPrefix(err.Error(), "world: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

func TestSMTPLatency(t *testing.T) {
	const slow, slower = 50 * time.Millisecond, 120 * time.Millisecond
	tw := startWorld(t, []*Host{{
		Name:           "mx.slow.test",
		Latency:        Duration(slow),
		CommandLatency: map[string]Duration{"RCPT": Duration(slower)},
	}}, []*Domain{{Name: "slow.test", Policy: PolicyCatchAll}})
	start := time.Now()
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.reply()
	if d := time.Since(start); d < slow {
		t.Errorf("banner after %v, want at least %v", d, slow)
	}
	for _, step := range []struct {
		cmd  string
		want time.Duration
	}{
		{"EHLO probe.test", slow},
		{"MAIL FROM:<>", slow},
		{"RCPT TO:<a@slow.test>", slower},
		{"QUIT", slow},
	} {
		start := time.Now()
		rc.cmd(step.cmd)
		if d := time.Since(start); d < step.want {
			t.Errorf("%s answered after %v, want at least %v", step.cmd, d, step.want)
		}
	}
}

func TestSMTPCloseInterruptsWaits(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.glacial.test", Latency: Duration(time.Hour)}}, nil)
	tw.dial(t, tw.w.Hosts[0].IP, clientA)
	time.Sleep(20 * time.Millisecond) // let the session start waiting
	done := make(chan error)
	go func() { done <- tw.srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt the latency wait")
	}
	ss := tw.srv.Log().Sessions()
	if len(ss) != 1 || ss[0].Outcome != OutcomeClosed {
		t.Errorf("logged %+v, want one closed session", ss)
	}
}

func TestSMTPIdleTimeout(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.idle.test"}}, nil, func(o *SMTPOptions) {
		o.IdleTimeout = 100 * time.Millisecond
	})
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	if got, want := rc.reply(), "421 4.4.2 mx.idle.test idle timeout, closing connection\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	rc.expectEOF()
	if !tw.srv.Log().Wait(1, 5*time.Second) {
		t.Fatal("session not logged")
	}
	if s := tw.srv.Log().Sessions()[0]; s.Outcome != OutcomeTimeout {
		t.Errorf("outcome %q, want %q", s.Outcome, OutcomeTimeout)
	}
}

func TestSMTPStartTLS(t *testing.T) {
	cert, err := Certificate()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	for _, tc := range []struct {
		tls  string
		want uint16
	}{
		{"1.2", tls.VersionTLS12},
		{"1.3", tls.VersionTLS13},
	} {
		t.Run(tc.tls, func(t *testing.T) {
			tw := startWorld(t, []*Host{{Name: "mx.tls.test", TLS: tc.tls}}, []*Domain{{Name: "tls.test", Policy: PolicyCatchAll}})
			c := tw.client(t, tw.w.Hosts[0].IP, clientA)
			if ok, _ := c.Extension("STARTTLS"); !ok {
				t.Fatal("STARTTLS not offered")
			}
			if err := c.StartTLS(&tls.Config{ServerName: "mailworld", RootCAs: roots}); err != nil {
				t.Fatal(err)
			}
			cs, ok := c.TLSConnectionState()
			if !ok || cs.Version != tc.want {
				t.Fatalf("negotiated %#x, want %#x", cs.Version, tc.want)
			}
			if ok, _ := c.Extension("STARTTLS"); ok {
				t.Error("STARTTLS offered again inside TLS")
			}
			if err := c.Mail("probe@verifyd.test"); err != nil {
				t.Fatal(err)
			}
			if err := c.Rcpt("a@tls.test"); err != nil {
				t.Fatal(err)
			}
			if err := c.Quit(); err != nil {
				t.Fatal(err)
			}
			if !tw.srv.Log().Wait(1, 5*time.Second) {
				t.Fatal("session not logged")
			}
			s := tw.srv.Log().Sessions()[0]
			if !s.TLS || s.TLSVersion != tc.want || s.TLSCipher != cs.CipherSuite || !s.Quit || len(s.Rcpts) != 1 {
				t.Errorf("logged %+v", s)
			}
		})
	}
}

func TestSMTPStartTLSResetsSession(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.tls.test", TLS: "1.3"}, {Name: "mx.plain.test"}}, nil)
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("MAIL FROM:<>", "250 2.1.0")
	// The NOOP sent in the clear with STARTTLS must not be answered in TLS
	// (RFC 3207 §6).
	rc.send("STARTTLS\r\nNOOP\r\n")
	if got := rc.reply(); got != "220 2.0.0 ready to start TLS\r\n" {
		t.Fatalf("STARTTLS: %q", got)
	}
	tc := tls.Client(rc.c, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	rc = &rawClient{t: t, c: tc, r: bufio.NewReader(tc)}
	rc.expect("MAIL FROM:<>", "503 5.5.1") // EHLO again first (RFC 3207 §4.2)
	rc.expect("STARTTLS", "503 5.5.1")
	if got := rc.cmd("EHLO probe.test"); strings.Contains(got, "STARTTLS") || !strings.HasPrefix(got, "250-mx.tls.test\r\n") {
		t.Errorf("EHLO in TLS: %q", got)
	}
	rc.expect("MAIL FROM:<>", "250 2.1.0")
	rc.expect("QUIT", "221 2.0.0")

	plain := tw.greeted(t, tw.w.Hosts[1].IP, clientA)
	plain.expect("STARTTLS", "502 5.5.1")
}

func TestSMTPEHLOKeywords(t *testing.T) {
	tw := startWorld(t, []*Host{
		{Name: "mx.full.test", Banner: "banner.full.test", EHLOName: "ehlo.full.test", TLS: "1.2", SMTPUTF8: true},
		{Name: "mx.bare.test"},
	}, nil)
	for _, tc := range []struct {
		ip, banner, ehlo string
	}{
		{tw.w.Hosts[0].IP, "220 banner.full.test ESMTP mailworld\r\n", "250-ehlo.full.test\r\n" +
			"250-PIPELINING\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250-SIZE 10485760\r\n250-STARTTLS\r\n250 SMTPUTF8\r\n"},
		{tw.w.Hosts[1].IP, "220 mx.bare.test ESMTP mailworld\r\n", "250-mx.bare.test\r\n" +
			"250-PIPELINING\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250 SIZE 10485760\r\n"},
	} {
		rc := tw.raw(t, tc.ip, clientA)
		if got := rc.reply(); got != tc.banner {
			t.Errorf("banner %q, want %q", got, tc.banner)
		}
		if got := rc.cmd("EHLO probe.test"); got != tc.ehlo {
			t.Errorf("EHLO reply\n%q, want\n%q", got, tc.ehlo)
		}
		if got, want := rc.cmd("QUIT"), strings.Replace(tc.banner, "220 ", "221 2.0.0 ", 1); !strings.HasPrefix(got, strings.Fields(want)[0]) {
			t.Errorf("QUIT: %q", got)
		}
	}
}

func TestSMTPHELOFallback(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.old.test", EHLOName: "old.test", SMTPUTF8: true}}, []*Domain{{Name: "old.test", Policy: PolicyCatchAll}})
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.reply()
	rc.expect("HELO", "501 5.5.4")
	if got := rc.cmd("HELO probe.test"); got != "250 old.test\r\n" {
		t.Errorf("HELO: %q", got)
	}
	rc.expect("MAIL FROM:<a@b.test> SMTPUTF8", "555 5.5.4") // no extensions without EHLO
	rc.expect("MAIL FROM:<a@b.test>", "250 2.1.0")
	rc.expect("RCPT TO:<x@old.test>", "250 2.1.5")
}

func TestSMTPMaxRcpts(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.few.test", MaxRcpts: 2}}, []*Domain{{
		Name: "few.test", Mailboxes: map[string]MailboxState{"a": MailboxOK},
	}})
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("MAIL FROM:<>", "250")
	rc.expect("RCPT TO:<a@few.test>", "250 2.1.5")
	rc.expect("RCPT TO:<b@few.test>", "550 5.1.1") // counts too
	rc.expect("RCPT TO:<a@few.test>", "452 4.5.3 too many recipients")
	rc.expect("RSET", "250 2.0.0")
	rc.expect("MAIL FROM:<>", "250")
	rc.expect("RCPT TO:<a@few.test>", "250 2.1.5") // a new transaction, a new count
}

func TestSMTPUTF8(t *testing.T) {
	box := map[string]MailboxState{"jösé": MailboxOK}
	tw := startWorld(t, []*Host{{Name: "mx.ascii.test"}, {Name: "mx.utf8.test", SMTPUTF8: true}},
		[]*Domain{{Name: "intl.test", Mailboxes: box}})

	ascii := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	ascii.expect("MAIL FROM:<probe@verifyd.test> SMTPUTF8", "555 5.5.4")
	ascii.expect("MAIL FROM:<prøbe@verifyd.test>", "553 5.6.7")
	ascii.expect("MAIL FROM:<probe@verifyd.test>", "250 2.1.0")
	ascii.expect("RCPT TO:<jösé@intl.test>", "553 5.6.7 UTF-8 addresses not supported")

	u := tw.greeted(t, tw.w.Hosts[1].IP, clientA)
	u.expect("MAIL FROM:<probe@verifyd.test>", "250 2.1.0")
	u.expect("RCPT TO:<jösé@intl.test>", "553 5.6.7") // no SMTPUTF8 on MAIL
	u.expect("RSET", "250")
	u.expect("MAIL FROM:<prøbe@verifyd.test> SMTPUTF8", "250 2.1.0")
	u.expect("RCPT TO:<jösé@intl.test>", "250 2.1.5")
	u.expect("RCPT TO:<JÖSÉ@intl.test>", "250 2.1.5")
	u.expect("RCPT TO:<josé@intl.test>", "550 5.1.1")
}

func TestSMTPPipelining(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.pipe.test"}}, []*Domain{{
		Name: "pipe.test", Mailboxes: map[string]MailboxState{"alice": MailboxOK},
	}})
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.reply()
	rc.send("EHLO probe.test\r\nMAIL FROM:<p@verifyd.test>\r\nRCPT TO:<alice@pipe.test>\r\n" +
		"RCPT TO:<bob@pipe.test>\r\nRSET\r\nNOOP\r\nQUIT\r\n")
	got, err := io.ReadAll(rc.r)
	if err != nil {
		t.Fatal(err)
	}
	want := "250-mx.pipe.test\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250 SIZE 10485760\r\n" +
		"250 2.1.0 ok\r\n250 2.1.5 ok\r\n550 5.1.1 no such user\r\n250 2.0.0 ok\r\n250 2.0.0 ok\r\n" +
		"221 2.0.0 mx.pipe.test closing\r\n"
	if string(got) != want {
		t.Errorf("transcript\n%q, want\n%q", got, want)
	}
}

func TestSMTPLineTooLong(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.long.test"}}, nil)
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("NOOP "+strings.Repeat("x", 505), "250 2.0.0") // 512 octets with CRLF
	rc.expect("NOOP "+strings.Repeat("x", 506), "500 5.5.2 line too long")
	rc.expect("NOOP "+strings.Repeat("x", 20000), "500 5.5.2 line too long") // beyond the read buffer
	rc.expect("NOOP", "250 2.0.0")
}

func TestSMTPSequenceAndSyntaxErrors(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.seq.test"}}, []*Domain{{Name: "seq.test", Policy: PolicyCatchAll}})
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.reply()
	for _, step := range []struct{ cmd, want string }{
		{"MAIL FROM:<a@b.test>", "503 5.5.1"},
		{"RCPT TO:<a@seq.test>", "503 5.5.1"},
		{"DATA", "503 5.5.1"},
		{"EHLO", "501 5.5.4"},
		{"FOO bar", "500 5.5.2"},
		{"EXTRAORDINARILY", "500 5.5.2"},
		{"VRFY", "501 5.5.4"},
		{"VRFY alice", "252 2.1.5"},
		{"NOOP", "250 2.0.0"},
		{"ehlo probe.test", "250-mx.seq.test"},
		{"RCPT TO:<a@seq.test>", "503 5.5.1"},
		{"MAIL FROM:a@b.test", "501 5.5.4"},
		{"MAIL TO:<a@b.test>", "501 5.5.4"},
		{"MAIL FROM:<a@@>", "501 5.1.7"},
		{"MAIL FROM:<a@b.test> FOO=1", "555 5.5.4"},
		{"MAIL FROM:<a@b.test> SIZE=99999999999", "552 5.3.4"},
		{"mail from:<a@b.test> SIZE=100 BODY=8BITMIME", "250 2.1.0"},
		{"MAIL FROM:<a@b.test>", "503 5.5.1"},
		{"DATA", "554 5.5.1 no valid recipients"},
		{"RCPT TO:a@seq.test", "501 5.5.4"},
		{"RCPT TO:<a b@seq.test>", "501 5.5.4"},
		{"RCPT TO:<a..b@seq.test>", "501 5.1.3"},
		{"RCPT TO:<a@>", "501 5.1.3"},
		{"RCPT TO:<@seq.test>", "501 5.5.4"}, // a source route without a mailbox
		{"RCPT TO:<a@seq.test> NOTIFY=NEVER", "555 5.5.4"},
		{"RCPT TO:<@relay.test:a@seq.test>", "250 2.1.5"}, // source route ignored
		{"rcpt to: <a@seq.test>", "250 2.1.5"},
		{"RSET x", "501 5.5.4"},
		{"RSET", "250 2.0.0"},
		{"RCPT TO:<a@seq.test>", "503 5.5.1"},
	} {
		rc.expect(step.cmd, step.want)
	}
}

func TestSMTPData(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.data.test"}}, []*Domain{{Name: "data.test", Policy: PolicyCatchAll}})
	c := tw.client(t, tw.w.Hosts[0].IP, clientA)
	for range 2 { // the end of DATA starts a new transaction
		if err := c.Mail("p@verifyd.test"); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt("a@data.test"); err != nil {
			t.Fatal(err)
		}
		wc, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(wc, "Subject: hi\r\n\r\n.leading dot\r\n%s\r\n", strings.Repeat("y", 3000))
		if err := wc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
}

func TestSMTPQuitServerClosesFirst(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.bye.test", Banner: "bye.test"}}, nil)
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	if got, want := rc.cmd("QUIT"), "221 2.0.0 bye.test closing\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	rc.expectEOF() // the client has not closed: the server did
	if !tw.srv.Log().Wait(1, 5*time.Second) {
		t.Fatal("session not logged")
	}
	if s := tw.srv.Log().Sessions()[0]; !s.Quit || s.Outcome != OutcomeOK {
		t.Errorf("logged %+v", s)
	}
}

func TestSessionLogContents(t *testing.T) {
	tw := startWorld(t, []*Host{{Name: "mx.log.test"}}, []*Domain{{
		Name: "log.test", Mailboxes: map[string]MailboxState{"alice": MailboxOK},
	}})
	ip := tw.w.Hosts[0].IP
	var ports []int
	for _, from := range []string{clientA, clientC} {
		rc := tw.greeted(t, ip, from)
		ports = append(ports, rc.c.LocalAddr().(*net.TCPAddr).Port)
		rc.expect("MAIL FROM:<probe@verifyd.test>", "250")
		rc.expect("RCPT TO:<alice@log.test>", "250")
		rc.expect("RCPT TO:<bob@log.test>", "550")
		rc.expect("QUIT", "221")
		rc.expectEOF()
	}
	rc := tw.greeted(t, ip, clientB)
	rc.c.Close() // no QUIT
	if !tw.srv.Log().Wait(3, 5*time.Second) {
		t.Fatal("sessions not logged")
	}
	ss := tw.srv.Log().Sessions()
	if len(ss) != 3 || tw.srv.Log().Len() != 3 {
		t.Fatalf("%d sessions logged, want 3", len(ss))
	}
	wantRcpts := []RcptResult{{"alice@log.test", 250, "2.1.5"}, {"bob@log.test", 550, "5.1.1"}}
	for i, from := range []string{clientA, clientC} {
		s := ss[i]
		if s.HostName != "mx.log.test" || s.HostIP != ip || s.Client != from || s.ClientPort != ports[i] ||
			s.Helo != "probe.test" || s.MailFrom != "probe@verifyd.test" || !s.Quit || s.Outcome != OutcomeOK ||
			s.TLS || s.Start.IsZero() || s.End.Before(s.Start) {
			t.Errorf("session %d: %+v", i, s)
		}
		if fmt.Sprint(s.Rcpts) != fmt.Sprint(wantRcpts) {
			t.Errorf("session %d rcpts %v, want %v", i, s.Rcpts, wantRcpts)
		}
	}
	if s := ss[2]; s.Client != clientB || s.Quit || s.Outcome != OutcomeClientClosed {
		t.Errorf("unfinished session: %+v", s)
	}
	if !(ss[0].ID < ss[1].ID && ss[1].ID < ss[2].ID) {
		t.Errorf("not in start order: %d %d %d", ss[0].ID, ss[1].ID, ss[2].ID)
	}
	st := tw.srv.Log().Stats()
	if st.Sessions != 3 || st.Rcpts != 4 || st.Clients[clientA] != 1 || st.Outcomes[OutcomeOK] != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestSessionRefusedClient: the log marks the sessions in which a host
// refused the client itself (a 554 greeting, a MAIL FROM policy, a domain
// that refuses every recipient, a blocked client), and counts sessions,
// RCPTs and such sessions per client; a refusal of a mailbox is not one.
func TestSessionRefusedClient(t *testing.T) {
	tw := startWorld(t, []*Host{
		{Name: "mx.plain.test"},
		{Name: "mx.blocked.test", Mode: HostBlocked},
		{Name: "mx.nonull.test", MailPolicy: MailRefuseNull},
		{Name: "mx.bl.test", BlockedClients: []string{clientB}},
	}, []*Domain{
		{Name: "plain.test", MX: []MX{{10, "mx.plain.test"}}, UnknownReply: "550 5.7.1 Access denied", NoPostmaster: true},
		{Name: "reject.test", MX: []MX{{10, "mx.plain.test"}}, Policy: PolicyReject},
		{Name: "bl.test", MX: []MX{{10, "mx.bl.test"}}},
	})
	ip := func(i int) string { return tw.w.Hosts[i].IP }
	session := func(host int, from, mail string, rcpts ...string) {
		rc := tw.greeted(t, ip(host), from)
		rc.cmd("MAIL FROM:<" + mail + ">")
		for _, r := range rcpts {
			rc.cmd("RCPT TO:<" + r + ">")
		}
		rc.expect("QUIT", "221")
	}
	session(0, clientA, "probe@verifyd.test", "zed@plain.test", "postmaster@plain.test") // a mailbox refused: no
	session(0, clientA, "probe@verifyd.test", "zed@reject.test")                         // every recipient refused
	session(2, clientA, "", "zed@plain.test")                                            // null sender refused (the RCPT gets 503)
	session(2, clientB, "probe@verifyd.test", "zed@plain.test")                          // a sender it takes
	session(3, clientB, "probe@verifyd.test", "ann@bl.test")                             // a blocked client
	session(3, clientC, "probe@verifyd.test", "ann@bl.test")
	rc := tw.raw(t, ip(1), clientC)
	if got := rc.reply(); !strings.HasPrefix(got, "554 ") {
		t.Fatalf("banner %q", got)
	}
	rc.expect("QUIT", "221")
	if !tw.srv.Log().Wait(7, 5*time.Second) {
		t.Fatal("sessions not logged")
	}
	var refused []bool
	for _, s := range tw.srv.Log().Sessions() {
		refused = append(refused, s.RefusedClient)
	}
	if want := []bool{false, true, true, false, true, false, true}; fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	st := tw.srv.Log().Stats()
	for _, c := range []struct {
		client                   string
		sessions, rcpts, refused uint64
	}{{clientA, 3, 4, 2}, {clientB, 2, 2, 1}, {clientC, 2, 1, 1}} {
		if st.Clients[c.client] != c.sessions || st.ClientRcpts[c.client] != c.rcpts || st.ClientRefused[c.client] != c.refused {
			t.Errorf("%s: %d sessions, %d RCPTs, %d refusing it; want %d, %d, %d", c.client,
				st.Clients[c.client], st.ClientRcpts[c.client], st.ClientRefused[c.client], c.sessions, c.rcpts, c.refused)
		}
	}
}

func TestSMTPDebugTranscript(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tw := startWorld(t, []*Host{{Name: "mx.debug.test"}}, nil, func(o *SMTPOptions) { o.Logger = logger })
	rc := tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	rc.expect("QUIT", "221")
	rc.expectEOF()
	if err := tw.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`line="EHLO probe.test"`, `250-PIPELINING\r\n`, `line="221 2.0.0 mx.debug.test closing"`, `outcome=ok`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("debug log lacks %s:\n%s", want, buf.String())
		}
	}
}

func TestSessionLogBound(t *testing.T) {
	l := NewSessionLogLimit(3)
	if l.Wait(1, 10*time.Millisecond) {
		t.Error("Wait on an empty log succeeded")
	}
	go func() {
		for i := range 5 {
			l.Add(Session{ID: l.newID(), Client: "127.0.0." + strconv.Itoa(i%2+1), Outcome: OutcomeOK, Rcpts: make([]RcptResult, 2)})
		}
	}()
	if !l.Wait(5, 5*time.Second) {
		t.Fatal("Wait timed out")
	}
	ss := l.Sessions()
	if l.Len() != 3 || len(ss) != 3 || ss[0].ID != 3 || ss[2].ID != 5 {
		t.Errorf("kept %+v, want sessions 3..5", ss)
	}
	st := l.Stats()
	if st.Sessions != 5 || st.Dropped != 2 || st.Rcpts != 10 || st.Outcomes[OutcomeOK] != 5 || st.Clients["127.0.0.1"] != 3 {
		t.Errorf("stats %+v", st)
	}
	l.Reset()
	if st := l.Stats(); l.Len() != 0 || len(l.Sessions()) != 0 || st.Sessions != 0 || len(st.Clients) != 0 {
		t.Errorf("after Reset: len %d, stats %+v", l.Len(), st)
	}
}

func TestSMTPCloseLeavesNoGoroutines(t *testing.T) {
	tw := startWorld(t, []*Host{
		{Name: "mx.normal.test"}, {Name: "mx.tar.test", Mode: HostTarpit},
		{Name: "mx.slow.test", Latency: Duration(time.Hour)}, {Name: "mx.tls.test", TLS: "1.3"},
	}, nil)
	tw.greeted(t, tw.w.Hosts[0].IP, clientA)
	tw.dial(t, tw.w.Hosts[1].IP, clientA)
	tw.dial(t, tw.w.Hosts[2].IP, clientA)
	pending := tw.greeted(t, tw.w.Hosts[3].IP, clientA)
	pending.expect("STARTTLS", "220") // and never shake hands
	// Four listeners and four sessions run (other tests' servers may too).
	waitServerGoroutines(t, "sessions did not start", func(n int) bool { return n >= 8 })
	if err := tw.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tw.srv.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if n := tw.srv.Log().Len(); n != 4 {
		t.Errorf("%d sessions logged, want 4", n)
	}
	// Close waits for its goroutines, so none of its kind may be left once
	// the servers of concurrently running tests are discounted: this test
	// is not parallel, so there are none. A session goroutine may still be
	// on its way out of handle after its deferred wg.Done woke Close, so
	// give the scheduler a moment rather than counting at once.
	waitServerGoroutines(t, "server goroutines left after Close", func(n int) bool { return n == 0 })
}

// BenchmarkSMTPSession measures one whole session over loopback: connect,
// banner, EHLO, MAIL, RCPT, QUIT and the server's close.
func BenchmarkSMTPSession(b *testing.B) {
	tw := startWorld(b, []*Host{{Name: "mx.bench.test"}}, []*Domain{{
		Name: "bench.test", Mailboxes: map[string]MailboxState{"alice": MailboxOK},
	}}, func(o *SMTPOptions) { o.Log = NewSessionLogLimit(1000) })
	addr := tw.srv.Addr(tw.w.Hosts[0].IP)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientA)}}
	buf := make([]byte, 1024)
	readReply := func(r *bufio.Reader) {
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if len(line) < 4 || line[3] != '-' {
				return
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := d.Dial("tcp4", addr)
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(c)
		readReply(r)
		for _, cmd := range []string{"EHLO probe.test\r\n", "MAIL FROM:<p@verifyd.test>\r\n", "RCPT TO:<alice@bench.test>\r\n", "QUIT\r\n"} {
			io.WriteString(c, cmd)
			readReply(r)
		}
		if _, err := r.Read(buf); err != io.EOF {
			b.Fatalf("want EOF, got %v", err)
		}
		c.Close()
	}
}

// TestSMTPLatencyPerRoundTrip: commands pipelined in one write (RFC 2920)
// are answered after one latency wait, not one per reply, as over a real
// network; a command sent alone waits again.
func TestSMTPLatencyPerRoundTrip(t *testing.T) {
	const lat = 300 * time.Millisecond
	tw := startWorld(t, []*Host{{Name: "mx.far.test", Latency: Duration(lat)}},
		[]*Domain{{Name: "far.test", Policy: PolicyCatchAll}})
	rc := tw.raw(t, tw.w.Hosts[0].IP, clientA)
	rc.reply()
	rc.cmd("EHLO probe.test")
	start := time.Now()
	rc.send("MAIL FROM:<>\r\nRCPT TO:<a@far.test>\r\nRCPT TO:<b@far.test>\r\n")
	for range 3 {
		if r := rc.reply(); !strings.HasPrefix(r, "250") {
			t.Fatalf("pipelined reply %q", r)
		}
	}
	// One wait, not three: counted by the world, not timed, so a loaded
	// machine cannot make it fail; the time is only a lower bound.
	if d := time.Since(start); d < lat {
		t.Errorf("three pipelined replies took %v, want at least one latency (%v)", d, lat)
	}
	start = time.Now()
	rc.cmd("RSET")
	if d := time.Since(start); d < lat {
		t.Errorf("a command alone answered after %v, want at least %v", d, lat)
	}
	rc.cmd("QUIT")
	if !tw.srv.Log().Wait(1, 30*time.Second) {
		t.Fatal("the session did not end")
	}
	// Banner, EHLO, the pipelined group, RSET, QUIT.
	if s := tw.srv.Log().Sessions()[0]; s.RoundTrips != 5 {
		t.Errorf("%d latency waits, want 5 (one for the three pipelined replies)", s.RoundTrips)
	}
}
