//go:build !linux

package egress

import "syscall"

// bindNoPort is Linux's IP_BIND_ADDRESS_NO_PORT; elsewhere binding is left
// as it is.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }
