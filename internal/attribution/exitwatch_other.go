//go:build !linux

package attribution

import "errors"

// Exit watching uses Linux's pidfds and epoll (exitwatch_linux.go).
// Elsewhere every cached process is checked every RevalidateInterval.

// exitWatcher is never made: newExitWatcher always says why.
type exitWatcher struct {
	// open returns a pidfd for pid; never called here.
	open func(pid int) (int, error)
}

var errNoPidfds = errors.New("process exit watching needs Linux's pidfds")

func newExitWatcher(string) (*exitWatcher, error) { return nil, errNoPidfds }

func (w *exitWatcher) add(int, *pidEntry) error { return errNoPidfds }

func (w *exitWatcher) remove(*pidEntry) {}

func (w *exitWatcher) exited(func(*pidEntry)) error { return nil }

func (w *exitWatcher) close() error { return nil }

// closePidfd has nothing to close: no pidfd is ever opened here.
func closePidfd(int32) {}
