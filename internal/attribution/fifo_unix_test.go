//go:build !windows

package attribution

import "syscall"

// mkfifo makes a named pipe: a procfs file whose read blocks.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
