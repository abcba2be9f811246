package probe

import (
	"context"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// share gives real-time validations the first claim on the machine: while
// any is in flight, batch work may have at most limit SMTP sessions open
// (more wait for one to end, or for the real-time ones to finish); with
// none in flight, batch sessions are bounded only by the batch pool. A
// batch burst (a thousand domains' sessions at once) otherwise takes the
// CPU and the network that single validations, each waited for by a
// person, need: their p99 tripled during a batch (bench/RESULTS.md,
// scenario 4).
type share struct {
	limit int // 0: no limit

	mu       sync.Mutex
	realtime int           // real-time validations in flight
	batch    int           // batch sessions open
	changed  chan struct{} // closed when either count drops
	maxBatch int           // most batch sessions open while real-time ran (tests)
}

var batchSessions = metrics.NewGauge(`verifyd_probe_batch_sessions`, nil)

func newShare(limit int) *share { return &share{limit: limit, changed: make(chan struct{})} }

// realtimeStart and realtimeEnd bracket a real-time validation.
func (s *share) realtimeStart() {
	s.mu.Lock()
	s.realtime++
	s.mu.Unlock()
}

func (s *share) realtimeEnd() {
	s.mu.Lock()
	s.realtime--
	if s.realtime == 0 {
		s.wake()
	}
	s.mu.Unlock()
}

// batchStart waits until a batch session may open, or ctx ends (false).
func (s *share) batchStart(ctx context.Context) bool {
	s.mu.Lock()
	for s.limit > 0 && s.realtime > 0 && s.batch >= s.limit {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
		s.mu.Lock()
	}
	s.batch++
	if s.realtime > 0 {
		s.maxBatch = max(s.maxBatch, s.batch)
	}
	batchSessions.Inc()
	s.mu.Unlock()
	return true
}

func (s *share) batchEnd() {
	s.mu.Lock()
	s.batch--
	batchSessions.Dec()
	s.wake()
	s.mu.Unlock()
}

// wake lets the waiters look again; s.mu is held.
func (s *share) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}
