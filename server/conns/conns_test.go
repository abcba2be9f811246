package conns

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// rejectEarly is a server that does what fasthttp does with a body over
// its limit: it reads the request head, answers 400 at once and closes,
// without reading the body.
func rejectEarly(t *testing.T, ln net.Listener) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 7\r\n\r\ntoo big")
				c.Close()
			}()
		}
	}()
}

// writeAllThenRead is a client that writes its whole request before it
// reads (Node's fetch, many HTTP libraries): it returns the status it read,
// or the error that stopped it.
func writeAllThenRead(addr string, bodySize int) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req := fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", bodySize)
	if _, err := c.Write(append([]byte(req), bytes.Repeat([]byte("a"), bodySize)...)); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestLingeringCloseDeliversTheAnswer(t *testing.T) {
	l := New(listen(t), Options{Name: "test"})
	t.Cleanup(l.Shutdown)
	rejectEarly(t, l)
	for i := range 10 {
		if status, err := writeAllThenRead(l.Addr().String(), 9<<20); err != nil || status != 400 {
			t.Fatalf("try %d: status %d, %v", i, status, err)
		}
	}
}

// TestWithoutLingeringTheClientIsReset shows what the lingering close is
// for: the same server and client, with lingering off, lose the answer.
func TestWithoutLingeringTheClientIsReset(t *testing.T) {
	l := New(listen(t), Options{Name: "test-off", LingerTimeout: -1})
	rejectEarly(t, l)
	lost := 0
	for range 5 {
		if _, err := writeAllThenRead(l.Addr().String(), 9<<20); err != nil {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("every client read its answer without a lingering close: this test no longer shows why it is needed")
	}
}

func TestLingeringBounds(t *testing.T) {
	// A client that keeps sending is cut after LingerBytes.
	l := New(listen(t), Options{Name: "test-bytes", LingerBytes: 1 << 20, LingerTimeout: time.Minute})
	t.Cleanup(l.Shutdown)
	rejectEarly(t, l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	chunk := make([]byte, 64<<10)
	sent := 0
	for sent < 100<<20 {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	if sent >= 100<<20 {
		t.Fatalf("the server read all %d bytes; the bound is 1 MiB", sent)
	}
	// A client that sends nothing and never closes is cut after
	// LingerTimeout; Shutdown cuts it at once.
	l2 := New(listen(t), Options{Name: "test-time", LingerTimeout: time.Hour})
	rejectEarly(t, l2)
	c2, err := net.Dial("tcp", l2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(c2), nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return l2.Lingering() == 1 })
	l2.Shutdown()
	if n := l2.Lingering(); n != 0 {
		t.Fatalf("%d lingering after Shutdown", n)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection is still open after Shutdown")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30 s")
		}
	}
}

// holdOpen is a server that keeps every connection open until the test
// ends (an idle keep-alive connection).
func holdOpen(t *testing.T, ln net.Listener) {
	t.Helper()
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}
	}()
}

