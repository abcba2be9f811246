package sdnotify

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// enablePassCred makes the kernel attach the sender's credentials to each
// datagram, as systemd's notify socket does to enforce NotifyAccess=main.
func enablePassCred(t *testing.T, conn *net.UnixConn) {
	t.Helper()
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
}

// checkSenderPID checks that the datagram came from this process, the main
// PID systemd would accept it from.
func checkSenderPID(t *testing.T, oob []byte) {
	t.Helper()
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil {
			if int(cred.Pid) != os.Getpid() {
				t.Fatalf("datagram from pid %d, want %d", cred.Pid, os.Getpid())
			}
			return
		}
	}
	t.Fatal("datagram without sender credentials")
}
