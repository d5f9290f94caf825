package pipeline

import (
	"context"
	"sync"
	"time"
)

// deadlineContext is context.WithDeadline(parent, deadline) whose timer,
// and its registration with parent, are made only when something asks for
// Done. A collection on its caller's goroutine (Options.OwnCaller: the
// accounting's tick, every --accounting.interval) mostly asks only Err and Deadline,
// between GPUs and before waiting for anything, and neither needs a timer:
// the two a collection made with context.WithTimeout (the read's and the
// enrichers') were a measurable share of a tick's CPU in a serving
// process (bench/RESULTS.md). Something that waits on Done gets the real context
// then, with the same deadline.
//
// One difference from context.WithDeadline: without a Done asked for, Err
// has nothing to remember which came first, the deadline or parent's end,
// and answers parent's error when both have happened.
type deadlineContext struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	armed    context.Context // made at the first Done
	cancel   context.CancelFunc
	released bool
}

// withLazyDeadline returns parent with deadline, and the function that
// releases it (as a CancelFunc: Err answers Canceled after it, and Done is
// closed).
func withLazyDeadline(parent context.Context, deadline time.Time) (*deadlineContext, context.CancelFunc) {
	c := &deadlineContext{parent: parent, deadline: deadline}
	return c, c.release
}

func (c *deadlineContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *deadlineContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		c.armed, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.released {
			c.cancel()
		}
	}
	return c.armed.Done()
}

func (c *deadlineContext) Err() error {
	c.mu.Lock()
	armed, released := c.armed, c.released
	c.mu.Unlock()
	if armed != nil {
		return armed.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if released {
		return context.Canceled
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *deadlineContext) Value(key any) any { return c.parent.Value(key) }

func (c *deadlineContext) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.cancel != nil {
		c.cancel()
	}
}
