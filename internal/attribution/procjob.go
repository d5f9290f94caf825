package attribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// procRequest asks for one process: knownStart is the start time cached for
// the PID (0 when none), so that an unchanged process costs one read of
// /proc/PID/stat.
type procRequest struct {
	pid        uint32
	knownStart uint64
	// exited: the cached process is known to have exited (its pidfd said
	// so), so /proc/PID being gone is expected, not an error.
	exited bool
}

type procResult struct {
	pid       uint32
	unchanged bool // still the process with knownStart; facts not re-read
	facts     procFacts
	err       error
	// pidfd is the process's pidfd, opened before its facts were read
	// (exitwatch.go), or -1. Whoever takes the result closes it or hands
	// it to the cache entry.
	pidfd int32
}

// procJob reads a batch of processes in the background.
type procJob struct {
	results []procResult
	done    chan struct{}
	started time.Time
	// outcome says who owns the results' pidfds: the Attributor that
	// merges the job once it finished, or, for a job it abandoned (or
	// dropped on Close), the job itself, which closes them when its
	// reads return.
	outcome atomic.Int32
	// reading holds, per worker, the pid being read (0 when idle), so
	// that a job abandoned as stuck can say which process it is stuck on.
	reading [procWorkers]atomic.Uint32
}

// stuckPIDs returns the processes whose reads have not returned.
func (j *procJob) stuckPIDs() []uint32 {
	var pids []uint32
	for i := range j.reading {
		if pid := j.reading[i].Load(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

const (
	jobRunning int32 = iota
	jobFinished
	jobAbandoned
)

// giveUp makes the job close its own pidfds when it finishes. It returns
// false when the job has finished already: its results are the caller's
// to merge or close.
func (j *procJob) giveUp() bool {
	return j.outcome.CompareAndSwap(jobRunning, jobAbandoned)
}

// closePidfds closes the pidfds of results nobody will merge.
func (j *procJob) closePidfds() {
	for i := range j.results {
		closePidfd(j.results[i].pidfd)
		j.results[i].pidfd = -1
	}
}

// procWorkers is how many new processes are read at once: more than one,
// so that one process stuck in the kernel does not hold up the rest.
// Revalidation, which nothing waits for, uses one worker, so as to take
// one core at most from the rest of the exporter.
const procWorkers = 4

// startProcJob reads reqs in the background. openPidfd, when not nil,
// opens a pidfd for each process whose facts are read.
func startProcJob(r *procReader, openPidfd func(pid int) (int, error), errs *errorCounts, log *slog.Logger, reqs []procRequest, workers int, now time.Time) *procJob {
	job := &procJob{results: make([]procResult, len(reqs)), done: make(chan struct{}), started: now}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(workers, procWorkers, len(reqs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				job.reading[w].Store(reqs[i].pid)
				job.results[i] = readOne(r, openPidfd, errs, log, reqs[i])
				job.reading[w].Store(0)
			}
		})
	}
	go func() {
		wg.Wait()
		if !job.outcome.CompareAndSwap(jobRunning, jobFinished) {
			job.closePidfds() // abandoned: nobody will merge it
		}
		close(job.done)
	}()
	return job
}

// maxReadsInFlight bounds the /proc reads running at once across all jobs.
// Reads that return take microseconds, so in practice it bounds the reads
// stuck in the kernel (each holds a goroutine and an OS thread) when many
// processes hang at once.
const maxReadsInFlight = 32

// errReadBusy: a read of the PID is already running (stuck), or too many
// reads are; no new one was started.
var errReadBusy = errors.New("an earlier read of this process has not returned (stuck in the kernel); not read again until it does")

// readsInFlight counts the reads of each PID that have not returned, so that
// a process stuck in the kernel is never read a second time meanwhile:
// otherwise every revalidation of it would strand one more goroutine and
// thread.
type readsInFlight struct {
	mu   sync.Mutex
	pids map[uint32]int
}

// begin registers a read of pid; false (nothing registered) when one is
// already running or maxReadsInFlight are.
func (f *readsInFlight) begin(pid uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pids == nil {
		f.pids = make(map[uint32]int)
	}
	if f.pids[pid] > 0 || len(f.pids) >= maxReadsInFlight {
		return false
	}
	f.pids[pid]++
	return true
}

func (f *readsInFlight) end(pid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pids[pid]--; f.pids[pid] <= 0 {
		delete(f.pids, pid)
	}
}

// count is how many PIDs have a read running.
func (f *readsInFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pids)
}

func readOne(r *procReader, openPidfd func(pid int) (int, error), errs *errorCounts, log *slog.Logger, req procRequest) procResult {
	res := procResult{pid: req.pid, pidfd: -1}
	if !r.inFlight.begin(req.pid) {
		res.err = fmt.Errorf("/proc/%d: %w", req.pid, errReadBusy)
		errs.add(SourceProcfs)
		return res
	}
	defer r.inFlight.end(req.pid)
	if req.knownStart != 0 {
		start, err := r.startTime(int(req.pid))
		if err == nil && start == req.knownStart {
			res.unchanged = true
			return res
		}
		if req.exited && errors.Is(err, errProcGone) {
			res.err = err
			return res
		}
	}
	if openPidfd != nil {
		// Before the reads: the facts are then those of the pidfd's
		// process, or the pidfd reports that it exited.
		if fd, err := openPidfd(int(req.pid)); err == nil {
			res.pidfd = int32(fd)
		} else {
			log.Debug("no pidfd; the process will be checked periodically", "pid", req.pid, "err", err)
		}
	}
	res.facts, res.err = r.read(int(req.pid))
	if res.err != nil {
		// Counted, and logged at debug level only: a process that exits
		// between the driver's list and this read is ordinary.
		errs.add(SourceProcfs)
		level := slog.LevelDebug
		if !errors.Is(res.err, errProcGone) {
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "reading process failed", "pid", req.pid, "err", res.err)
	}
	return res
}
