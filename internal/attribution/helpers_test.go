package attribution

import (
	"sync"
	"time"
)

// fakeClock is a settable clock for cache expiry tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// snapshot returns a copy of the counts, for tests.
func (ec *errorCounts) snapshot() map[string]uint64 {
	m := make(map[string]uint64)
	ec.copyInto(m)
	return m
}
