package attribution

import (
	"sync"
	"testing"
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

// finishRevalidation waits for the background PID-reuse check that the
// last Enrich started, if any, so that the next Enrich merges it.
func finishRevalidation(t testing.TB, a *Attributor) {
	t.Helper()
	a.mu.Lock()
	job := a.revalidation
	a.mu.Unlock()
	if job == nil {
		t.Fatal("no revalidation was started")
	}
	select {
	case <-job.done:
	case <-time.After(10 * time.Second):
		t.Fatal("revalidation did not finish")
	}
}
