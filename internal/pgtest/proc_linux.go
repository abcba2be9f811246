package pgtest

import (
	"os/exec"
	"syscall"
)

// procAttr runs the server in its own process group (Kill stops its
// backends with it) as cred, and kills it when the test binary dies
// without its cleanup (a timeout's panic, a SIGKILL).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to the command's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
