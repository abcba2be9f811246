package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// answerA answers every A query with 192.0.2.1 (TTL 300), everything else
// with NODATA and a SOA.
func answerA(t testing.TB) func(*testServer, dns.ResponseWriter, *dns.Msg) {
	a := rr(t, "x. 300 IN A 192.0.2.1").(*dns.A)
	neg := soa(t, "test.", 300, 60)
	return func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		if q.Qtype != dns.TypeA {
			reply(w, req, dns.RcodeSuccess, neg)
			return
		}
		c := *a
		c.Hdr.Name = q.Name
		reply(w, req, dns.RcodeSuccess, &c)
	}
}

func TestTTLExpiry(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		reply(w, req, dns.RcodeSuccess, rr(t, "ttl.test. 60 IN A 192.0.2.1"))
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, MinTTL: time.Second})
	ctx := context.Background()

	res, err := r.LookupIP(ctx, "ip4", "ttl.test")
	if err != nil || res.Status != StatusAnswer || len(res.IPs) != 1 || res.IPs[0] != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("first lookup: %+v, %v", res, err)
	}
	if res.TTL != 60*time.Second {
		t.Errorf("TTL %v, want 60s", res.TTL)
	}
	clock.Advance(59 * time.Second)
	res, err = r.LookupIP(ctx, "ip4", "ttl.test")
	if err != nil || res.TTL != time.Second {
		t.Errorf("after 59s: TTL %v (%v), want 1s", res.TTL, err)
	}
	if n := s.count("ttl.test", dns.TypeA, ""); n != 1 {
		t.Errorf("%d upstream queries within the TTL, want 1", n)
	}
	clock.Advance(time.Second)
	res, err = r.LookupIP(ctx, "ip4", "TTL.test.")
	if err != nil || res.TTL != 60*time.Second {
		t.Errorf("after expiry: TTL %v (%v), want a fresh 60s", res.TTL, err)
	}
	if n := s.count("ttl.test", dns.TypeA, ""); n != 2 {
		t.Errorf("%d upstream queries after expiry, want 2", n)
	}
}

func TestTTLClamp(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		switch req.Question[0].Name {
		case "short.test.":
			reply(w, req, dns.RcodeSuccess, rr(t, "short.test. 0 IN TXT \"zero\""))
		case "long.test.":
			reply(w, req, dns.RcodeSuccess, rr(t, "long.test. 604800 IN TXT \"week\""))
		}
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, MinTTL: 10 * time.Second, MaxTTL: time.Hour})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"short.test", 10 * time.Second}, {"long.test", time.Hour}} {
		res, err := r.LookupTXT(ctx, tc.name)
		if err != nil || res.TTL != tc.ttl {
			t.Errorf("%s: TTL %v (%v), want %v", tc.name, res.TTL, err, tc.ttl)
		}
	}
	clock.Advance(9 * time.Second)
	if _, err := r.LookupTXT(ctx, "short.test"); err != nil {
		t.Fatal(err)
	}
	if n := s.count("short.test", dns.TypeTXT, ""); n != 1 {
		t.Errorf("TTL 0 raised to MinTTL 10s: %d queries within 9s, want 1", n)
	}
}

func TestNegativeCaching(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		switch req.Question[0].Name {
		case "nx.test.":
			reply(w, req, dns.RcodeNameError, soa(t, "test.", 300, 60))
		case "nodata.test.":
			reply(w, req, dns.RcodeSuccess, soa(t, "test.", 30, 3600)) // SOA TTL below MINIMUM
		case "nosoa.test.":
			reply(w, req, dns.RcodeNameError)
		case "longneg.test.":
			reply(w, req, dns.RcodeNameError, soa(t, "test.", 86400, 86400))
		}
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, MinTTL: time.Second, NegativeMaxTTL: 5 * time.Minute})
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		status  Status
		ttl     time.Duration
		wantErr error
	}{
		{"nx.test", StatusNXDomain, 60 * time.Second, ErrNXDomain},     // SOA MINIMUM
		{"nodata.test", StatusNoData, 30 * time.Second, ErrNoData},     // SOA TTL
		{"nosoa.test", StatusNXDomain, 0, ErrNXDomain},                 // not cached
		{"longneg.test", StatusNXDomain, 5 * time.Minute, ErrNXDomain}, // capped
	} {
		res, err := r.LookupMX(ctx, tc.name)
		if res.Status != tc.status || res.TTL != tc.ttl || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: status %v TTL %v err %v, want %v %v %v", tc.name, res.Status, res.TTL, err, tc.status, tc.ttl, tc.wantErr)
		}
		var e *Error
		if !errors.As(err, &e) || e.Temporary() || e.Status != tc.status || e.Name != tc.name || e.Type != dns.TypeMX {
			t.Errorf("%s: error %#v", tc.name, err)
		}
	}
	clock.Advance(29 * time.Second)
	for _, n := range []string{"nx.test", "nodata.test", "nosoa.test"} {
		_, _ = r.LookupMX(ctx, n)
	}
	for n, want := range map[string]int{"nx.test": 1, "nodata.test": 1, "nosoa.test": 2} {
		if got := s.count(n, dns.TypeMX, ""); got != want {
			t.Errorf("%s: %d upstream queries, want %d", n, got, want)
		}
	}
	clock.Advance(2 * time.Second) // nodata.test expired at 30s
	if _, err := r.LookupMX(ctx, "nodata.test"); !errors.Is(err, ErrNoData) {
		t.Fatal(err)
	}
	if got := s.count("nodata.test", dns.TypeMX, ""); got != 2 {
		t.Errorf("nodata.test after its negative TTL: %d queries, want 2", got)
	}
}

