//go:build !linux

package accounting

import (
	"errors"
	"time"
)

// threadCPU cannot read a thread's CPU clock here: the accounting runs on
// Linux only (it needs the NVML backend), so the tick's CPU is not counted.
func threadCPU() (time.Duration, error) {
	return 0, errors.New("a thread's CPU clock is read on Linux only")
}
