package resolver

import (
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// checkLeaks fails t if goroutines started during t are still running
// when its cleanups are done. Call it first, so its cleanup runs last.
func checkLeaks(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= base {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d goroutines before the test, %d after:\n%s", base, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// fakeClock is an Options.Now that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
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

// query is one query a test server received.
type query struct {
	name  string // as received, with the trailing dot
	qtype uint16
	proto string // "udp" or "tcp"
	from  string // client address
	req   *dns.Msg
}

// testServer is a miekg/dns server on 127.0.0.1, UDP and TCP on one port,
// that records the queries it receives.
type testServer struct {
	addr string
	stop chan struct{} // closed at cleanup: handlers that wait return

	n       atomic.Int64 // queries received
	mu      sync.Mutex
	queries []query
}

// startServer starts a server answering with h and stops it at cleanup.
// h may wait on s.stop.
func startServer(t testing.TB, h func(s *testServer, w dns.ResponseWriter, req *dns.Msg)) *testServer {
	return startServerRecording(t, h, true)
}

// startServerRecording is startServer; without record, it keeps no
// queries (for benchmarks) and only counts them in s.n.
func startServerRecording(t testing.TB, h func(s *testServer, w dns.ResponseWriter, req *dns.Msg), record bool) *testServer {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	for try := 0; ; try++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			t.Fatalf("cannot listen on tcp: %v", err)
		}
	}
	s := &testServer{addr: pc.LocalAddr().String(), stop: make(chan struct{})}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		s.n.Add(1)
		if !record {
			h(s, w, req)
			return
		}
		q := query{proto: w.LocalAddr().Network(), from: w.RemoteAddr().String(), req: req}
		if len(req.Question) > 0 {
			q.name, q.qtype = req.Question[0].Name, req.Question[0].Qtype
		}
		s.mu.Lock()
		s.queries = append(s.queries, q)
		s.mu.Unlock()
		h(s, w, req)
	})
	var wg sync.WaitGroup
	wg.Add(2)
	udp := &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: wg.Done}
	tcp := &dns.Server{Listener: l, Handler: handler, NotifyStartedFunc: wg.Done}
	errc := make(chan error, 2)
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()
	wg.Wait()
	t.Cleanup(func() {
		close(s.stop)
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
		<-errc
		<-errc
	})
	return s
}

// count returns the number of queries for (name, qtype) received over
// proto ("" for any). name is without the trailing dot, any case.
func (s *testServer) count(name string, qtype uint16, proto string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queries {
		if strings.EqualFold(q.name, name+".") && (qtype == 0 || q.qtype == qtype) && (proto == "" || q.proto == proto) {
			n++
		}
	}
	return n
}

// total returns the number of queries received.
func (s *testServer) total() int { return int(s.n.Load()) }

// sources returns the distinct client addresses seen over proto.
func (s *testServer) sources(proto string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, q := range s.queries {
		if q.proto == proto {
			seen[q.from] = true
		}
	}
	return len(seen)
}

func (s *testServer) last() query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[len(s.queries)-1]
}

// sleep waits d or until the server stops.
func (s *testServer) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-s.stop:
	}
}

// blackHole is a UDP socket that reads queries and never answers.
type blackHole struct {
	addr string
	n    atomic.Int64
}

func startBlackHole(t testing.TB) *blackHole {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{addr: pc.LocalAddr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			b.n.Add(1)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	return b
}

// deadAddr returns a loopback UDP address nothing listens on: queries to
// it get ICMP port unreachable, a network error.
func deadAddr(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// newTestResolver returns a resolver on opts, closed at cleanup. Tests set
// Upstreams to loopback servers they started: nothing leaves 127.0.0.0/8.
// Timeout defaults to 10s here.
func newTestResolver(t testing.TB, opts Options) *Resolver {
	t.Helper()
	for _, u := range opts.Upstreams {
		if !strings.HasPrefix(u, "127.") {
			t.Fatalf("test upstream %s is not on 127.0.0.0/8", u)
		}
	}
	if len(opts.Upstreams) == 0 {
		t.Fatal("tests must set upstreams")
	}
	if opts.Timeout == 0 {
		// Generous, so a loaded machine does not turn a slow reply into a
		// retry; tests of timeouts set their own.
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// rr parses a record in zone-file syntax.
func rr(t testing.TB, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("bad test record %q: %v", s, err)
	}
	return r
}

// reply answers req with rcode and records; records of type SOA go to the
// authority section.
func reply(w dns.ResponseWriter, req *dns.Msg, rcode int, rrs ...dns.RR) {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	for _, r := range rrs {
		if r.Header().Rrtype == dns.TypeSOA {
			m.Ns = append(m.Ns, r)
		} else {
			m.Answer = append(m.Answer, r)
		}
	}
	_ = w.WriteMsg(m)
}

// soa returns a SOA record for zone with the given TTL and MINIMUM.
func soa(t testing.TB, zone string, ttl, minimum uint32) dns.RR {
	return rr(t, fmt.Sprintf("%s %d IN SOA ns.%s hostmaster.%s 1 3600 600 86400 %d", zone, ttl, zone, zone, minimum))
}