func TestNXDomainVsNoData(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		neg := soa(t, "test.", 300, 300)
		q := req.Question[0]
		switch {
		case q.Name == "exists.test." && q.Qtype == dns.TypeA:
			reply(w, req, dns.RcodeSuccess, rr(t, "exists.test. 300 IN A 192.0.2.7"))
		case q.Name == "exists.test.":
			reply(w, req, dns.RcodeSuccess, neg)
		case q.Name == "alias.test.":
			// A CNAME to a name without records of the type.
			reply(w, req, dns.RcodeSuccess, rr(t, "alias.test. 300 IN CNAME exists.test."), neg)
		case q.Name == "dangling.test.":
			// A CNAME to a name that does not exist (RFC 6604).
			reply(w, req, dns.RcodeNameError, rr(t, "dangling.test. 300 IN CNAME gone.test."), neg)
		default:
			reply(w, req, dns.RcodeNameError, neg)
		}
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		qtype  uint16
		status Status
		rcode  int
		err    error
	}{
		{"exists.test", dns.TypeA, StatusAnswer, dns.RcodeSuccess, nil},
		{"exists.test", dns.TypeMX, StatusNoData, dns.RcodeSuccess, ErrNoData},
		{"missing.test", dns.TypeMX, StatusNXDomain, dns.RcodeNameError, ErrNXDomain},
		{"alias.test", dns.TypeMX, StatusNoData, dns.RcodeSuccess, ErrNoData},
		{"alias.test", dns.TypeA, StatusNoData, dns.RcodeSuccess, ErrNoData}, // the server gave no A after the CNAME
		{"dangling.test", dns.TypeA, StatusNXDomain, dns.RcodeNameError, ErrNXDomain},
	} {
		a, err := r.Lookup(ctx, tc.name, tc.qtype)
		if a.Status != tc.status || a.Rcode != tc.rcode || (tc.err == nil) != (err == nil) || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s %s: status %v rcode %d err %v; want %v %d %v", tc.name, typeString(tc.qtype), a.Status, a.Rcode, err, tc.status, tc.rcode, tc.err)
		}
		if errors.Is(err, ErrTemporary) {
			t.Errorf("%s %s: %v is a temporary failure", tc.name, typeString(tc.qtype), err)
		}
	}
	// The typed views agree with the raw one.
	if res, err := r.LookupIP(ctx, "ip", "exists.test"); err != nil || len(res.IPs) != 1 {
		t.Errorf("LookupIP ip exists.test: %+v %v (A answers, AAAA is NODATA)", res, err)
	}
	if res, err := r.LookupIP(ctx, "ip6", "exists.test"); res.Status != StatusNoData || !errors.Is(err, ErrNoData) {
		t.Errorf("LookupIP ip6 exists.test: %+v %v", res, err)
	}
	if res, err := r.LookupIP(ctx, "ip", "missing.test"); res.Status != StatusNXDomain || !errors.Is(err, ErrNXDomain) {
		t.Errorf("LookupIP ip missing.test: %+v %v", res, err)
	}
}

func TestCNAMEChain(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		reply(w, req, dns.RcodeSuccess,
			rr(t, "www.test. 600 IN CNAME Edge.CDN.test."),
			rr(t, "edge.cdn.test. 120 IN CNAME host.cdn.test."),
			rr(t, "host.cdn.test. 300 IN A 192.0.2.9"),
			rr(t, "unrelated.test. 300 IN A 192.0.2.66"),
		)
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: newFakeClock().Now})
	res, err := r.LookupIP(context.Background(), "ip4", "www.test")
	if err != nil || !slices.Equal(res.IPs, []netip.Addr{netip.MustParseAddr("192.0.2.9")}) {
		t.Fatalf("%+v %v: want only the address at the end of the chain", res, err)
	}
	if res.TTL != 120*time.Second {
		t.Errorf("TTL %v, want the chain's smallest, 120s", res.TTL)
	}
	a, _ := r.Lookup(context.Background(), "www.test", dns.TypeA)
	if len(a.Records) != 4 {
		t.Errorf("raw answer has %d records, want the whole section (4)", len(a.Records))
	}
}