// answer dials addr from the address from and reads an answer the server
// sends before any request: a refusal.
func answer(t *testing.T, addr, from string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no refusal from %s: %v", from, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}

func TestCaps(t *testing.T) {
	reject := func(w io.Writer, why Reason) {
		fmt.Fprintf(w, "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(why.String()), why)
	}
	l := New(listen(t), Options{Name: "test-caps", MaxConnsPerIP: 3, MaxConns: 8, Reject: reject,
		Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")}})
	t.Cleanup(l.Shutdown)
	holdOpen(t, l)
	addr := l.Addr().String()
	dial := func(from string) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	for range 3 {
		dial("127.0.0.1")
	}
	waitUntil(t, func() bool { return l.Open() == 3 })
	if got := answer(t, addr, "127.0.0.1"); got != "429 Too Many Requests per_ip" {
		t.Fatalf("a 4th connection from 127.0.0.1: %q", got)
	}
	// An exempt address (a trusted proxy) has no cap of its own; another
	// address gets in, up to the total.
	for range 4 {
		dial("127.0.0.9")
	}
	dial("127.0.0.2")
	waitUntil(t, func() bool { return l.Open() == 8 })
	if got := answer(t, addr, "127.0.0.3"); got != "429 Too Many Requests total" {
		t.Fatalf("over the total: %q", got)
	}
	if l.Open() != 8 {
		t.Fatalf("open %d after two refusals", l.Open())
	}
}
func TestCloseFreesPlaces(t *testing.T) {
	l := New(listen(t), Options{Name: "test-free", MaxConnsPerIP: 1})
	t.Cleanup(l.Shutdown)
	addr := l.Addr().String()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	c1, _ := net.Dial("tcp", addr)
	defer c1.Close()
	s1 := <-accepted
	if l.Open() != 1 {
		t.Fatalf("open %d", l.Open())
	}
	s1.Close()
	if err := s1.Close(); err == nil {
		t.Error("a second Close succeeded")
	}
	if l.Open() != 0 {
		t.Fatalf("open %d after Close", l.Open())
	}
	c2, _ := net.Dial("tcp", addr)
	defer c2.Close()
	select {
	case s2 := <-accepted:
		s2.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the address's place was not freed")
	}
}

func TestClientPrefix(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bits int
		want string
	}{
		{"192.0.2.7", 64, "192.0.2.7/32"},
		{"::ffff:192.0.2.7", 64, "192.0.2.7/32"}, // IPv4-mapped: IPv4
		{"::ffff:192.0.2.7", 48, "192.0.2.7/32"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 0, "2001:db8:1:2::/64"}, // 0: the default
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6/128"},
		{"2001:db8:1:2:3:4:5:6", 129, "2001:db8:1:2::/64"}, // out of range: the default
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"::1", 64, "::/64"},
	} {
		if got := ClientPrefix(netip.MustParseAddr(tc.addr), tc.bits).String(); got != tc.want {
			t.Errorf("ClientPrefix(%s, %d) = %s, want %s", tc.addr, tc.bits, got, tc.want)
		}
	}
	// One /64 is one client; the next /64 another.
	a := ClientPrefix(netip.MustParseAddr("2001:db8:0:1::1"), 64)
	b := ClientPrefix(netip.MustParseAddr("2001:db8:0:1:8000::2"), 64)
	c := ClientPrefix(netip.MustParseAddr("2001:db8:0:2::1"), 64)
	if a != b || a == c {
		t.Errorf("%s %s %s: want the first two equal, the third apart", a, b, c)
	}
	if p := ClientPrefix(netip.Addr{}, 64); p.IsValid() {
		t.Errorf("the zero Addr: %s", p)
	}
}

// fakePeers is a listener whose connections claim the next address of
// peers as their remote address: loopback has one IPv6 address (::1),
// and the per-client cap must be seen on many.
type fakePeers struct {
	net.Listener
	mu    sync.Mutex
	peers []string
}

func (f *fakePeers) Accept() (net.Conn, error) {
	c, err := f.Listener.Accept()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.peers) == 0 {
		c.Close()
		return nil, fmt.Errorf("no fake peer left")
	}
	p := f.peers[0]
	f.peers = f.peers[1:]
	return peerConn{c, &net.TCPAddr{IP: net.ParseIP(p), Port: 40000}}, nil
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// TestCapsPerIPv6Prefix: addresses of one /64 share one per-client cap,
// another /64 has its own; an IPv4-mapped address is its IPv4 address.
func TestCapsPerIPv6Prefix(t *testing.T) {
	reject := func(w io.Writer, why Reason) {
		fmt.Fprintf(w, "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(why.String()), why)
	}
	fp := &fakePeers{Listener: listen(t), peers: []string{
		"2001:db8:1:2::a", "2001:db8:1:2:ffff::b", // one /64: its cap of 2
		"2001:db8:1:2:8000::c",          // the same /64: refused
		"2001:db8:1:3::a",               // the next /64: its own place
		"192.0.2.1", "::ffff:192.0.2.1", // one IPv4 client
		"::ffff:192.0.2.1", // refused
	}}
	l := New(fp, Options{Name: "test-v6", MaxConnsPerIP: 2, Reject: reject})
	t.Cleanup(l.Shutdown)
	holdOpen(t, l)
	addr := l.Addr().String()
	dial := func(open int) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		waitUntil(t, func() bool { return l.Open() == open })
	}
	dial(1)
	dial(2)
	if got := answer(t, addr, "127.0.0.1"); got != "429 Too Many Requests per_ip" {
		t.Fatalf("a third connection from the /64: %q", got)
	}
	dial(3)
	dial(4)
	dial(5)
	if got := answer(t, addr, "127.0.0.1"); got != "429 Too Many Requests per_ip" {
		t.Fatalf("a third connection from 192.0.2.1, IPv4-mapped: %q", got)
	}
	// With a /128 per client, each address has its own place.
	fp2 := &fakePeers{Listener: listen(t), peers: []string{"2001:db8:1:2::a", "2001:db8:1:2::b", "2001:db8:1:2::c"}}
	l2 := New(fp2, Options{Name: "test-v6-128", MaxConnsPerIP: 1, IPv6PrefixLen: 128, Reject: reject})
	t.Cleanup(l2.Shutdown)
	holdOpen(t, l2)
	for i := range 3 {
		c, err := net.Dial("tcp", l2.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		waitUntil(t, func() bool { return l2.Open() == i+1 })
	}
}

// TestUsedAndMute: Used says whether the client sent a byte; a muted
// connection drops what is written, and the client reads only the close.
func TestUsedAndMute(t *testing.T) {
	l := New(listen(t), Options{Name: "test-mute"})
	t.Cleanup(l.Shutdown)
	accepted := make(chan *Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*Conn)
		}
	}()
	for _, send := range []string{"", "GET / HTTP/1.1\r\n"} {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		s := <-accepted
		if send != "" {
			io.WriteString(c, send)
			buf := make([]byte, len(send))
			if _, err := io.ReadFull(s, buf); err != nil {
				t.Fatal(err)
			}
		}
		if s.Used() != (send != "") {
			t.Errorf("sent %q: Used %v", send, s.Used())
		}
		s.Mute()
		if n, err := io.WriteString(s, "HTTP/1.1 400 Bad Request\r\n\r\n"); n == 0 || err != nil {
			t.Errorf("a muted write: %d %v", n, err)
		}
		s.Close()
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
			t.Errorf("the client read %q, %v; want only the close", b, err)
		}
	}
}
