package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// requestContext is a request's context (Context): Background with a
// deadline. The channel Done returns, and the timer that closes it at the
// deadline, are made by the first call that needs them (Done, Err past
// the deadline, a child context): a request that meets only Pebble,
// whose calls never wait on Done, costs no timer. context.WithTimeout
// made one for every request, and its allocations and timer-heap work
// were a few per cent of a cache hit's CPU.
type requestContext struct {
	deadline time.Time
	once     sync.Once
	made     atomic.Bool // inner is set
	inner    context.Context
	cancel   context.CancelFunc
}

func newRequestContext(timeout time.Duration) *requestContext {
	return &requestContext{deadline: time.Now().Add(timeout)}
}

// done makes inner, a context with the deadline, unless finish has
// ended the request.
func (c *requestContext) done() context.Context {
	c.once.Do(func() {
		c.inner, c.cancel = context.WithDeadline(context.Background(), c.deadline)
		c.made.Store(true)
	})
	return c.inner
}

// finish ends the request: its context is canceled, as by the cancel
// function of context.WithTimeout.
func (c *requestContext) finish() {
	c.once.Do(func() {
		c.inner, c.cancel = canceled, func() {}
		c.made.Store(true)
	})
	c.cancel()
}

// canceled is the context of a request finished before anything asked
// for its Done channel.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (c *requestContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *requestContext) Done() <-chan struct{} { return c.done().Done() }

func (c *requestContext) Err() error {
	if !c.made.Load() && time.Now().Before(c.deadline) {
		return nil
	}
	return c.done().Err()
}

// Value has no values of its own. Once inner is made it answers for it,
// so that a child context (context.WithCancel and kin, which call Done
// first) finds inner's canceler and joins it without a goroutine.
func (c *requestContext) Value(key any) any {
	if c.made.Load() {
		return c.inner.Value(key)
	}
	return nil
}

func (c *requestContext) String() string { return "httpapi.requestContext" }