func TestDedup(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(s *testServer, w dns.ResponseWriter, req *dns.Msg) {
		s.sleep(100 * time.Millisecond)
		reply(w, req, dns.RcodeSuccess,
			rr(t, "dedup.test. 300 IN MX 20 mx2.dedup.test."),
			rr(t, "dedup.test. 300 IN MX 10 mx1.dedup.test."))
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	joins := inflightJoins.Get()

	const n = 100
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]MXResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = r.LookupMX(context.Background(), "dedup.test")
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(results[i].MX) != 2 || results[i].MX[0].Host != "mx1.dedup.test" {
			t.Fatalf("lookup %d: %+v %v", i, results[i], errs[i])
		}
	}
	if got := s.count("dedup.test", dns.TypeMX, ""); got != 1 {
		t.Errorf("%d concurrent lookups sent %d upstream queries, want 1", n, got)
		s.mu.Lock()
		for _, q := range s.queries {
			t.Logf("query %s %s id %d from %s", q.name, q.proto, q.req.Id, q.from)
		}
		s.mu.Unlock()
	}
	if inflightJoins.Get() == joins {
		t.Error("no lookup joined the query in flight")
	}
}

// TestDedupCallerGivesUp: the caller that started a query leaves when its
// context ends; the query goes on for the others.
func TestDedupCallerGivesUp(t *testing.T) {
	checkLeaks(t)
	asked := make(chan struct{}, 1)
	s := startServer(t, func(s *testServer, w dns.ResponseWriter, req *dns.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
		s.sleep(300 * time.Millisecond)
		reply(w, req, dns.RcodeSuccess, rr(t, "slow.test. 300 IN A 192.0.2.3"))
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Timeout: 5 * time.Second})

	// The impatient caller starts the query.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	impatient := make(chan error, 1)
	go func() {
		_, err := r.LookupIP(ctx, "ip4", "slow.test")
		impatient <- err
	}()
	<-asked
	res, err := r.LookupIP(context.Background(), "ip4", "slow.test")
	if err != nil || res.Status != StatusAnswer {
		t.Fatalf("patient caller: %+v %v", res, err)
	}
	err = <-impatient
	if !errors.Is(err, ErrTemporary) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("impatient caller: %v, want a temporary failure wrapping context.DeadlineExceeded", err)
	}
	if got := s.count("slow.test", dns.TypeA, ""); got != 1 {
		t.Errorf("%d upstream queries, want 1", got)
	}
}

func TestTCPFallback(t *testing.T) {
	checkLeaks(t)
	var txts []dns.RR
	for i := range 40 {
		txts = append(txts, rr(t, fmt.Sprintf("big.test. 300 IN TXT \"%03d %s\"", i, strings.Repeat("x", 100))))
	}
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if w.LocalAddr().Network() == "udp" {
			m := new(dns.Msg)
			m.SetReply(req)
			m.Truncated = true
			_ = w.WriteMsg(m)
			return
		}
		rrs := make([]dns.RR, len(txts))
		for i, x := range txts {
			rrs[i] = dns.Copy(x)
			rrs[i].Header().Name = req.Question[0].Name
		}
		reply(w, req, dns.RcodeSuccess, rrs...)
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	before := tcpFallbacks.Get()
	res, err := r.LookupTXT(context.Background(), "big.test")
	if err != nil || len(res.TXT) != 40 {
		t.Fatalf("%d records, %v; want 40", len(res.TXT), err)
	}
	for i, x := range res.TXT {
		if want := fmt.Sprintf("%03d %s", i, strings.Repeat("x", 100)); x != want {
			t.Fatalf("record %d = %q", i, x)
		}
	}
	if got := tcpFallbacks.Get() - before; got != 1 {
		t.Errorf("tcp fallbacks metric grew by %d, want 1", got)
	}
	if _, err := r.LookupTXT(context.Background(), "big2.test"); err != nil {
		t.Fatal(err)
	}
	if u, c := s.count("big.test", dns.TypeTXT, "udp"), s.count("big.test", dns.TypeTXT, "tcp"); u != 1 || c != 1 {
		t.Errorf("udp %d, tcp %d queries; want one each", u, c)
	}
	if n := s.sources("tcp"); n != 1 {
		t.Errorf("two TCP fallbacks used %d connections, want 1 (reused)", n)
	}
}

