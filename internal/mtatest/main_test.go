package mtatest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when a daemon's process or the goroutine that
// waits for it is left once every test has cleaned up.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := leftovers()
			if left == "" {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "left behind:\n%s\n", left)
				code = 1
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	os.Exit(code)
}

// leftovers describes this process's children (unshare and whatever it
// ran) and the package's goroutines still there.
func leftovers() string {
	var left []string
	for _, p := range children(os.Getpid()) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		left = append(left, fmt.Sprintf("process %d (%s)", p, strings.TrimSpace(string(comm))))
	}
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "verifyd/internal/mtatest.") && !strings.Contains(g, "mtatest.TestMain") &&
			!strings.Contains(g, "mtatest.leftovers") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}
