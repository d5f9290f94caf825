//go:build cgo

package demo

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A demo's directory is removed when gpuwatch stops, but a gpuwatch killed
// with SIGKILL (or by the OOM killer) cannot remove it. Each directory
// therefore names its owner in ownerFile, and the next demo to start removes
// the directories whose owner is gone.

const (
	dirPattern = "gpuwatch-demo-"
	ownerFile  = "owner.pid"
)

// markOwner records this process as the directory's owner.
func markOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

// removeStale removes the demo directories in parent whose owner process no
// longer runs, and returns how many it removed. A directory without an owner
// file (one being created right now) is left alone.
func removeStale(parent string) int {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPattern) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if os.RemoveAll(dir) == nil {
			removed++
		}
	}
	return removed
}

// alive reports whether a process with that PID exists (EPERM: it does,
// owned by someone else).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