func TestFailoverPastDeadUpstreams(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	hole := startBlackHole(t)
	dead := deadAddr(t)
	good := startServer(t, answerA(t))
	r := newTestResolver(t, Options{
		Upstreams:      []string{dead, hole.addr, good.addr},
		Timeout:        300 * time.Millisecond,
		Attempts:       1,
		HealthFailures: 2,
		HealthCooldown: time.Minute,
		Now:            clock.Now,
	})
	ctx := context.Background()
	for i := range 2 {
		res, err := r.LookupIP(ctx, "ip4", fmt.Sprintf("f%d.test", i))
		if err != nil || res.Status != StatusAnswer {
			t.Fatalf("lookup %d: %+v %v", i, res, err)
		}
	}
	if n := hole.n.Load(); n != 2 {
		t.Fatalf("black hole got %d queries, want 2", n)
	}
	// Both dead upstreams failed twice in a row: they are skipped now.
	for i := range 5 {
		if _, err := r.LookupIP(ctx, "ip4", fmt.Sprintf("g%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := hole.n.Load(); n != 2 {
		t.Errorf("black hole got %d queries while down, want still 2", n)
	}
	// After the cooldown, the upstream is tried again.
	clock.Advance(time.Minute)
	if _, err := r.LookupIP(ctx, "ip4", "h.test"); err != nil {
		t.Fatal(err)
	}
	if n := hole.n.Load(); n != 3 {
		t.Errorf("black hole got %d queries after its cooldown, want 3", n)
	}
}

func TestAllUpstreamsDownStillTried(t *testing.T) {
	checkLeaks(t)
	clock := newFakeClock()
	var fail atomic.Bool
	fail.Store(true)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if fail.Load() {
			reply(w, req, dns.RcodeRefused)
			return
		}
		reply(w, req, dns.RcodeSuccess, rr(t, "x.test. 300 IN A 192.0.2.1"))
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Attempts: 1, HealthFailures: 1, Now: clock.Now})
	if _, err := r.LookupIP(context.Background(), "ip4", "x.test"); !errors.Is(err, ErrTemporary) {
		t.Fatalf("REFUSED: %v, want a temporary failure", err)
	}
	fail.Store(false)
	// The only upstream is down, and asked anyway.
	if _, err := r.LookupIP(context.Background(), "ip4", "x.test"); err != nil {
		t.Fatalf("with every upstream down: %v", err)
	}
}

func TestServfail(t *testing.T) {
	checkLeaks(t)
	bad := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		reply(w, req, dns.RcodeServerFailure)
	})
	good := startServer(t, answerA(t))
	ctx := context.Background()

	r := newTestResolver(t, Options{Upstreams: []string{bad.addr, good.addr}})
	if res, err := r.LookupIP(ctx, "ip4", "a.test"); err != nil || res.Status != StatusAnswer {
		t.Errorf("SERVFAIL then answer: %+v %v", res, err)
	}

	r = newTestResolver(t, Options{Upstreams: []string{bad.addr}, Attempts: 3})
	a, err := r.Lookup(ctx, "b.test", dns.TypeA)
	var e *Error
	if a.Status != StatusTempFail || !errors.Is(err, ErrTemporary) || !errors.As(err, &e) || e.Rcode != dns.RcodeServerFailure || a.Rcode != dns.RcodeServerFailure {
		t.Errorf("only SERVFAIL: %+v %v", a, err)
	}
	if n := bad.count("b.test", dns.TypeA, ""); n != 1 {
		t.Errorf("a SERVFAILing upstream was asked %d times in one query, want 1", n)
	}
	// Temporary failures are not cached.
	_, _ = r.Lookup(ctx, "b.test", dns.TypeA)
	if n := bad.count("b.test", dns.TypeA, ""); n != 2 {
		t.Errorf("%d queries after two lookups, want 2", n)
	}
}

func TestTimeoutIsTemporary(t *testing.T) {
	checkLeaks(t)
	hole := startBlackHole(t)
	r := newTestResolver(t, Options{Upstreams: []string{hole.addr}, Timeout: 50 * time.Millisecond, Attempts: 2})
	res, err := r.LookupMX(context.Background(), "quiet.test")
	if res.Status != StatusTempFail || !errors.Is(err, ErrTemporary) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%+v %v: want a temporary failure from a timeout", res, err)
	}
	if errors.Is(err, ErrNXDomain) || errors.Is(err, ErrNoData) {
		t.Errorf("timeout reported as %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || !e.Temporary() || e.Rcode != -1 {
		t.Errorf("error %#v: want Temporary and Rcode -1", err)
	}
	if n := hole.n.Load(); n != 2 {
		t.Errorf("%d tries, want 2 (Attempts)", n)
	}
}

