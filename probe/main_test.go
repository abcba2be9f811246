package probe

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/verifyd/verifyd/internal/leaktest"
)

// TestMain fails the run when any goroutine of the project is left once
// every test has cleaned up: SMTP sessions, egress waiters, resolver
// workers, world servers.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leaktest.Leaked(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left behind:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
