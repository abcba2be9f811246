package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echo is an upstream server that sends back what it reads, counting
// the connections it accepted and the bytes it received.
type echo struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	accepted int
	received int
	ended    int // connections whose read failed or ended
	conns    []net.Conn
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.accepted++
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				b := make([]byte, 4096)
				for {
					n, err := c.Read(b)
					e.mu.Lock()
					e.received += n
					e.mu.Unlock()
					if n > 0 {
						if _, werr := c.Write(b[:n]); werr != nil {
							err = werr
						}
					}
					if err != nil {
						e.mu.Lock()
						e.ended++
						e.mu.Unlock()
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echo) counts() (accepted, received, ended int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accepted, e.received, e.ended
}

func (e *echo) close() {
	e.ln.Close()
	e.mu.Lock()
	for _, c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// start runs a proxy to a new echo server; at the end of the test both
// are closed and no goroutine of either may be left.
func start(t *testing.T) (*Proxy, *echo) {
	t.Helper()
	before := runtime.NumGoroutine()
	e := newEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		e.close()
		noLeaks(t, before)
	})
	return p, e
}

// noLeaks waits until the goroutines are back to before (a closed
// connection's goroutines end soon after Close returns, not at once).
func noLeaks(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf)
		}
	}
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads its echo.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	expect(t, c, msg)
}

// expect reads len(msg) bytes, within a minute, and compares them.
func expect(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

// silent checks that nothing arrives on c for a while.
func silent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 1)
	n, err := c.Read(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v: want nothing", n, err)
	}
}

// cut checks that c was reset or closed by the proxy.
func cut(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := io.ReadAll(c)
	if err == nil {
		return // EOF: closed before it was forwarded anywhere
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want a reset", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

// TestPass: a megabyte each way comes through intact; the link ends when
// the client closes.
func TestPass(t *testing.T) {
	p, _ := start(t)
	c := dial(t, p)
	data := make([]byte, 1<<20)
	rand.Read(data)
	go c.Write(data)
	got := make([]byte, len(data))
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echo of 1 MiB: %v, equal %v", err, bytes.Equal(got, data))
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("%d links open", n)
	}
	c.Close()
	waitFor(t, "the link closes", func() bool { return p.Conns() == 0 })
}

// TestLatency: a round trip takes at least two delays (one each way);
// many small writes come back in their order; back in Pass the link
// carries on.
func TestLatency(t *testing.T) {
	p, _ := start(t)
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Latency(100*time.Millisecond, 150*time.Millisecond)
	if p.Mode() != Latency {
		t.Fatalf("mode %v", p.Mode())
	}
	start := time.Now()
	roundTrip(t, c, "slow")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("a round trip took %v under 100-150 ms a way", d)
	}
	var want strings.Builder
	for i := range 200 {
		msg := string(rune('a'+i%26)) + strings.Repeat("x", i%7)
		want.WriteString(msg)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, c, want.String())
	p.Pass()
	roundTrip(t, c, "after")
}

// TestReset: every open connection is reset on both sides; new ones are
// served.
func TestReset(t *testing.T) {
	p, e := start(t)
	a, b := dial(t, p), dial(t, p)
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	if n := p.Reset(); n != 2 {
		t.Fatalf("reset %d links, want 2", n)
	}
	for _, c := range []net.Conn{a, b} {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after the reset: %v, want ECONNRESET", err)
		}
	}
	waitFor(t, "the upstream sees both connections end", func() bool { _, _, ended := e.counts(); return ended == 2 })
	waitFor(t, "no link left", func() bool { return p.Conns() == 0 })
	roundTrip(t, dial(t, p), "again")
}