func TestCallerDeadline(t *testing.T) {
	checkLeaks(t)
	hole := startBlackHole(t)
	r := newTestResolver(t, Options{Upstreams: []string{hole.addr}, Timeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := r.LookupTXT(ctx, "quiet.test")
	if res.Status != StatusTempFail || !errors.Is(err, ErrTemporary) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%+v %v", res, err)
	}
	if d := time.Since(start); d > 30*time.Second { // against the 2 min timeout
		t.Errorf("returned after %v, past the caller's 50ms deadline", d)
	}
	// A context already done sends nothing.
	n := hole.n.Load()
	if _, err := r.LookupTXT(ctx, "other.test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("done context: %v", err)
	}
	if hole.n.Load() != n {
		t.Error("a lookup with a done context sent a query")
	}
}

func TestADBitAndEDNS(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.AuthenticatedData = req.Question[0].Name == "signed.test."
		m.Answer = append(m.Answer, rr(t, req.Question[0].Name+" 300 IN MX 10 mx.test."))
		_ = w.WriteMsg(m)
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	ctx := context.Background()

	a, err := r.Lookup(ctx, "signed.test", dns.TypeMX)
	if err != nil || !a.AD {
		t.Errorf("signed.test: AD %v, %v; want true", a.AD, err)
	}
	mx, err := r.LookupMX(ctx, "signed.test")
	if err != nil || !mx.AD {
		t.Errorf("signed.test typed: AD %v, %v; want true", mx.AD, err)
	}
	mx, err = r.LookupMX(ctx, "plain.test")
	if err != nil || mx.AD {
		t.Errorf("plain.test: AD %v, %v; want false", mx.AD, err)
	}

	req := s.last().req
	opt := req.IsEdns0()
	if opt == nil || opt.UDPSize() != 1232 || !opt.Do() {
		t.Errorf("query EDNS0 %v: want a 1232-octet buffer with DO", opt)
	}
	if !req.RecursionDesired || !req.AuthenticatedData {
		t.Errorf("query flags RD %v AD %v, want both", req.RecursionDesired, req.AuthenticatedData)
	}
}

func TestIDN(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if req.Question[0].Name == "xn--bcher-kva.example." {
			reply(w, req, dns.RcodeSuccess, rr(t, "xn--bcher-kva.example. 300 IN MX 10 mx.xn--bcher-kva.example."))
			return
		}
		reply(w, req, dns.RcodeNameError)
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	ctx := context.Background()
	for _, name := range []string{"Bücher.example", "bücher.example.", "BÜCHER。example", "xn--bcher-kva.example", "XN--BCHER-KVA.EXAMPLE."} {
		res, err := r.LookupMX(ctx, name)
		if err != nil || len(res.MX) != 1 || res.MX[0].Host != "mx.xn--bcher-kva.example" {
			t.Errorf("%s: %+v %v", name, res, err)
		}
	}
	if n := s.total(); n != 1 {
		t.Errorf("%d queries for one name in five spellings, want 1", n)
	}
	if q := s.last(); q.name != "xn--bcher-kva.example." {
		t.Errorf("queried %q", q.name)
	}
}

func TestInvalidNamesSendNothing(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, answerA(t))
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	for _, name := range []string{
		"", ".", "..", "a..b", ".a", "a.b..",
		strings.Repeat("a", 64) + ".test",
		strings.Repeat("abcdefghi.", 25) + "abcd", // 254 characters
		"exa mple.test", "a\x00b.test", "a/b.test", "xn--zz--.test", "\xff.test",
	} {
		res, err := r.LookupIP(context.Background(), "ip", name)
		if !errors.Is(err, ErrInvalidName) || res.Status != StatusNone {
			t.Errorf("%q: %+v %v, want ErrInvalidName", name, res, err)
		}
	}
	if _, err := r.LookupPTR(context.Background(), netip.Addr{}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("PTR of the zero address: %v", err)
	}
	if n := s.total(); n != 0 {
		t.Errorf("%d queries sent for invalid names", n)
	}
	// The longest valid name is 253 characters.
	if _, err := r.LookupIP(context.Background(), "ip4", strings.Repeat("abcdefghi.", 25)+"abc"); err != nil {
		t.Errorf("253-character name: %v", err)
	}
}

func TestCacheEvicts(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, answerA(t))
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, CacheEntries: 10})
	ctx := context.Background()
	before := cacheEvictions.Get()
	lookup := func(name string) {
		t.Helper()
		if _, err := r.LookupIP(ctx, "ip4", name); err != nil {
			t.Fatal(err)
		}
	}
	lookup("hot.test")
	for i := range 40 {
		lookup(fmt.Sprintf("cold%d.test", i))
		lookup("hot.test") // a hit sets its reference bit
	}
	if n := r.cache.len(); n != 10 {
		t.Errorf("cache holds %d entries, bound 10", n)
	}
	if got := cacheEvictions.Get() - before; got != 31 {
		t.Errorf("%d evictions, want 31", got)
	}
	if n := s.count("hot.test", dns.TypeA, ""); n != 1 {
		t.Errorf("the hot entry was queried %d times, want 1 (never evicted)", n)
	}
	lookup("cold0.test")
	if n := s.count("cold0.test", dns.TypeA, ""); n != 2 {
		t.Errorf("an evicted entry was queried %d times, want 2", n)
	}
}

