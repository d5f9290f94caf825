//go:build cgo

package nvmlbackend

import (
	"slices"
	"sync"
	"time"
)

// A slow driver (seen on hosts without persistence mode: bench/RESULTS.md)
// takes longer to read a GPU than the collection's deadline allows. Such
// a GPU answers: it is not down. Its read runs on past the deadline, and
// the reading it returns is kept here and served, with its age, by the
// collections that follow, until the next read of the GPU returns. A GPU
// is down only when no read of it has returned for Options.DownAfter
// (DownAfterTimeouts collection timeouts): a GPU that stops answering
// altogether is still reported down, a little later.

// DownAfterTimeouts is how many collection timeouts a GPU's read may run
// before the GPU is reported down (not_answering) rather than served from
// its last completed reading. Three: a slow driver's read of a GPU takes
// more than one default collection timeout but well under two
// (bench/RESULTS.md), so a slow driver keeps its GPUs up with room to
// spare, while a GPU that stops answering is reported down within three
// timeouts of its last answer's read.
const DownAfterTimeouts = 3

// completedReadings keeps, per device, the newest reading whose read
// returned, in time or late.
// By device index, in a slice: the accounting's reader stores a reading
// of every GPU at every tick.
type completedReadings struct {
	mu   sync.Mutex
	last []completedReading // result nil: none yet
}

type completedReading struct {
	result  *deviceResult
	started time.Time // when its read began
}

// store keeps res as device i's newest reading unless a reading of a read
// that began later is already kept.
func (c *completedReadings) store(i int, res *deviceResult, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.last) {
		c.last = append(c.last, make([]completedReading, i+1-len(c.last))...)
	}
	if prev := c.last[i]; prev.result != nil && prev.started.After(started) {
		return
	}
	c.last[i] = completedReading{res, started}
}

func (c *completedReadings) get(i int) (completedReading, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.last) || c.last[i].result == nil {
		return completedReading{}, false
	}
	return c.last[i], true
}

// lateOrDown stands in for device i when its read has not returned by
// the collection's deadline: its newest completed reading, with its age,
// while no read of it has been running for DownAfter; otherwise the
// device is down (not_answering).
func (r *Reader) lateOrDown(i int) *deviceResult {
	last, ok := r.completed.get(i)
	if !ok || r.blocked.runningFor(i) >= r.downAfter {
		return &deviceResult{device: r.notAnswering(i)}
	}
	res := &deviceResult{device: last.result.device, processes: last.result.processes}
	res.device.ReadingAge = time.Since(last.started)
	// The accounting's reader's samples are in a buffer that its read
	// after next fills again (alternating.go), and this snapshot may be
	// in use then: a copy. (Its processes are copied into the snapshot.)
	// Any other reader's samples are its own, never written again.
	if r.processSamples {
		res.device.ProcessSamples = slices.Clone(res.device.ProcessSamples)
	}
	// Its errors still stand; its durations were counted when it was read.
	for g := range numGroups {
		res.stats[g].err = last.result.stats[g].err
	}
	return res
}
