package mtatest

import "syscall"

// procAttr runs unshare in its own process group and kills it when the
// test binary dies without its cleanup (a timeout's panic, a SIGKILL); its
// --kill-child then takes the daemon's namespace with it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
