package accounting

import (
	"runtime"
	"time"
)

// What the ticks cost, as gpuwatch_accounting_cpu_seconds_total shows it:
// the CPU time of the tick's own thread, from the thread's CPU clock
// (CLOCK_THREAD_CPUTIME_ID: user and system time, so a real driver's
// calls into the kernel count), with the goroutine locked to its thread
// for the tick so that nothing else runs there meanwhile. What the Go
// runtime does for the ticks on other threads (garbage collection of what
// a tick allocated, waking the process at each tick) is not in it, nor
// the owner lookups a tick starts and does not wait for: they cannot be
// told apart from the rest of the process's. In a serve that something
// else keeps awake (the XID waiters, by default) they add little; in one
// that only the ticks wake, about as much again as the ticks
// (bench/RESULTS.md, "Accounting").

// onTickThread runs tick on the calling goroutine, locked to its thread,
// and returns the thread CPU time it took; ok is false when the thread's
// clock cannot be read.
func onTickThread(tick func()) (cpu time.Duration, ok bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, err := threadCPU()
	tick()
	if err != nil {
		return 0, false
	}
	end, err := threadCPU()
	if err != nil || end < start {
		return 0, false
	}
	return end - start, true
}
