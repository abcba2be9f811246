package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/panjf2000/ants/v2"

	"github.com/verifyd/verifyd/internal/phase"
	"github.com/verifyd/verifyd/probe/address"
)

// ErrOverloaded is returned when a pool's queue is full.
var ErrOverloaded = errors.New("probe: too many probes waiting")

// Pools runs the engine on two ants worker pools: one for real-time single
// validations and one for batch work, each sized by configuration, so a big
// batch never takes the workers single validations need.
type Pools struct {
	engine   *Engine
	realtime *ants.Pool
	batch    *ants.Pool
}

// PoolOptions sizes the pools.
type PoolOptions struct {
	// Realtime and Batch are the worker counts. Defaults 512 and 1024.
	Realtime, Batch int
	// QueueRealtime and QueueBatch bound the tasks waiting for a worker;
	// beyond them a submission fails with ErrOverloaded. Defaults: 4× the
	// worker count.
	QueueRealtime, QueueBatch int
}

// DefaultRealtimeWorkers and DefaultBatchWorkers are PoolOptions'
// defaults, the daemon's too (probe.realtime_workers, probe.batch_workers).
const (
	DefaultRealtimeWorkers = 512
	DefaultBatchWorkers    = 1024
)

// NewPools starts the pools.
func NewPools(e *Engine, o PoolOptions) (*Pools, error) {
	if o.Realtime <= 0 {
		o.Realtime = DefaultRealtimeWorkers
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatchWorkers
	}
	if o.QueueRealtime <= 0 {
		o.QueueRealtime = 4 * o.Realtime
	}
	if o.QueueBatch <= 0 {
		o.QueueBatch = 4 * o.Batch
	}
	panicked := func(v any) {
		e.log.Error("probe task panicked", "panic", fmt.Sprint(v))
	}
	rt, err := ants.NewPool(o.Realtime, ants.WithMaxBlockingTasks(o.QueueRealtime),
		ants.WithPanicHandler(panicked), ants.WithExpiryDuration(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("probe: real-time pool: %w", err)
	}
	bt, err := ants.NewPool(o.Batch, ants.WithMaxBlockingTasks(o.QueueBatch),
		ants.WithPanicHandler(panicked), ants.WithExpiryDuration(time.Minute))
	if err != nil {
		rt.Release()
		return nil, fmt.Errorf("probe: batch pool: %w", err)
	}
	p := &Pools{engine: e, realtime: rt, batch: bt}
	currentPools.Store(p)
	return p, nil
}

// currentPools is what the pool gauges report: the last Pools made.
var currentPools atomic.Pointer[Pools]

func poolGauge(name string, f func(*Pools) int) {
	metrics.NewGauge(name, func() float64 {
		if p := currentPools.Load(); p != nil {
			return float64(f(p))
		}
		return 0
	})
}

func init() {
	poolGauge(`verifyd_probe_workers_busy{pool="realtime"}`, func(p *Pools) int { return p.realtime.Running() })
	poolGauge(`verifyd_probe_workers_busy{pool="batch"}`, func(p *Pools) int { return p.batch.Running() })
	poolGauge(`verifyd_probe_queue_waiting{pool="realtime"}`, func(p *Pools) int { return p.realtime.Waiting() })
	poolGauge(`verifyd_probe_queue_waiting{pool="batch"}`, func(p *Pools) int { return p.batch.Waiting() })
}

// Verify runs Engine.VerifyInput on a real-time worker and waits for it, or for
// ctx to end. A probe whose ctx ended before a worker took it is not run.
//
// A probe a worker has started is waited for even past ctx's end: the
// engine ends it at the deadline itself (a tarpit's result, unknown/timeout,
// comes exactly then), and dropping it would turn a verdict into an error.
func (p *Pools) Verify(ctx context.Context, in address.Input) (*Result, error) {
	ch := make(chan *Result, 1)
	var started atomic.Bool
	submitted := time.Now()
	err := submit(p.realtime, func() {
		if !started.CompareAndSwap(false, true) || ctx.Err() != nil {
			ch <- nil
			return
		}
		waited := time.Since(submitted)
		phase.Observe(phase.Queue, waited)
		p.engine.share.realtimeQueued(waited)
		ch <- p.engine.VerifyInput(ctx, in)
	})
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r == nil {
			return nil, ctx.Err()
		}
		return r, nil
	case <-ctx.Done():
		if started.CompareAndSwap(false, true) {
			return nil, ctx.Err() // no worker took it: it will not run
		}
		if r := <-ch; r != nil {
			return r, nil
		}
		return nil, ctx.Err()
	}
}

// VerifyDomain runs Engine.VerifyInputs on a batch worker and waits for it.
// Like Verify, work a worker has started is waited for.
func (p *Pools) VerifyDomain(ctx context.Context, ins []address.Input, prefer netip.Addr) ([]*Result, error) {
	ch := make(chan []*Result, 1)
	var started atomic.Bool
	submitted := time.Now()
	err := submit(p.batch, func() {
		if !started.CompareAndSwap(false, true) || ctx.Err() != nil {
			ch <- nil
			return
		}
		phase.Since(phase.Queue, submitted)
		ch <- p.engine.VerifyInputs(ctx, ins, prefer)
	})
	if err != nil {
		return nil, err
	}
	select {
	case rs := <-ch:
		if rs == nil {
			return nil, ctx.Err()
		}
		return rs, nil
	case <-ctx.Done():
		if started.CompareAndSwap(false, true) {
			return nil, ctx.Err()
		}
		if rs := <-ch; rs != nil {
			return rs, nil
		}
		return nil, ctx.Err()
	}
}

// submit hands f to pool; a task panic is recovered (and logged by the
// pool's handler) so one bad input cannot take verifyd down.
func submit(pool *ants.Pool, f func()) error {
	err := pool.Submit(f)
	switch {
	case errors.Is(err, ants.ErrPoolOverload):
		return ErrOverloaded
	case err != nil:
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// Busy reports the workers running in each pool.
func (p *Pools) Busy() (realtime, batch int) { return p.realtime.Running(), p.batch.Running() }

// Close stops taking work and waits up to timeout for running probes.
func (p *Pools) Close(timeout time.Duration) error {
	err := errors.Join(p.realtime.ReleaseTimeout(timeout), p.batch.ReleaseTimeout(timeout))
	done := make(chan struct{})
	go func() { p.engine.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		err = errors.Join(err, errors.New("probe: sessions still saying QUIT"))
	}
	return err
}
