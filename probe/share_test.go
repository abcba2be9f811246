package probe

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestLimiterAIMD walks the limiter through pressure and calm with a
// scripted scheduler reading: it falls by the backoff to its floor under
// pressure, holds without demand, climbs back by steps with demand, and
// climbs while no real-time validation runs.
func TestLimiterAIMD(t *testing.T) {
	var sched time.Duration
	l := newLimiter(64, limiterOptions{sched: func() time.Duration { return sched }})
	now := time.Unix(1e9, 0)
	tick := func(rt, demand bool, queued time.Duration) bool {
		now = now.Add(l.o.Interval)
		return l.update(now, rt, demand, queued)
	}
	if l.limit() != 64 || l.min != 16 {
		t.Fatalf("limit %d, floor %d; want 64 and 16", l.limit(), l.min)
	}
	sched = time.Millisecond
	var n int
	for l.limit() > 16 {
		if tick(true, true, 0) {
			t.Fatal("the limit grew under pressure")
		}
		n++
	}
	if want := 13; n != want { // 64×0.9ⁿ < 17
		t.Errorf("floor after %d intervals, want %d", n, want)
	}
	tick(true, true, 0)
	if l.limit() != 16 {
		t.Errorf("below the floor: %d", l.limit())
	}
	// Pressure without real-time work in flight is not the batch's to
	// yield to: the limit climbs.
	if !tick(false, false, 0) || l.limit() != 19 {
		t.Errorf("idle real-time: limit %d, want 19", l.limit())
	}
	sched = 50 * time.Microsecond
	if tick(true, false, 0) || l.limit() != 19 {
		t.Errorf("no demand: limit %d, want it held at 19", l.limit())
	}
	// A real-time validation that queued for a worker is pressure too.
	tick(true, true, 50*time.Millisecond)
	if l.limit() != 17 {
		t.Errorf("after a queued real-time validation: %d, want 17", l.limit())
	}
	n = 0
	for l.limit() < 64 {
		if !tick(true, true, time.Millisecond) {
			t.Fatal("calm with demand, yet the limit did not grow")
		}
		n++
	}
	if n != 16 {
		t.Errorf("back to the full share after %d intervals, want 16", n)
	}
	tick(true, true, 0)
	if l.limit() != 64 {
		t.Errorf("above the full share: %d", l.limit())
	}
}

// saturate keeps every CPU busy with eight goroutines a CPU, each running
// a millisecond at a time, until the returned func is called.
func saturate() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for start := time.Now(); time.Since(start) < time.Millisecond; {
				}
				runtime.Gosched()
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// TestSchedReader: with eight goroutines per CPU each running a
// millisecond at a time, a runnable goroutine waits for several of them;
// the reader's mean over that time shows it (and the first read, which
// only sets the baseline, does not count what came before).
func TestSchedReader(t *testing.T) {
	var r schedReader
	r.mean()
	stop := saturate()
	time.Sleep(300 * time.Millisecond)
	busy := r.mean()
	stop()
	if busy < 500*time.Microsecond {
		t.Errorf("%d goroutines a CPU running 1 ms at a time: scheduler mean %v, want at least 0.5 ms", 8, busy)
	}
	t.Logf("mean with %d busy goroutines: %v", 8*runtime.GOMAXPROCS(0), busy)
}

// TestShareUnderCPUSaturation: with a real-time validation in flight and
// batch work asking for room, a load that saturates every CPU (eight
// goroutines a CPU, each running a millisecond at a time) brings the
// batch share down to its floor; once the load stops, the share climbs
// back to the full share. (TestBatchYieldsToRealtime checks that batch
// sessions keep within the share.)
func TestShareUnderCPUSaturation(t *testing.T) {
	s := newShare(64, limiterOptions{})
	s.realtimeStart()
	defer s.realtimeEnd()
	ctx := t.Context()
	// Batch work: sessions that open, hold a moment and end, always
	// more of them than the limit.
	stopBatch := make(chan struct{})
	var batch sync.WaitGroup
	for range 96 {
		batch.Add(1)
		go func() {
			defer batch.Done()
			for {
				select {
				case <-stopBatch:
					return
				default:
				}
				if !s.batchStart(ctx) {
					return
				}
				time.Sleep(2 * time.Millisecond)
				s.batchEnd()
			}
		}()
	}
	limit := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lim.limit()
	}
	stopLoad := saturate()
	floor := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if limit() == 16 {
			floor = true
			break
		}
	}
	stopLoad()
	if !floor {
		t.Errorf("the CPU saturated, yet the share stayed at %d (floor 16)", limit())
	}
	full := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if limit() == 64 {
			full = true
			break
		}
	}
	close(stopBatch)
	// Let the batch goroutines waiting for room go.
	s.realtimeEnd()
	batch.Wait()
	s.realtimeStart()
	if !full {
		t.Errorf("the load stopped, yet the share stayed at %d (full 64)", limit())
	}
}

// TestShareRealtimeGap: the moment between two real-time validations (no
// validation in flight, the API charging the last one) is not idleness:
// a batch session beyond the share still waits, and goes once real-time
// traffic has been quiet for realtimeIdle.
func TestShareRealtimeGap(t *testing.T) {
	s := newShare(4, limiterOptions{SchedTarget: -1, QueueTarget: -1})
	s.realtimeStart()
	for range 4 {
		if !s.batchStart(t.Context()) {
			t.Fatal("batchStart failed")
		}
	}
	s.realtimeEnd()
	opened := make(chan struct{})
	go func() {
		if s.batchStart(t.Context()) {
			close(opened)
		}
	}()
	select {
	case <-opened:
		t.Fatal("a fifth batch session opened right after a real-time validation ended")
	case <-time.After(realtimeIdle / 5):
	}
	select {
	case <-opened:
	case <-time.After(10 * realtimeIdle):
		t.Fatal("real-time traffic stopped, yet the batch session never opened")
	}
}
