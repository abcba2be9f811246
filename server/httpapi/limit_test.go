package httpapi

import (
	"sync"
	"testing"
	"time"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestLimiterFixedWindow(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 1, 1, 10, 0, 10, 0, time.UTC)}
	l := newLimiter(clk.Now)
	lim := Limit{3, time.Minute}
	for i := range 3 {
		if ok, _ := l.allow("1.2.3.4", ClassValidate, lim); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	ok, wait := l.allow("1.2.3.4", ClassValidate, lim)
	if ok || wait != 50*time.Second {
		t.Fatalf("4th: ok=%v wait=%s, want refused with 50s left in the window", ok, wait)
	}
	// Other keys and routes have their own windows.
	if ok, _ := l.allow("5.6.7.8", ClassValidate, lim); !ok {
		t.Fatal("another key refused")
	}
	if ok, _ := l.allow("1.2.3.4", ClassBatch, lim); !ok {
		t.Fatal("another route refused")
	}
	// The next window starts afresh.
	clk.Advance(50 * time.Second)
	if ok, _ := l.allow("1.2.3.4", ClassValidate, lim); !ok {
		t.Fatal("refused in the next window")
	}
	// Uncapped.
	for range 100 {
		if ok, _ := l.allow("x", ClassOther, Limit{}); !ok {
			t.Fatal("uncapped refused")
		}
	}
}

func TestLimiterConcurrent(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	l := newLimiter(clk.Now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if ok, _ := l.allow("k", ClassValidate, Limit{500, time.Minute}); ok {
					mu.Lock()
					passed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if passed != 500 {
		t.Fatalf("%d passed of 1000, want exactly 500", passed)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 59 * time.Second: 59} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("%s: %d, want %d", d, got, want)
		}
	}
}
