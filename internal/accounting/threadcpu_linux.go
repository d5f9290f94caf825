package accounting

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// threadCPU reads the calling thread's CPU clock with a raw system call:
// clock_gettime returns at once, and through unix.ClockGettime (a plain
// Syscall, which tells the scheduler it may block) its entry into the
// kernel woke the runtime's monitor thread from its sleep at every tick,
// to poll every 20 µs for a millisecond: about half the process's
// context switches at each tick (bench/RESULTS.md).
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	_, _, errno := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_THREAD_CPUTIME_ID, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, errno
	}
	return time.Duration(ts.Nano()), nil
}
