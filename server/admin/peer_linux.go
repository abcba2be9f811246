package admin

import (
	"net"
	"syscall"
)

// peerCred asks the kernel who connected (SO_PEERCRED, unix(7)).
func peerCred(c net.Conn) peer {
	for {
		w, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			break
		}
		c = w.Unwrap() // conns.Conn, the lingering close's wrapper
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return peer{}
	}
	return peer{uid: int(cred.Uid), pid: int(cred.Pid), known: true}
}