func TestCacheBytesBound(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		reply(w, req, dns.RcodeSuccess, rr(t, req.Question[0].Name+" 300 IN TXT \""+strings.Repeat("v", 200)+"\""))
	})
	const bound = 8000
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, CacheBytes: bound})
	for i := range 100 {
		if _, err := r.LookupTXT(context.Background(), fmt.Sprintf("t%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	if b := r.cache.bytes(); b > bound || b == 0 {
		t.Errorf("cache holds %d bytes, bound %d", b, bound)
	}
	if n := r.cache.len(); n == 0 || n >= 100 {
		t.Errorf("cache holds %d entries", n)
	}
}

func TestServeStale(t *testing.T) {
	checkLeaks(t)
	var fail atomic.Bool
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if fail.Load() {
			reply(w, req, dns.RcodeServerFailure)
			return
		}
		reply(w, req, dns.RcodeSuccess, rr(t, "stale.test. 60 IN MX 10 mx.stale.test."))
	})
	ctx := context.Background()

	t.Run("on", func(t *testing.T) {
		clock := newFakeClock()
		r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, ServeStale: true, StaleTTL: time.Hour})
		fail.Store(false)
		if _, err := r.LookupMX(ctx, "stale.test"); err != nil {
			t.Fatal(err)
		}
		fail.Store(true)
		clock.Advance(61 * time.Second)
		n := s.count("stale.test", dns.TypeMX, "")
		res, err := r.LookupMX(ctx, "stale.test")
		if err != nil || !res.Stale || res.TTL != 30*time.Second || len(res.MX) != 1 {
			t.Fatalf("expired, upstream failing: %+v %v; want the stale answer", res, err)
		}
		if s.count("stale.test", dns.TypeMX, "") != n+1 {
			t.Error("the stale answer was served without trying the upstream")
		}
		// For 30 seconds the stale answer is served without new queries.
		clock.Advance(29 * time.Second)
		if res, err := r.LookupMX(ctx, "stale.test"); err != nil || !res.Stale {
			t.Errorf("within 30s: %+v %v", res, err)
		}
		if s.count("stale.test", dns.TypeMX, "") != n+1 {
			t.Error("queried again within the stale answer's 30s")
		}
		// Recovery replaces the stale answer.
		fail.Store(false)
		clock.Advance(2 * time.Second)
		if res, err := r.LookupMX(ctx, "stale.test"); err != nil || res.Stale || res.TTL != 60*time.Second {
			t.Errorf("after recovery: %+v %v", res, err)
		}
		// Past StaleTTL nothing stale is served.
		fail.Store(true)
		clock.Advance(2 * time.Hour)
		if res, err := r.LookupMX(ctx, "stale.test"); !errors.Is(err, ErrTemporary) || res.Stale {
			t.Errorf("past stale_ttl: %+v %v", res, err)
		}
	})
	t.Run("off", func(t *testing.T) {
		clock := newFakeClock()
		r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now})
		fail.Store(false)
		if _, err := r.LookupMX(ctx, "stale.test"); err != nil {
			t.Fatal(err)
		}
		fail.Store(true)
		clock.Advance(61 * time.Second)
		if res, err := r.LookupMX(ctx, "stale.test"); !errors.Is(err, ErrTemporary) || res.Stale {
			t.Errorf("serve-stale off: %+v %v", res, err)
		}
	})
}

func TestTypedResults(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		var rrs []string
		switch q.Name + typeString(q.Qtype) {
		case "mx.test.MX":
			rrs = []string{"mx.test. 300 IN MX 20 B.mx.test.", "mx.test. 300 IN MX 10 z.mx.test.", "mx.test. 300 IN MX 20 a.mx.test.", "mx.test. 300 IN MX 0 ."}
		case "null.test.MX":
			rrs = []string{"null.test. 300 IN MX 0 ."}
		case "txt.test.TXT":
			rrs = []string{`txt.test. 300 IN TXT "v=spf1 " "ip4:192.0.2.0/24 " "-all"`, `txt.test. 300 IN TXT "quote\" back\\ \009tab \255"`}
		case "5.0.0.127.in-addr.arpa.PTR":
			rrs = []string{"5.0.0.127.in-addr.arpa. 300 IN PTR MX1.Example.test."}
		case "_25._tcp.mx.test.TLSA":
			rrs = []string{"_25._tcp.mx.test. 300 IN TLSA 3 1 1 0123456789abcdef"}
		case "caa.test.CAA":
			rrs = []string{`caa.test. 300 IN CAA 0 issue "ca.test; account=1"`}
		case "dual.test.A":
			rrs = []string{"dual.test. 300 IN A 192.0.2.1", "dual.test. 100 IN A 192.0.2.2"}
		case "dual.test.AAAA":
			rrs = []string{"dual.test. 200 IN AAAA 2001:db8::1"}
		}
		var out []dns.RR
		for _, x := range rrs {
			out = append(out, rr(t, x))
		}
		reply(w, req, dns.RcodeSuccess, out...)
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: newFakeClock().Now})
	ctx := context.Background()

	mx, err := r.LookupMX(ctx, "mx.test")
	want := []MX{{"z.mx.test", 10}, {"a.mx.test", 20}, {"b.mx.test", 20}}
	if err != nil || !slices.Equal(mx.MX, want) || mx.NullMX {
		t.Errorf("MX: %+v %v; want %v (\".\" left out of a list with hosts)", mx, err, want)
	}
	mx, err = r.LookupMX(ctx, "null.test")
	if err != nil || !mx.NullMX || len(mx.MX) != 0 || mx.Status != StatusAnswer {
		t.Errorf("null MX: %+v %v", mx, err)
	}
	txt, err := r.LookupTXT(ctx, "txt.test")
	if err != nil || !slices.Equal(txt.TXT, []string{"v=spf1 ip4:192.0.2.0/24 -all", "quote\" back\\ \ttab \xff"}) {
		t.Errorf("TXT: %q %v", txt.TXT, err)
	}
	ptr, err := r.LookupPTR(ctx, netip.MustParseAddr("::ffff:127.0.0.5"))
	if err != nil || !slices.Equal(ptr.Names, []string{"mx1.example.test"}) {
		t.Errorf("PTR: %+v %v", ptr, err)
	}
	tlsa, err := r.LookupTLSA(ctx, "_25._tcp.MX.test")
	if err != nil || len(tlsa.Records) != 1 || tlsa.Records[0].Usage != 3 || string(tlsa.Records[0].Data) != "\x01\x23\x45\x67\x89\xab\xcd\xef" {
		t.Errorf("TLSA: %+v %v", tlsa, err)
	}
	caa, err := r.LookupCAA(ctx, "caa.test")
	if err != nil || len(caa.Records) != 1 || caa.Records[0] != (CAA{0, "issue", "ca.test; account=1"}) {
		t.Errorf("CAA: %+v %v", caa, err)
	}
	ip, err := r.LookupIP(ctx, "ip", "dual.test")
	wantIPs := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")}
	if err != nil || !slices.Equal(ip.IPs, wantIPs) || ip.TTL != 100*time.Second {
		t.Errorf("IP: %+v %v; want %v with TTL 100s", ip, err, wantIPs)
	}
	if _, err := r.LookupIP(ctx, "tcp", "dual.test"); err == nil {
		t.Error("network tcp accepted")
	}
	if _, err := r.Lookup(ctx, "dual.test", dns.TypeAXFR); err == nil {
		t.Error("AXFR accepted")
	}
}

