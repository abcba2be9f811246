package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeManager is the service manager's end of $NOTIFY_SOCKET: a unix
// datagram socket at a path or, abstract, under a name starting with "@".
type fakeManager struct {
	t    *testing.T
	conn *net.UnixConn
}

func newFakeManager(t *testing.T, abstract bool) *fakeManager {
	t.Helper()
	var name string
	if abstract {
		name = fmt.Sprintf("@verifyd-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	} else {
		// Not t.TempDir: sun_path holds 108 bytes, and test names are long.
		dir, err := os.MkdirTemp("", "sdn")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		name = filepath.Join(dir, "notify")
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	enablePassCred(t, conn)
	t.Setenv("NOTIFY_SOCKET", name)
	return &fakeManager{t: t, conn: conn}
}

// recv returns the next datagram. The deadline only keeps a broken test
// from hanging; it asserts nothing about speed.
func (m *fakeManager) recv() string {
	m.t.Helper()
	if err := m.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		m.t.Fatal(err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, 1024)
	n, oobn, _, _, err := m.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		m.t.Fatalf("no notification: %v", err)
	}
	checkSenderPID(m.t, oob[:oobn])
	return string(buf[:n])
}

// pending returns the datagrams already queued, without waiting for more.
// A datagram send is complete when it returns, so whatever was sent before
// the call is here.
func (m *fakeManager) pending() []string {
	m.t.Helper()
	rc, err := m.conn.SyscallConn()
	if err != nil {
		m.t.Fatal(err)
	}
	var out []string
	buf := make([]byte, 4096)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true
		}); err != nil {
			m.t.Fatal(err)
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			return out
		}
		if rerr != nil {
			m.t.Fatal(rerr)
		}
		out = append(out, string(buf[:n]))
	}
}

func TestMessages(t *testing.T) {
	cases := []struct {
		name string
		send func() error
		want string
	}{
		{"ready", Ready, "READY=1"},
		{"stopping", Stopping, "STOPPING=1"},
		{"watchdog", Watchdog, "WATCHDOG=1"},
		{"status", func() error { return Status("serving; 3 egress addresses") }, "STATUS=serving; 3 egress addresses"},
		{"status one line", func() error { return Status("reload failed:\nbad line\r\nagain") }, "STATUS=reload failed: bad line again"},
		{"extend timeout", func() error { return ExtendTimeout(90 * time.Second) }, "EXTEND_TIMEOUT_USEC=90000000"},
		{"raw", func() error { return Notify("READY=1\nSTATUS=up") }, "READY=1\nSTATUS=up"},
	}
	for _, abstract := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/abstract=%v", c.name, abstract), func(t *testing.T) {
				m := newFakeManager(t, abstract)
				if err := c.send(); err != nil {
					t.Fatal(err)
				}
				if got := m.recv(); got != c.want {
					t.Fatalf("sent %q, want %q", got, c.want)
				}
			})
		}
	}
}

// TestReloading checks the Type=notify-reload form: RELOADING=1 and the
// CLOCK_MONOTONIC time of the reload in microseconds.
func TestReloading(t *testing.T) {
	m := newFakeManager(t, false)
	before, err := monotonicUsec()
	if err != nil {
		t.Fatal(err)
	}
	if err := Reloading(); err != nil {
		t.Fatal(err)
	}
	after, _ := monotonicUsec()
	lines := strings.Split(m.recv(), "\n")
	if len(lines) != 2 || lines[0] != "RELOADING=1" || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("reloading message %q", lines)
	}
	usec, err := strconv.ParseUint(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if usec < before || usec > after {
		t.Fatalf("MONOTONIC_USEC=%d outside [%d, %d]", usec, before, after)
	}
}

func TestNoSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "1000")
	for _, f := range []func() error{Ready, Stopping, Reloading, Watchdog, func() error { return Status("x") }} {
		if err := f(); err != nil {
			t.Fatalf("without NOTIFY_SOCKET: %v", err)
		}
	}
}

func TestSocketErrors(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if err := Ready(); !errors.Is(err, ErrUnsupportedSocket) {
		t.Fatalf("vsock socket: %v, want ErrUnsupportedSocket", err)
	}
	t.Setenv("NOTIFY_SOCKET", "relative/notify")
	if err := Ready(); !errors.Is(err, ErrUnsupportedSocket) {
		t.Fatalf("relative path: %v, want ErrUnsupportedSocket", err)
	}
	// A manager that is gone is an error the daemon can log.
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	if err := Ready(); err == nil {
		t.Fatal("send to a missing socket succeeded")
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	cases := []struct {
		usec, pid string
		want      time.Duration
		ok        bool
	}{
		{"", "", 0, false},
		{"30000000", "", 30 * time.Second, true},
		{"30000000", self, 30 * time.Second, true},
		{"30000000", "1", 0, false}, // meant for another process
		{"30000000", "x", 0, false},
		{"0", "", 0, false},
		{"-5", "", 0, false},
		{"ten", "", 0, false},
	}
	for _, c := range cases {
		t.Setenv("WATCHDOG_USEC", c.usec)
		t.Setenv("WATCHDOG_PID", c.pid)
		got, ok := WatchdogInterval()
		if got != c.want || ok != c.ok {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v %v, want %v %v", c.usec, c.pid, got, ok, c.want, c.ok)
		}
	}
}

// TestRunWatchdog checks that a ping goes out exactly for each passing
// health check, and none for a failing one.
func TestRunWatchdog(t *testing.T) {
	m := newFakeManager(t, false)
	t.Setenv("WATCHDOG_USEC", "2000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls, passed := 0, 0
	healthy := func() bool {
		mu.Lock()
		defer mu.Unlock()
		calls++
		ok := calls%3 != 0 // every third check fails
		if ok {
			passed++
		}
		if calls == 9 {
			cancel()
		}
		return ok
	}
	done := make(chan struct{})
	go func() { RunWatchdog(ctx, healthy); close(done) }()
	<-done

	got := m.pending()
	mu.Lock()
	defer mu.Unlock()
	if calls != 9 {
		t.Fatalf("healthy called %d times after the context ended at call 9", calls)
	}
	if len(got) != passed {
		t.Fatalf("%d pings for %d passing checks: %q", len(got), passed, got)
	}
	for _, g := range got {
		if g != "WATCHDOG=1" {
			t.Fatalf("ping %q", g)
		}
	}
}

func TestRunWatchdogDisabled(t *testing.T) {
	m := newFakeManager(t, false)
	t.Setenv("WATCHDOG_USEC", "")
	// Returns at once without calling healthy: nothing cancels ctx.
	RunWatchdog(context.Background(), func() bool {
		t.Error("health checked without a watchdog")
		return true
	})
	if got := m.pending(); len(got) != 0 {
		t.Fatalf("sent %q without a watchdog", got)
	}
}

func TestWatchdogTick(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "")
	tick, stop := WatchdogTick()
	stop()
	if tick != nil {
		t.Fatal("a tick channel without a watchdog")
	}
	t.Setenv("WATCHDOG_USEC", "2000")
	t.Setenv("WATCHDOG_PID", "")
	tick, stop = WatchdogTick()
	defer stop()
	if tick == nil {
		t.Fatal("no tick channel with WATCHDOG_USEC set")
	}
	<-tick // ticks; how often is the ticker's business
}
