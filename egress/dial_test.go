package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialAndSee leases from pool address src, dials a listener on listenIP
// and returns the client address the server saw.
func dialAndSee(t *testing.T, addrs []string, listenIP string) (leased, seen netip.Addr) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", listenIP, err)
	}
	defer ln.Close()
	accepted := make(chan netip.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- netip.Addr{}
			return
		}
		accepted <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		c.Close()
	}()

	e := newEnv(t, addrs, nil)
	l := e.acquire(t, listenIP, "")
	defer l.Release(OutcomeOK)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	defer conn.Close()
	if got := conn.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); l.Addr().IsValid() && got != l.Addr() {
		t.Errorf("local address %s, leased %s", got, l.Addr())
	}
	select {
	case a := <-accepted:
		return l.Addr(), a
	case <-ctx.Done():
		t.Fatal("server saw no connection")
		return
	}
}

func TestDialBindsTheLeasedAddress(t *testing.T) {
	leased, seen := dialAndSee(t, []string{"127.0.0.2"}, "127.0.0.1")
	if leased != ip("127.0.0.2") || seen != ip("127.0.0.2") {
		t.Fatalf("leased %s, server saw %s; want 127.0.0.2", leased, seen)
	}
	leased, seen = dialAndSee(t, []string{"127.0.0.3", "127.0.0.4"}, "127.0.0.1")
	if seen != leased {
		t.Fatalf("leased %s, server saw %s", leased, seen)
	}
}

func TestDialBindsIPv6(t *testing.T) {
	leased, seen := dialAndSee(t, []string{"127.0.0.2", "::1"}, "::1")
	if leased != ip("::1") || seen != ip("::1") {
		t.Fatalf("leased %s, server saw %s", leased, seen)
	}
}

func TestDialSystemAddress(t *testing.T) {
	leased, seen := dialAndSee(t, nil, "127.0.0.1")
	if leased.IsValid() || !seen.IsLoopback() {
		t.Fatalf("leased %s, server saw %s", leased, seen)
	}
}

func TestDialRefusesOtherTargets(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.2"}, nil)
	dialed := 0
	e.p.dial = func(context.Context, *net.Dialer, string, string) (net.Conn, error) {
		dialed++
		return nil, errors.New("no network in this test")
	}
	l := e.acquire(t, "127.0.0.1", "")
	ctx := context.Background()
	for _, c := range []struct{ network, address, want string }{
		{"tcp", "127.0.0.3:25", "not the leased destination"},
		{"tcp", "[::ffff:127.0.0.3]:25", "not the leased destination"},
		{"tcp", "mx.example.test:25", "egress: dial"},
		{"tcp", "127.0.0.1", "egress: dial"},
		{"udp", "127.0.0.1:25", "network not supported"},
	} {
		if _, err := l.DialContext(ctx, c.network, c.address); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DialContext(%s, %s): %v, want %q", c.network, c.address, err, c.want)
		}
	}
	if dialed != 0 {
		t.Fatalf("%d refused targets were dialed", dialed)
	}
	if _, err := l.DialContext(ctx, "tcp", "[::ffff:127.0.0.1]:25"); err == nil || dialed != 1 {
		t.Fatalf("mapped form of the destination: %v, dialed %d", err, dialed)
	}
	l.Release(OutcomeConnectFailed)
	if _, err := l.DialContext(ctx, "tcp", "127.0.0.1:25"); !errors.Is(err, ErrReleased) {
		t.Fatalf("after Release: %v", err)
	}
	if st, _ := e.status("127.0.0.2"); st.Outcomes[OutcomeConnectFailed] != 1 || st.Disabled {
		t.Fatalf("snapshot: %+v", st)
	}
}

func TestDialBindFailureDisables(t *testing.T) {
	e := newEnv(t, []string{"127.0.0.2", "127.0.0.3"}, nil)
	var gotLocal net.Addr
	e.p.dial = func(_ context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		gotLocal = d.LocalAddr
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}
	}
	l := e.acquire(t, "127.0.0.1", "127.0.0.2")
	_, err := l.DialContext(context.Background(), "tcp", "127.0.0.1:25")
	if !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("DialContext: %v", err)
	}
	if gotLocal == nil || gotLocal.String() != "127.0.0.2:0" {
		t.Fatalf("dialer local address %v", gotLocal)
	}
	l.Release(OutcomeConnectFailed)
	evs := e.rec.take()
	if len(evs) != 1 || evs[0].Kind != EventDisabled || evs[0].Addr != ip("127.0.0.2") || !strings.Contains(evs[0].Reason, "cannot bind") {
		t.Fatalf("events: %+v", evs)
	}
	for range 3 {
		if l := e.acquire(t, "127.0.0.1", "127.0.0.2"); l.Addr() != ip("127.0.0.3") {
			t.Fatalf("leased %s after its bind failure", l.Addr())
		} else {
			l.Release(OutcomeOK)
		}
	}
}
