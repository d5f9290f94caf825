//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"time"
)

// Reading on the caller (readMode.onCaller): the Read's own goroutine
// reads its GPUs one after another. Handing a GPU to another goroutine and
// back wakes a second thread of an otherwise idle process each way: for
// the accounting's reader, which reads every GPU at every tick and whose
// reads are short, those wake-ups cost a large share of a tick
// (bench/RESULTS.md).
//
// A call that hangs in the driver then holds the caller, which cannot be
// helped here: the caller (accounting.Accountant.Run) leaves such a Read
// behind and reads again on another goroutine. That Read finds the hung
// GPU's read in flight for longer than its share of the deadline and
// serves the GPU from its last completed reading, or as down, without
// calling it again (blockedReads), as a parallel Read does. The Read left
// behind, when its call returns, finds a newer Read started and stops
// (errSuperseded) before it reads another GPU or builds a snapshot, whose
// buffers the newer Reads use.

// errSuperseded is a Read on the caller that a newer Read overtook while a
// call of it was blocked.
var errSuperseded = errors.New("nvml read left behind: a newer read started while a GPU's call of it was blocked")

// readOnCaller reads devices 0..count-1 into results, one after another,
// for the Read numbered read. At the deadline the GPUs not read yet are
// served from their last completed reading, or as down.
func (r *Reader) readOnCaller(ctx context.Context, read uint64, count int, listAll bool, results []*deviceResult) error {
	hold := slotHold(ctx, count, 1)
	for i := range count {
		if r.latestRead.Load() != read {
			return errSuperseded
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			for ; i < count; i++ {
				results[i] = r.lateOrDown(i)
			}
			return nil
		}
		now := time.Now()
		if !r.blocked.startUnlessStuck(i, now, hold) {
			results[i] = r.lateOrDown(i)
			continue
		}
		results[i] = r.readAndKeep(i, now, listAll)
		r.blocked.finish(i)
	}
	return nil
}
