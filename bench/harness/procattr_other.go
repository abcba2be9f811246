//go:build !linux

package harness

import "syscall"

// childAttr puts a child in its own process group, so a Ctrl-C at the
// terminal reaches only the harness, which stops its children in order.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
