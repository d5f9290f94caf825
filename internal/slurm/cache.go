package slurm

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// cachedResult is one command's latest outcome.
type cachedResult struct {
	Value    any // parsed value; nil when Err is set
	Err      error
	Duration time.Duration // how long the invocation took
	At       time.Time     // when it finished
}

// pollCache runs a fetch at most once per interval, however many scrapes
// ask, and joins concurrent callers onto the one invocation in flight
// (single flight), so N Prometheus servers scraping at once cost the
// controller one squeue, not N. Failures are cached too: a struggling
// controller is not hammered harder.
type pollCache struct {
	interval time.Duration
	now      func() time.Time
	fetch    func(ctx context.Context) (any, error)
	// onResult is called once per invocation (for error counters).
	onResult func(cachedResult)
	// changed, when set, is counted up at every result stored.
	changed *atomic.Uint64

	mu       sync.Mutex
	last     *cachedResult
	inflight *flight
	runs     uint64 // counts the results stored in last
}

type flight struct {
	done   chan struct{}
	result cachedResult
}

// get returns the cached result when it is younger than the interval, else
// runs (or joins) an invocation. The invocation itself is bounded by the
// runner's timeout and is not cancelled when one caller gives up: the
// others still want its answer. ctx only bounds this caller's wait.
func (c *pollCache) get(ctx context.Context) cachedResult {
	c.mu.Lock()
	if c.last != nil && c.now().Sub(c.last.At) < c.interval {
		r := *c.last
		c.mu.Unlock()
		return r
	}
	f := c.inflight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.inflight = f
		go c.run(f)
	}
	c.mu.Unlock()

	select {
	case <-f.done:
		return f.result
	case <-ctx.Done():
		return cachedResult{Err: ctx.Err(), At: c.now()}
	}
}

// fresh returns the cached result when it is younger than the interval,
// and which result it is (counted by runs), without starting an
// invocation or waiting; ok false otherwise.
func (c *pollCache) fresh() (r cachedResult, run uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && c.now().Sub(c.last.At) < c.interval {
		return *c.last, c.runs, true
	}
	return cachedResult{}, 0, false
}

func (c *pollCache) run(f *flight) {
	start := time.Now()
	v, err := c.fetch(context.Background())
	f.result = cachedResult{Value: v, Err: err, Duration: time.Since(start), At: c.now()}
	if c.onResult != nil {
		c.onResult(f.result)
	}
	c.mu.Lock()
	r := f.result
	c.last = &r
	c.runs++
	c.inflight = nil
	if c.changed != nil {
		c.changed.Add(1)
	}
	c.mu.Unlock()
	close(f.done)
}
