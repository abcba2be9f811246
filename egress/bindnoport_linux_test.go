package egress

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDialBindsWithoutPort: a session from a pool address is bound with
// IP_BIND_ADDRESS_NO_PORT, so its source port is chosen at connect.
func TestDialBindsWithoutPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	e := newEnv(t, []string{"127.0.0.2"}, nil)
	l := e.acquire(t, "127.0.0.1", "")
	defer l.Release(OutcomeOK)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT)
	}); err != nil || gerr != nil {
		t.Skipf("cannot read the option: %v %v", err, gerr)
	}
	if v != 1 {
		t.Errorf("IP_BIND_ADDRESS_NO_PORT = %d, want 1", v)
	}
	// And no keepalive, whose four setsockopt calls a session of seconds
	// does not need.
	if err := raw.Control(func(fd uintptr) {
		v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	}); err != nil || gerr != nil {
		t.Fatalf("SO_KEEPALIVE: %v %v", err, gerr)
	}
	if v != 0 {
		t.Errorf("SO_KEEPALIVE = %d, want 0", v)
	}
}
