package nvmlbackend

import (
	"context"
	"sync"
	"time"
)

// Reading in turn (Options.ReadInTurn): one goroutine reads a Read's GPUs
// one after another, and the Read waits for it once. Handing each GPU to
// its own worker costs two goroutine hand-offs per GPU, each a futex wake
// on an idle process: for the accounting's reader, which reads eight GPUs
// every two seconds and whose reads each take a fraction of a
// millisecond, the hand-offs and wake-ups cost more than the reads
// (bench/RESULTS.md).
//
// A hung GPU must still not hold up the others: when the GPU being read
// has taken longer than its share of the deadline (slotHold), or the
// deadline comes, the Read takes the GPUs not yet read back and reads them
// in parallel as usual (readDevices), and the GPU in flight is left to its
// read, whose result comes like any device worker's.

// turn is one Read's devices, read in turn.
type turn struct {
	listAll bool
	done    chan<- deviceDone // after a hand-over, the result of the device in flight

	mu sync.Mutex
	// The goroutine reads devices next..end-1; the Read lowers end when
	// it takes the rest back.
	next, end int
	// current is the device being read, since started; -1 for none.
	current int
	started time.Time
	// handedBack: the Read took the rest back; the device in flight's
	// result then goes to done, not to results.
	handedBack bool
	results    []*deviceResult
	// finished is closed when the goroutine has read its last device
	// (not after a hand-back: the Read waits for done then).
	finished chan struct{}
}

// readInTurn reads devices 0..count-1 in turn into results. It returns the
// first device it did not read (count when it read them all) and how many
// of its reads are still in flight, their results to come on done (0 or
// 1): readDevices reads the rest. When the turn goroutine is busy (a
// hung GPU's read in an earlier turn), it reads nothing.
func (r *Reader) readInTurn(ctx context.Context, count int, listAll bool, results []*deviceResult, done chan<- deviceDone) (next, pending int) {
	t := &turn{listAll: listAll, done: done, end: count, current: -1, results: results, finished: make(chan struct{})}
	if !r.workers.startTurn(r, t) {
		return 0, 0
	}
	hold := slotHold(ctx, count, 1)
	timer := slotTimer(hold)
	defer releaseSlotTimer(timer)
	for {
		select {
		case <-t.finished:
			return count, 0
		case now := <-timer.C:
			if next, pending, ok := t.handBack(now, hold); ok {
				return next, pending
			}
			timer.Reset(t.untilStuck(now, hold))
		case <-ctx.Done():
			next, pending, _ := t.handBack(time.Now(), -1)
			return next, pending
		}
	}
}

// handBack takes the devices not read yet back from the turn when the
// device being read has been for at least hold (always, for a negative
// hold); ok says it did.
func (t *turn) handBack(now time.Time, hold time.Duration) (next, pending int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if hold >= 0 && (t.current < 0 || now.Sub(t.started) < hold) {
		return 0, 0, false
	}
	t.handedBack, t.end = true, t.next
	if t.current >= 0 {
		pending = 1
	}
	return t.next, pending, true
}

// untilStuck is how long until the device being read has been for hold.
func (t *turn) untilStuck(now time.Time, hold time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current < 0 {
		return hold
	}
	return max(t.started.Add(hold).Sub(now), time.Millisecond)
}

// runTurn reads the turn's devices, on the turn goroutine.
func (r *Reader) runTurn(t *turn) {
	for {
		t.mu.Lock()
		if t.next >= t.end {
			t.current = -1
			t.mu.Unlock()
			close(t.finished)
			return
		}
		i := t.next
		t.next++
		t.current, t.started = i, time.Now()
		t.mu.Unlock()

		res := r.readOrLate(i, t.started, t.listAll)

		t.mu.Lock()
		t.current = -1
		if t.handedBack {
			t.mu.Unlock()
			t.done <- deviceDone{i, res} // buffered: never blocks
			return
		}
		t.results[i] = res
		t.mu.Unlock()
	}
}

// readOrLate reads device i, or, when an abandoned read of it is still
// blocked, serves its last reading (or reports it down) as readDevices
// does.
func (r *Reader) readOrLate(i int, now time.Time, listAll bool) *deviceResult {
	if !r.blocked.start(i, now) {
		return r.lateOrDown(i)
	}
	defer r.blocked.finish(i)
	return r.readAndKeep(i, now, listAll)
}
