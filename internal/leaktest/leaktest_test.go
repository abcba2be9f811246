package leaktest

import (
	"strings"
	"testing"
	"time"
)

// TestLeaked: a goroutine of the project still running is reported with
// its stack; once it ends, nothing is.
func TestLeaked(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	if got := Leaked(100 * time.Millisecond); !strings.Contains(got, "leaktest.TestLeaked") {
		t.Fatalf("a running goroutine not reported: %q", got)
	}
	close(stop)
	<-done
	if got := Leaked(5 * time.Second); got != "" {
		t.Fatalf("reported after it ended:\n%s", got)
	}
}
