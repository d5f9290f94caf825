//go:build cgo

package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A directory whose owner died (as a SIGKILLed gpuwatch's would) is removed;
// one whose owner runs, and one being created (no owner file yet), are kept.
func TestRemoveStaleDirectories(t *testing.T) {
	parent := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		dir := filepath.Join(parent, dirPattern+name)
		if err := os.MkdirAll(filepath.Join(dir, "proc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	gone := mk("gone", strconv.Itoa(dead.ProcessState.Pid()))
	mine := mk("mine", strconv.Itoa(os.Getpid()))
	starting := mk("starting", "")
	other := filepath.Join(parent, "something-else")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if n := removeStale(parent); n != 1 {
		t.Errorf("removed %d directories, want 1", n)
	}
	for dir, want := range map[string]bool{gone: false, mine: true, starting: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}
