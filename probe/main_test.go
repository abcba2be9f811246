package probe

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when any goroutine of the project is left once
// every test has cleaned up: SMTP sessions, egress waiters, resolver
// workers, world servers.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitLeaks(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func waitLeaks(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "github.com/verifyd/verifyd/") && !strings.Contains(g, "probe.TestMain") &&
				!strings.Contains(g, "probe.waitLeaks") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
