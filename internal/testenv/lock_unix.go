//go:build !windows

package testenv

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f that other processes honour;
// without wait it fails at once when another process holds one. The lock
// goes with the process.
func lockFile(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	return syscall.Flock(int(f.Fd()), how)
}

func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// killPID sends SIGKILL to pid.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
