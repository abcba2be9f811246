package smtpclient

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// timeWaitOn reports whether the kernel holds a TIME_WAIT socket for the
// connection local->remote on the local side (Linux /proc/net/tcp; ok is
// false where there is none).
func timeWaitOn(local, remote *net.TCPAddr) (found, ok bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	defer f.Close()
	l, r := procAddr(local), procAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st ...; TIME_WAIT is state 06.
		fields := strings.Fields(sc.Text())
		if len(fields) >= 4 && fields[1] == l && fields[2] == r && fields[3] == "06" {
			return true, true
		}
	}
	return false, true
}

// procAddr writes an IPv4 address as /proc/net/tcp does: the address as a
// little-endian hex word, a colon, the port in hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}

// TestQuitLeavesNoTimeWait checks the point of waiting for the server to
// close: after Quit, the client's port is not in TIME_WAIT.
func TestQuitLeavesNoTimeWait(t *testing.T) {
	f := startFake(t, greeting+quit)
	c := mustDial(t, f, testOptions())
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	found, ok := timeWaitOn(local, remote)
	if !ok {
		t.Skip("no /proc/net/tcp")
	}
	if found {
		t.Errorf("client port %d is in TIME_WAIT: the client closed first", local.Port)
	}
}
