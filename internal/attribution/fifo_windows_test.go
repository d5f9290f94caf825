package attribution

import "errors"

// mkfifo: Windows has no named pipes in the file system, and no procfs
// for attribution to read.
func mkfifo(string) error { return errors.New("no FIFOs on Windows") }
