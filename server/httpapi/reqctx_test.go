package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRequestContext: a request's context behaves as context.WithTimeout
// of Background does (Deadline, Done closed at the deadline or at the
// request's end, Err, children), and costs one allocation when nothing
// asks for its Done channel (TestRequestContextDoNotAllocate).
func TestRequestContext(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		c := newRequestContext(50 * time.Millisecond)
		defer c.finish()
		if d, ok := c.Deadline(); !ok || time.Until(d) > 50*time.Millisecond {
			t.Fatalf("Deadline %v %v", d, ok)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		select {
		case <-c.Done():
		case <-time.After(time.Minute):
			t.Fatal("Done not closed at the deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline: %v", err)
		}
	})
	t.Run("err past the deadline without Done", func(t *testing.T) {
		c := newRequestContext(-time.Second)
		defer c.finish()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err: %v", err)
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Err says expired, Done is open")
		}
	})
	t.Run("finish", func(t *testing.T) {
		for _, askDone := range []bool{false, true} {
			c := newRequestContext(time.Hour)
			if askDone {
				_ = c.Done()
			}
			c.finish()
			select {
			case <-c.Done():
			default:
				t.Fatalf("Done open after finish (Done asked before: %v)", askDone)
			}
			if err := c.Err(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Err after finish (Done asked before: %v): %v", askDone, err)
			}
		}
	})
	t.Run("children", func(t *testing.T) {
		c := newRequestContext(time.Hour)
		child, cancel := context.WithTimeout(c, time.Hour)
		defer cancel()
		if d, _ := child.Deadline(); !d.Equal(c.deadline) {
			t.Errorf("child deadline %v, want the request's %v", d, c.deadline)
		}
		c.finish()
		select {
		case <-child.Done():
		case <-time.After(time.Minute):
			t.Fatal("a child not canceled at the request's end")
		}
		if !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("child Err %v", child.Err())
		}
	})
}

// TestRequestContextDoNotAllocate: a request whose context nobody waits
// on costs the context itself and nothing more (no timer).
func TestRequestContextDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	n := testing.AllocsPerRun(100, func() {
		c := newRequestContext(time.Minute)
		_ = c.Err()
		_, _ = c.Deadline()
		c.finish()
	})
	if n > 1 {
		t.Errorf("%v allocations per request, want 1", n)
	}
}
