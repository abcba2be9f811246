package harness

import "syscall"

// childAttr puts a child in its own process group, so a Ctrl-C at the
// terminal reaches only the harness, which stops its children in order, and
// has the kernel kill the child if the harness dies without stopping it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