// TestMismatchedRepliesDiscarded: replies with another ID or question, as
// a late answer on a reused socket would be, are read past.
func TestMismatchedRepliesDiscarded(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		wrongID := new(dns.Msg)
		wrongID.SetReply(req)
		wrongID.Id = req.Id + 1
		wrongID.Answer = []dns.RR{rr(t, q.Name+" 300 IN A 198.51.100.1")}
		_ = w.WriteMsg(wrongID)
		wrongQ := new(dns.Msg)
		wrongQ.SetReply(req)
		wrongQ.Question[0].Name = "other.test."
		wrongQ.Answer = []dns.RR{rr(t, "other.test. 300 IN A 198.51.100.2")}
		_ = w.WriteMsg(wrongQ)
		reply(w, req, dns.RcodeSuccess, rr(t, q.Name+" 300 IN A 192.0.2.1"))
	})
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}})
	before := udpMismatches.Get()
	for i := range 3 {
		res, err := r.LookupIP(context.Background(), "ip4", fmt.Sprintf("m%d.test", i))
		if err != nil || len(res.IPs) != 1 || res.IPs[0] != netip.MustParseAddr("192.0.2.1") {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if got := udpMismatches.Get() - before; got != 6 {
		t.Errorf("%d mismatched replies counted, want 6", got)
	}
}

func TestSocketReuse(t *testing.T) {
	checkLeaks(t)
	s := startServer(t, answerA(t))
	r := newTestResolver(t, Options{Upstreams: []string{s.addr}, ConnMaxQueries: 10})
	for i := range 50 {
		if _, err := r.LookupIP(context.Background(), "ip4", fmt.Sprintf("r%d.test", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.sources("udp"); n != 5 {
		t.Errorf("50 sequential queries came from %d sockets, want 5 (reused, replaced every 10)", n)
	}
}

func TestClose(t *testing.T) {
	checkLeaks(t)
	hole := startBlackHole(t)
	r, err := New(Options{Upstreams: []string{hole.addr}, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.LookupMX(context.Background(), "pending.test")
		done <- err
	}()
	for hole.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	r.Close()
	if d := time.Since(start); d > 30*time.Second { // against the 2 min timeout
		t.Errorf("Close took %v with a query in flight", d)
	}
	if err := <-done; !errors.Is(err, ErrTemporary) {
		t.Errorf("lookup in flight at Close: %v", err)
	}
	if _, err := r.LookupMX(context.Background(), "after.test"); !errors.Is(err, ErrClosed) {
		t.Errorf("lookup after Close: %v", err)
	}
	r.Close() // idempotent
}

func TestOptionsValidate(t *testing.T) {
	o := Options{
		Upstreams:  []string{"127.0.0.1:53", "dns.example:53", "127.0.0.1:0"},
		Timeout:    -1,
		MinTTL:     time.Hour,
		MaxTTL:     time.Minute,
		ServeStale: true,
	}
	o.Defaults()
	o.Attempts = -1
	o.CacheEntries = -5
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"upstreams[1]", "upstreams[2]", "timeout", "attempts", "max_ttl", "cache_entries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "upstreams[0]") {
		t.Errorf("a good upstream reported:\n%v", err)
	}
	good := Options{Upstreams: []string{"127.0.0.1", "[::1]:5353"}}
	good.Defaults()
	if err := good.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestResolvConf reads upstreams from a resolv.conf written here; it sends
// no query.
func TestResolvConf(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r, err := New(Options{ResolvConf: write("ok", "# test\nsearch example.test\nnameserver 127.0.0.53\nnameserver ::1\noptions edns0\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := r.Upstreams(), []string{"127.0.0.53:53", "[::1]:53"}; !slices.Equal(got, want) {
		t.Errorf("upstreams %v, want %v", got, want)
	}
	if _, err := New(Options{ResolvConf: write("empty", "search example.test\n")}); err == nil || !strings.Contains(err.Error(), "no nameserver") {
		t.Errorf("resolv.conf without nameservers: %v", err)
	}
	if _, err := New(Options{ResolvConf: filepath.Join(dir, "missing")}); err == nil {
		t.Error("missing resolv.conf accepted")
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{StatusNone: "none", StatusAnswer: "answer", StatusNXDomain: "nxdomain", StatusNoData: "nodata", StatusTempFail: "tempfail", 9: "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
	e := &Error{Name: "example.test", Type: dns.TypeMX, Status: StatusTempFail, Rcode: 2, Err: errors.New("SERVFAIL from 127.0.0.1:53")}
	if got, want := e.Error(), "resolver: temporary failure: MX example.test: SERVFAIL from 127.0.0.1:53"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestPrefetch: a hit in the last tenth of an entry's TTL is answered from
// the cache at once and refreshes the entry in the background, once however
// many hits follow; a failed refresh keeps the entry until it expires;
// without Options.Prefetch nothing is asked before expiry.
func TestPrefetch(t *testing.T) {
	checkLeaks(t)
	var fail atomic.Bool
	gate := make(chan struct{})
	var held atomic.Bool
	s := startServer(t, func(_ *testServer, w dns.ResponseWriter, req *dns.Msg) {
		if held.Load() {
			<-gate
		}
		if fail.Load() {
			reply(w, req, dns.RcodeServerFailure)
			return
		}
		reply(w, req, dns.RcodeSuccess, rr(t, "pre.test. 100 IN MX 10 mx.pre.test."))
	})
	ctx := context.Background()
	// eventually polls cond for up to 10 s (a loaded machine's reply).
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	lookup := func(r *Resolver) MXResult {
		t.Helper()
		res, err := r.LookupMX(ctx, "pre.test")
		if err != nil || res.Stale || len(res.MX) != 1 {
			t.Fatalf("lookup: %+v, %v", res, err)
		}
		return res
	}

	t.Run("on", func(t *testing.T) {
		clock := newFakeClock()
		r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, Prefetch: true, MinTTL: time.Second})
		base := s.count("pre.test", dns.TypeMX, "")
		queries := func() int { return s.count("pre.test", dns.TypeMX, "") - base }
		lookup(r)
		clock.Advance(89 * time.Second) // 11 s left of 100: not yet
		if res := lookup(r); res.TTL != 11*time.Second || queries() != 1 {
			t.Fatalf("before the last tenth: TTL %v, %d queries; want 11s, 1", res.TTL, queries())
		}
		// In the last tenth: the hits are answered from the cache while
		// the one refresh they start waits at the upstream.
		held.Store(true)
		clock.Advance(2 * time.Second)
		for range 5 {
			if res := lookup(r); res.TTL != 9*time.Second {
				t.Fatalf("in the last tenth: TTL %v, want the cached 9s", res.TTL)
			}
		}
		eventually("the refresh reaches the upstream", func() bool { return queries() == 2 })
		held.Store(false)
		close(gate)
		eventually("the refreshed entry", func() bool { return lookup(r).TTL == 100*time.Second })
		if n := queries(); n != 2 {
			t.Errorf("%d queries, want 2: one refresh for five hits", n)
		}

		// A refresh that fails: the entry serves until it expires, no
		// second refresh is tried, and the expiry asks again.
		fail.Store(true)
		clock.Advance(95 * time.Second)
		lookup(r)
		eventually("the failing refresh", func() bool { return queries() == 3 })
		clock.Advance(time.Second)
		if res := lookup(r); res.TTL != 4*time.Second {
			t.Errorf("after a failed refresh: TTL %v, want the entry's 4s", res.TTL)
		}
		if n := queries(); n != 3 {
			t.Errorf("%d queries after a failed refresh, want 3", n)
		}
		clock.Advance(4 * time.Second)
		if res, err := r.LookupMX(ctx, "pre.test"); !errors.Is(err, ErrTemporary) {
			t.Errorf("expired, upstream failing: %+v %v; want a temporary failure", res, err)
		}
		fail.Store(false)
	})
	t.Run("off", func(t *testing.T) {
		clock := newFakeClock()
		r := newTestResolver(t, Options{Upstreams: []string{s.addr}, Now: clock.Now, MinTTL: time.Second})
		base := s.count("pre.test", dns.TypeMX, "")
		lookup(r)
		clock.Advance(99 * time.Second)
		lookup(r)
		time.Sleep(50 * time.Millisecond)
		if n := s.count("pre.test", dns.TypeMX, "") - base; n != 1 {
			t.Errorf("prefetch off: %d queries before expiry, want 1", n)
		}
	})
}
