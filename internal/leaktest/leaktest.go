// Package leaktest finds the goroutines of the project a package's tests
// left behind: SMTP sessions, egress waiters, resolver workers, world
// servers. A TestMain calls Leaked once every test has cleaned up, as
// miekg/dns's leak test and go.uber.org/goleak do.
package leaktest

import (
	"runtime"
	"strings"
	"time"
)

// module is the prefix of the project's own code in a stack.
const module = "github.com/verifyd/verifyd/"

// Leaked waits up to d for every goroutine running the project's code to
// end, and returns the stacks of those still there ("" when none). The
// goroutine that calls it (the TestMain's) is not counted.
func Leaked(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 {
				continue // runtime.Stack puts the caller's own first
			}
			if strings.Contains(g, module) {
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
