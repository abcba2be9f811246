package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNotifyProtocol runs verifyd under a fake NOTIFY_SOCKET, as systemd
// would with Type=notify, and reads what it says: READY=1 once it serves,
// RELOADING=1 then READY=1 around a SIGHUP, WATCHDOG=1 at half the
// WATCHDOG_USEC interval, STOPPING=1 on SIGTERM.
func TestNotifyProtocol(t *testing.T) {
	dir, err := os.MkdirTemp("", "vn")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "400000") // pings every 200 ms
	t.Setenv("WATCHDOG_PID", "")        // any pid: verifyd is our child

	got := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	want := func(what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-got:
				if !ok {
					t.Fatalf("notify socket closed before %q", what)
				}
				if strings.Contains(m, what) {
					return
				}
			case <-deadline:
				t.Fatalf("verifyd never sent %q", what)
			}
		}
	}
	run := testWorld(t, 0)
	in := startIn(t, t.TempDir(), worldConfig(run, ""))
	want("READY=1")
	want("WATCHDOG=1")
	want("WATCHDOG=1")
	in.cmd.Process.Signal(syscall.SIGHUP)
	want("RELOADING=1")
	want("READY=1")
	in.cmd.Process.Signal(syscall.SIGTERM)
	want("STOPPING=1")
	if err := in.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
