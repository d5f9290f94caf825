//go:build !windows

package selfstats

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// maxFDs is the soft limit on open files (RLIMIT_NOFILE).
func maxFDs() (float64, bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0, false
	}
	return float64(lim.Cur), true
}

// CPUTime is the CPU time the process has used so far, user and system,
// every thread (getrusage: microseconds, where /proc/self/stat counts
// 10 ms clock ticks). process_cpu_seconds_total reports it; the
// benchmarks time their work by it.
func CPUTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
