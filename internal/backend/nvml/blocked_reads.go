package nvmlbackend

import (
	"sync"
	"time"
)

// blockedReads tracks device reads still running after their Read gave up
// on them, so that no second read of a hung device is started.
type blockedReads struct {
	mu        sync.Mutex
	running   map[int]int       // reads in flight per device
	abandoned map[int]bool      // a Read gave up on the device's read in flight
	since     map[int]time.Time // when the device's oldest read in flight began
}

// start registers a read of device i, beginning now; false when an
// abandoned read of it is still blocked.
func (b *blockedReads) start(i int, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.startLocked(i, now)
}

// startUnlessStuck is start, but a read of device i in flight for hold or
// longer (a Read on the caller left behind in a hung call) is abandoned
// first, so that no second read of the hung GPU starts.
func (b *blockedReads) startUnlessStuck(i int, now time.Time, hold time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[i] > 0 && now.Sub(b.since[i]) >= hold {
		b.abandoned[i] = true
	}
	return b.startLocked(i, now)
}

func (b *blockedReads) startLocked(i int, now time.Time) bool {
	if b.abandoned[i] {
		return false
	}
	if b.running == nil {
		b.running, b.abandoned, b.since = map[int]int{}, map[int]bool{}, map[int]time.Time{}
	}
	if b.running[i] == 0 {
		b.since[i] = now
	}
	b.running[i]++
	return true
}

// runningFor is how long device i has had a read (or start-up call) in
// flight; 0 when it has none.
func (b *blockedReads) runningFor(i int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[i] == 0 {
		return 0
	}
	return time.Since(b.since[i])
}

func (b *blockedReads) finish(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running[i]--
	if b.running[i] == 0 {
		delete(b.running, i)
		delete(b.abandoned, i)
		delete(b.since, i)
	}
}

// isAbandoned says whether device i has a call that was given up on and
// has not returned yet.
func (b *blockedReads) isAbandoned(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.abandoned[i]
}

func (b *blockedReads) abandon(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[i] > 0 {
		b.abandoned[i] = true
	}
}
