//go:build cgo

package nvmlbackend

import (
	"sync"
	"time"
)

// blockedReads tracks device reads still running after their Read gave up
// on them, so that no second read of a hung device is started.
//
// It is kept by device index (devices are numbered 0..count-1), in a
// slice rather than maps: the accounting's reader starts and finishes a
// read of every GPU at every tick, and three map writes and deletes per
// GPU were a few per cent of a tick.
type blockedReads struct {
	mu  sync.Mutex
	dev []blockedDevice
}

// blockedDevice is one device's reads in flight.
type blockedDevice struct {
	running   int       // reads in flight
	abandoned bool      // a Read gave up on the read in flight
	since     time.Time // when the oldest read in flight began
}

// of is device i's entry, made if need be; call with mu held.
func (b *blockedReads) of(i int) *blockedDevice {
	if i >= len(b.dev) {
		b.dev = append(b.dev, make([]blockedDevice, i+1-len(b.dev))...)
	}
	return &b.dev[i]
}

// peek is device i's entry, a zero one when it has none; call with mu held.
func (b *blockedReads) peek(i int) blockedDevice {
	if i < 0 || i >= len(b.dev) {
		return blockedDevice{}
	}
	return b.dev[i]
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
	if d := b.of(i); d.running > 0 && now.Sub(d.since) >= hold {
		d.abandoned = true
	}
	return b.startLocked(i, now)
}

func (b *blockedReads) startLocked(i int, now time.Time) bool {
	d := b.of(i)
	if d.abandoned {
		return false
	}
	if d.running == 0 {
		d.since = now
	}
	d.running++
	return true
}

// runningFor is how long device i has had a read (or start-up call) in
// flight; 0 when it has none.
func (b *blockedReads) runningFor(i int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.peek(i)
	if d.running == 0 {
		return 0
	}
	return time.Since(d.since)
}

func (b *blockedReads) finish(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.of(i)
	d.running--
	if d.running <= 0 {
		*d = blockedDevice{}
	}
}

// isAbandoned says whether device i has a call that was given up on and
// has not returned yet.
func (b *blockedReads) isAbandoned(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peek(i).abandoned
}

func (b *blockedReads) abandon(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.of(i); d.running > 0 {
		d.abandoned = true
	}
}
