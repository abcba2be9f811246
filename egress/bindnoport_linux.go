package egress

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT on a socket about to be bound to
// a source address (Linux 4.2+): the kernel then picks the source port at
// connect, knowing the destination, instead of at bind. Without it every
// bind searches for a port free on that address for any destination: slow
// with thousands of sessions from one address, and it runs out of ports
// long before the (source, destination) pairs run out.
func bindNoPort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
	if err != nil {
		return err
	}
	if serr == unix.ENOPROTOOPT {
		return nil // an older kernel: bind as before
	}
	return serr
}
