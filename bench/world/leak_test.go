package world

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// serverGoroutines counts the goroutines running the world's servers: SMTP
// listeners and sessions, and the DNS server. Counting by stack, rather than
// comparing runtime.NumGoroutine before and after, is immune to goroutines of
// earlier tests that are still winding down.
func serverGoroutines() (int, string) {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "world.(*hostServer)") || strings.Contains(g, "world.(*session)") ||
			strings.Contains(g, "world.(*DNSServer)") || strings.Contains(g, "miekg/dns.(*Server)") {
			n++
			found = append(found, g)
		}
	}
	return n, strings.Join(found, "\n\n")
}

// waitServerGoroutines waits until the count satisfies ok, or fails.
func waitServerGoroutines(t testing.TB, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, stacks := serverGoroutines()
		if ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d server goroutines:\n%s", what, n, stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
