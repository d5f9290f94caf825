//go:build cgo

package nvmlbackend

import (
	"sync"
	"time"
)

// Each device is read on a goroutine of its own, so that a GPU whose
// calls block does not hold up the others nor the Read (readDevices gives
// up on it at the deadline). A new goroutine per device per Read grew its
// stack afresh for the deep read path at every read (a tenth of the
// accounting's tick, when it still read through workers). Long-lived
// workers, one per device index, keep theirs. The accounting's reader
// reads on its caller instead (read_on_caller.go).

// deviceRead is one read of one device, handed to a worker.
type deviceRead struct {
	index   int
	listAll bool
	done    chan<- deviceDone
}

// deviceDone is a finished device read.
type deviceDone struct {
	index  int
	result *deviceResult
}

// deviceWorkers are the Reader's workers, started at a device's first read
// and stopped by Close.
type deviceWorkers struct {
	mu     sync.Mutex
	jobs   []chan deviceRead // by device index; nil until started
	closed bool
}

// start runs job on device job.index's worker, or on a new goroutine when
// that worker is busy (a concurrent Read's read of the device, or a read
// blocked in a hung GPU) or the workers are stopped.
func (w *deviceWorkers) start(r *Reader, job deviceRead) {
	if jobs := w.worker(r, job.index); jobs != nil {
		select {
		case jobs <- job:
			return
		default:
		}
	}
	go r.runDeviceRead(job)
}

// worker is device i's job channel, its worker started if need be; nil
// after stop.
func (w *deviceWorkers) worker(r *Reader, i int) chan deviceRead {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if i >= len(w.jobs) {
		w.jobs = append(w.jobs, make([]chan deviceRead, i+1-len(w.jobs))...)
	}
	if w.jobs[i] == nil {
		// Unbuffered: a job is handed only to a worker waiting for one.
		jobs := make(chan deviceRead)
		w.jobs[i] = jobs
		go func() {
			for job := range jobs {
				r.runDeviceRead(job)
			}
		}()
	}
	return w.jobs[i]
}

// stop ends the workers; one inside a blocked call ends when it returns.
func (w *deviceWorkers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, jobs := range w.jobs {
		if jobs != nil {
			close(jobs)
		}
	}
	w.jobs = nil
}

// runDeviceRead reads one device and hands the result to the Read that
// asked for it. The result is kept even when that Read has given up on
// it: a late reading serves the next collections (latereads.go).
func (r *Reader) runDeviceRead(job deviceRead) {
	defer r.blocked.finish(job.index)
	res := r.readAndKeep(job.index, time.Now(), job.listAll)
	job.done <- deviceDone{job.index, res} // buffered: never blocks
}

// readAndKeep reads device i, begun at started, and keeps the result as
// its newest completed reading.
func (r *Reader) readAndKeep(i int, started time.Time, listAll bool) *deviceResult {
	res := r.newResult(i)
	r.readDevice(i, res, listAll)
	res.device.ReadingAge = time.Since(started)
	r.completed.store(i, res, started)
	return res
}

// newResult is the result of a read of device i: for the accounting's
// reader the device's result of the read before the last one, emptied
// (alternating.go: its snapshot, and any later one that served it late, are
// done with by now, and a newer reading is kept in its place), for any
// other reader a new one.
func (r *Reader) newResult(i int) *deviceResult {
	if !r.processSamples {
		return new(deviceResult)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.results) {
		r.results = append(r.results, make([]*resultPair, i+1-len(r.results))...)
	}
	p := r.results[i]
	if p == nil {
		p = new(resultPair)
		r.results[i] = p
	}
	res := &p.bufs[p.turn]
	p.turn ^= 1
	*res = deviceResult{}
	return res
}

// resultPair is one device's two results that take turns.
type resultPair struct {
	bufs [2]deviceResult
	turn int
}
