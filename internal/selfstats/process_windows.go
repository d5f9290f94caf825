package selfstats

import (
	"fmt"
	"time"

	"golang.org/x/sys/windows"
)

// maxFDs has no answer: Windows has no limit on open handles to report
// (process_max_fds is absent, never 0). process_open_fds and the memory
// sizes, read from /proc/self, are absent too.
func maxFDs() (float64, bool) { return 0, false }

// CPUTime is the CPU time the process has used so far, user and kernel,
// every thread (GetProcessTimes: 100 ns units).
func CPUTime() (time.Duration, error) {
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user); err != nil {
		return 0, fmt.Errorf("GetProcessTimes: %w", err)
	}
	return filetimeSpan(kernel) + filetimeSpan(user), nil
}

// filetimeSpan is a FILETIME that holds a span (100 ns units), not a date.
func filetimeSpan(t windows.Filetime) time.Duration {
	return time.Duration(uint64(t.HighDateTime)<<32|uint64(t.LowDateTime)) * 100
}
