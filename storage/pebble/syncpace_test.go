package pebble

import (
	"testing"
	"time"
)

// The floor between WAL fsyncs applies only while synced commits come
// faster than the busy rate, measured over paceWindow.
func TestSyncPacer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	p := newSyncPacer(250*time.Microsecond, 4000)
	p.now = func() time.Time { return now }
	p.lastAt.Store(now.UnixNano())
	step := func(commits int, d time.Duration) time.Duration {
		for range commits {
			p.count()
		}
		now = now.Add(d)
		return p.minSyncInterval()
	}
	if got := step(10, paceWindow); got != 0 {
		t.Errorf("500 commits/s: floor %v", got)
	}
	if got := step(100, paceWindow); got != 250*time.Microsecond { // 5,000/s
		t.Errorf("5,000 commits/s: floor %v", got)
	}
	// Within a window the decision stands.
	if got := step(0, paceWindow/4); got != 250*time.Microsecond {
		t.Errorf("mid-window: floor %v", got)
	}
	// The next window is quiet again (counted from the last check).
	if got := step(10, paceWindow); got != 0 {
		t.Errorf("back to a trickle: floor %v", got)
	}
}
