package world

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestWorldAgreesWithExpect starts a generated world with every behaviour and
// checks, for every expected address, that what a client learns over real
// DNS queries and real SMTP sessions is what World.Expect says. It is the
// proof that the world is a sound oracle for accuracy benchmarks.
func TestWorldAgreesWithExpect(t *testing.T) {
	w, exp, err := Generate(GenOptions{
		Domains: 240, Seed: 11, CatchAll: 0.08, Greylist: 0.08, Reject: 0.04, Tarpit: 0.02,
		Refuse: 0.04, Busy: 0.04, NullMX: 0.04, NoMX: 0.04, ImplicitMX: 0.04, NXDomain: 0.04,
		ServFail: 0.04, MailboxFull: 0.05, MailboxDisabled: 0.05, STARTTLS: 0.3, Auth: 0.3,
		RoleMailbox: true, FirstIP: "127.61.0.1", AddressesPerDomain: 4, MailboxesPerDomain: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	r, err := Start(w, Options{DNSAddr: "127.0.0.1:0", SMTPPort: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	o := &oracle{dns: r.DNS.Addr(), port: r.SMTP.Port(), clock: clock}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var mu sync.Mutex
	seen := map[string]int{}
	for _, e := range exp {
		wg.Add(1)
		sem <- struct{}{}
		go func(e Expectation) {
			defer wg.Done()
			defer func() { <-sem }()
			status, reason := o.judge(e.Email)
			if e.Role && status == StatusValid {
				reason = ReasonRoleBased
			}
			if status != e.Status || reason != e.Reason {
				t.Errorf("%s: the world answers %s/%s, Expect says %s/%s", e.Email, status, reason, e.Status, e.Reason)
			}
			mu.Lock()
			seen[status+"/"+reason]++
			mu.Unlock()
		}(e)
	}
	wg.Wait()
	if len(seen) < 10 {
		t.Errorf("only %d distinct outcomes exercised: %v", len(seen), seen)
	}
	t.Logf("outcomes: %v", seen)
}

// oracle is a minimal verifier written for this test only: plain DNS
// queries and a line-by-line SMTP client.
type oracle struct {
	dns   string
	port  int
	clock *fakeClock
}

func (o *oracle) query(name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, o.dns)
	return r, err
}

func (o *oracle) judge(email string) (string, string) {
	domain := email[strings.LastIndexByte(email, '@')+1:]
	mx, err := o.query(domain, dns.TypeMX)
	if err != nil {
		return StatusUnknown, ReasonTimeout
	}
	switch mx.Rcode {
	case dns.RcodeNameError:
		return StatusInvalid, ReasonDomainNotFound
	case dns.RcodeSuccess:
	default:
		return StatusUnknown, ReasonConnection
	}
	var hosts []string
	for _, rr := range mx.Answer {
		if m, ok := rr.(*dns.MX); ok {
			if m.Mx == "." {
				return StatusInvalid, ReasonNoMX
			}
			hosts = append(hosts, m.Mx)
		}
	}
	if len(hosts) == 0 {
		hosts = []string{domain} // implicit MX, RFC 5321 §5.1
	}
	var ips []string
	for _, h := range hosts {
		a, err := o.query(h, dns.TypeA)
		if err != nil {
			return StatusUnknown, ReasonTimeout
		}
		for _, rr := range a.Answer {
			if a, ok := rr.(*dns.A); ok {
				ips = append(ips, a.A.String())
			}
		}
	}
	if len(ips) == 0 {
		return StatusInvalid, ReasonNoMX
	}
	for _, ip := range ips {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", ip, o.port), 5*time.Second)
		if err != nil {
			continue // refused: try the next MX
		}
		defer conn.Close()
		return o.session(conn, email, domain)
	}
	return StatusUnknown, ReasonConnection
}

func (o *oracle) session(conn net.Conn, email, domain string) (string, string) {
	br := bufio.NewReader(conn)
	read := func(wait time.Duration) (string, error) {
		conn.SetReadDeadline(time.Now().Add(wait))
		var last string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return "", err
			}
			last = line
			if len(line) < 4 || line[3] != '-' {
				return strings.TrimRight(last, "\r\n"), nil
			}
		}
	}
	cmd := func(c string) string {
		fmt.Fprintf(conn, "%s\r\n", c)
		reply, err := read(10 * time.Second)
		if err != nil {
			return "000"
		}
		return reply
	}
	// A tarpit never greets; two seconds tells it from a loaded machine.
	banner, err := read(2 * time.Second)
	if err != nil {
		return StatusUnknown, ReasonTimeout
	}
	if strings.HasPrefix(banner, "421") {
		return StatusUnknown, ReasonConnection
	}
	cmd("EHLO oracle.test")
	cmd("MAIL FROM:<>")
	rcpt := func() string { return cmd("RCPT TO:<" + email + ">") }
	reply := rcpt()
	for strings.HasPrefix(reply, "450 4.2.0") {
		o.clock.Advance(time.Minute) // greylisting: come back later
		reply = rcpt()
	}
	switch {
	case strings.HasPrefix(reply, "250"):
		if strings.HasPrefix(cmd("RCPT TO:<no-such-mailbox-7f3a@"+domain+">"), "250") {
			return StatusRisky, ReasonCatchAll
		}
		return StatusValid, ReasonOK
	case strings.HasPrefix(reply, "550 5.1.1"):
		return StatusInvalid, ReasonMailboxNotFound
	case strings.HasPrefix(reply, "550 5.2.1"):
		return StatusInvalid, ReasonSMTPRejected
	case strings.HasPrefix(reply, "552 5.2.2"):
		return StatusRisky, ReasonSMTPRejected
	case strings.HasPrefix(reply, "550 5.7.1"):
		return StatusUnknown, ReasonSMTPRejected
	}
	return "?", reply
}
