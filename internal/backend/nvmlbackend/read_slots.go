//go:build cgo

package nvmlbackend

import (
	"context"
	"slices"
	"sync"
	"time"
)

// readSlots bounds how many device reads of one Read run at once
// (Options.Parallel). The bound is for throughput, not for safety: a read
// that has held its slot for longer than hold gives it up and runs on
// without one, so that a hung GPU does not keep a healthy one from being
// read before the deadline. The reads running without a slot are at most
// one per device (blockedReads).
//
// It lives in Read's own goroutine: one timer per Read, armed only while a
// device waits for a slot, instead of a timer per device read (the
// accounting reads every GPU at every tick).
type readSlots struct {
	size int
	hold time.Duration
	// holders are the reads that hold a slot, by device index, with when
	// each began.
	holders []slotHolder
	timer   *time.Timer // from slotTimers, when a device first waits for a slot
}

// slotTimers keeps the slot timers of finished Reads for the next ones.
var slotTimers sync.Pool

type slotHolder struct {
	index   int
	started time.Time
}

func newReadSlots(ctx context.Context, count, size int) readSlots {
	size = max(size, 1)
	return readSlots{size: size, hold: slotHold(ctx, count, size), holders: make([]slotHolder, 0, min(size, count))}
}

// free says whether a read may start now.
func (s *readSlots) free() bool { return len(s.holders) < s.size }

// take gives a slot to the read of device i, begun now.
func (s *readSlots) take(i int, now time.Time) {
	s.holders = append(s.holders, slotHolder{i, now})
}

// release frees the slot of device i's read, if it still holds one.
func (s *readSlots) release(i int) {
	s.holders = slices.DeleteFunc(s.holders, func(h slotHolder) bool { return h.index == i })
}

// expired is the channel that fires when the oldest holder's hold ends,
// armed by wait; nil (never fires) while no timer was needed.
func (s *readSlots) expired() <-chan time.Time {
	if s.timer == nil {
		return nil
	}
	return s.timer.C
}

// wait arms the timer for the oldest holder's hold, for a device that
// waits for a slot.
func (s *readSlots) wait(now time.Time) {
	if len(s.holders) == 0 {
		return
	}
	oldest := s.holders[0].started
	for _, h := range s.holders[1:] {
		if h.started.Before(oldest) {
			oldest = h.started
		}
	}
	d := oldest.Add(s.hold).Sub(now)
	if s.timer == nil {
		s.timer = slotTimer(d)
		return
	}
	// A stopped timer, or one whose hold passed: Reset drops a value it
	// may hold (Go 1.23 timers).
	s.timer.Reset(d)
}

// slotTimer is a timer from slotTimers (or a new one) that fires after d;
// hand it back with releaseSlotTimer.
func slotTimer(d time.Duration) *time.Timer {
	if t, ok := slotTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// releaseSlotTimer stops t and keeps it for the next Read.
func releaseSlotTimer(t *time.Timer) {
	t.Stop()
	slotTimers.Put(t)
}

// expire takes their slots from the reads that have held one for hold.
func (s *readSlots) expire(now time.Time) {
	s.holders = slices.DeleteFunc(s.holders, func(h slotHolder) bool { return now.Sub(h.started) >= s.hold })
}

// stop releases the timer.
func (s *readSlots) stop() {
	if s.timer != nil {
		releaseSlotTimer(s.timer)
		s.timer = nil
	}
}

// slotHold is how long one device read may keep its slot. Reads are split
// into rounds of one slot each, and each round may take half its share of
// the budget before its slots are handed on, so even when every GPU hangs
// each one gets started before the deadline.
func slotHold(ctx context.Context, count, slots int) time.Duration {
	const floor = 10 * time.Millisecond
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Second
	}
	rounds := (count + slots - 1) / max(slots, 1)
	return max(time.Until(deadline)/time.Duration(2*max(rounds, 1)), floor)
}