// TestBlackHole: an open connection carries nothing either way, a new
// one is accepted and gets nothing (nothing reaches the upstream); when
// the hole ends the bytes held flow, in order, on both.
func TestBlackHole(t *testing.T) {
	p, e := start(t)
	a := dial(t, p)
	roundTrip(t, a, "hello")
	accepted, received, _ := e.counts()
	p.BlackHole()
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := dial(t, p)
	if _, err := b.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	silent(t, a, 300*time.Millisecond)
	silent(t, b, 10*time.Millisecond)
	if acc, rec, _ := e.counts(); acc != accepted || rec != received {
		t.Fatalf("upstream: %d connections, %d bytes during the black hole; %d, %d before", acc, rec, accepted, received)
	}
	if n := p.Conns(); n != 2 {
		t.Fatalf("%d links open during the black hole, want 2", n)
	}
	p.Pass()
	expect(t, a, "ping")
	expect(t, b, "new")
	roundTrip(t, a, "pong")
}

// TestMute: the client's bytes reach the server, its replies wait until
// the mode changes.
func TestMute(t *testing.T) {
	p, e := start(t)
	a := dial(t, p)
	roundTrip(t, a, "hello")
	_, received, _ := e.counts()
	p.Mute()
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server gets the bytes", func() bool { _, rec, _ := e.counts(); return rec == received+4 })
	silent(t, a, 300*time.Millisecond)
	p.Pass()
	expect(t, a, "ping")
}

// TestRefuse: open connections are reset, new ones are reset at once;
// back in Pass, a new connection is served.
func TestRefuse(t *testing.T) {
	p, e := start(t)
	a := dial(t, p)
	roundTrip(t, a, "a")
	p.Refuse()
	cut(t, a)
	accepted, _, _ := e.counts()
	for range 3 {
		// The proxy resets a refused connection as soon as it accepts
		// it: on a busy machine that can come before the dial returns,
		// which then fails with the reset itself.
		c, err := net.Dial("tcp", p.Addr())
		if errors.Is(err, syscall.ECONNRESET) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		cut(t, c)
		c.Close()
	}
	if acc, _, _ := e.counts(); acc != accepted {
		t.Fatalf("%d connections reached the upstream while refusing", acc-accepted)
	}
	p.Pass()
	roundTrip(t, dial(t, p), "back")
}

// TestClose: Close resets the links in every state (a chunk delayed, a
// chunk held by a black hole, an upstream never dialled), refuses new connections, and leaves no
// goroutine behind (start's cleanup checks).
func TestClose(t *testing.T) {
	p, _ := start(t)
	a, b := dial(t, p), dial(t, p)
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	p.Latency(time.Minute, time.Minute)
	a.Write([]byte("delayed"))
	p.BlackHole()
	b.Write([]byte("held"))
	c := dial(t, p) // never dialled upstream
	waitFor(t, "three links", func() bool { return p.Conns() == 3 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []net.Conn{a, b, c} {
		cut(t, conn)
	}
	if n := p.Conns(); n != 0 {
		t.Fatalf("%d links after Close", n)
	}
	if conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); err == nil {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a connection after Close was accepted and held")
		}
		conn.Close()
	}
}

// TestModesUnderLoad: links carrying traffic while the mode changes
// every few milliseconds (the race detector's test); every byte that
// comes back is the echo of what was sent, in order.
func TestModesUnderLoad(t *testing.T) {
	p, _ := start(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					return
				}
				msg := strings.Repeat(string(rune('a'+i)), 100+round%50)
				c.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write([]byte(msg)); err == nil {
					got := make([]byte, len(msg))
					n, _ := io.ReadFull(c, got)
					if string(got[:n]) != msg[:n] {
						t.Errorf("echo %q of %q", got[:n], msg)
					}
				}
				c.Close()
			}
		}()
	}
	for i := range 60 {
		switch i % 6 {
		case 0:
			p.Latency(time.Millisecond, 5*time.Millisecond)
		case 1:
			p.BlackHole()
		case 2:
			p.Reset()
		case 3:
			p.Refuse()
		case 4:
			p.Mute()
		default:
			p.Pass()
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Pass()
	close(stop)
	wg.Wait()
}
