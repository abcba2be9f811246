package smtpclient

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: the client
// starts none of its own, and every fake server must have finished.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var left []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if left = leftover(); len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leaked %d goroutine(s):\n\n%s\n", len(left), strings.Join(left, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// leftover returns the stacks of the goroutines that are neither this one
// nor the runtime's and the test framework's own (signal handling, which
// the fuzzing engine starts).
func leftover() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case strings.Contains(g, "smtpclient.TestMain"),
			strings.Contains(g, "os/signal.signal_recv"),
			strings.Contains(g, "runtime.goexit") && !strings.Contains(g, "smtpclient"):
			continue
		}
		left = append(left, g)
	}
	return left
}
