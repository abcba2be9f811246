package harness

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// syscallCounter counts the system calls of a process over an interval
// with Linux perf's raw_syscalls:sys_enter tracepoint (`perf stat -p`),
// when the machine has perf and lets the harness use it (root, or
// kernel.perf_event_paranoid low enough); otherwise it counts nothing.
// perf follows the threads the process has when it starts: a Go process
// past its warm-up makes few new ones.
type syscallCounter struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

var perfOK = sync.OnceValue(func() bool {
	if _, err := exec.LookPath("perf"); err != nil {
		return false
	}
	out, err := exec.Command("perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true").CombinedOutput()
	return err == nil && strings.Contains(string(out), "raw_syscalls:sys_enter")
})

// startSyscalls starts counting pid's system calls; nil when it cannot.
func startSyscalls(pid int) *syscallCounter {
	if pid == 0 || !perfOK() {
		return nil
	}
	s := &syscallCounter{done: make(chan error, 1)}
	s.cmd = exec.Command("perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", strconv.Itoa(pid))
	s.cmd.Stderr = &s.out
	if err := s.cmd.Start(); err != nil {
		return nil
	}
	go func() { s.done <- s.cmd.Wait() }()
	// perf attaches to the threads before it counts.
	time.Sleep(50 * time.Millisecond)
	return s
}

// stop ends the count and returns it; ok is false when there is none.
func (s *syscallCounter) stop() (n float64, ok bool) {
	if s == nil {
		return 0, false
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		return 0, false
	}
	// CSV lines: "count,unit,event,...".
	for _, line := range strings.Split(s.out.String(), "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 3 && f[2] == "raw_syscalls:sys_enter" {
			v, err := strconv.ParseFloat(f[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}
