package jobs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// EndedDir is the directory, in the accounting directory, where a Slurm
// node epilog (deploy/slurm/gpuwatch-epilog.sh) says a job ended: an empty
// file named by the job ID. Slurm still lists a job whose epilog runs
// (COMPLETING), and gpuwatch reads the job list at most every
// --slurm.poll-interval; the mark lets the next accounting tick write the
// record at once, if none of the job's processes is left.
const EndedDir = "ended"

// staleMark is how long a mark of a job this node never saw is kept.
const staleMark = time.Hour

var jobIDPattern = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)

// MarkEnded writes the end mark of Slurm job id in dir (what the epilog
// does, for tests and tools).
func MarkEnded(dir, id string) error {
	if !jobIDPattern.MatchString(id) {
		return fmt.Errorf("job ID %q: want digits (an array task: JOB_TASK)", id)
	}
	if err := os.MkdirAll(filepath.Join(dir, EndedDir), 0o770); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, EndedDir, id), nil, 0o640)
}

// endMarks reads the end marks at every accounting tick, but lists the
// directory only when it may have changed: a mark made or removed changes
// the directory's modification time. Listing it (open, read, close, a
// stat per mark) was a sixth of a tick with records on; a stat is one
// call. The directory is listed anyway when its time is too close to the
// last listing's to tell a later change from it (a file system's times
// may be coarse), and at least every endMarksRelist, which removes stale
// marks in time.
type endMarks struct {
	dir string
	// marks is the last listing's answer; seen the directory's state
	// then, and listedAt when it was made (zero: never).
	marks    map[string]bool
	seen     dirState
	listedAt time.Time
	listings int // for tests
}

// dirState is what changes when a directory's entries change.
type dirState struct {
	modTime time.Time
	size    int64
	exists  bool
}

func (a dirState) same(b dirState) bool {
	return a.exists == b.exists && a.size == b.size && a.modTime.Equal(b.modTime)
}

// endMarksRelist bounds how long a listing of the end marks is kept.
const endMarksRelist = time.Minute

// read returns the job keys marked ended (shared until the next read:
// do not modify it).
func (m *endMarks) read(now time.Time) map[string]bool {
	var st dirState
	if info, err := os.Stat(filepath.Join(m.dir, EndedDir)); err == nil {
		st = dirState{modTime: info.ModTime(), size: info.Size(), exists: true}
	}
	fresh := !m.listedAt.IsZero() && now.Sub(m.listedAt) < endMarksRelist && now.After(m.listedAt)
	if fresh && st.same(m.seen) && (!st.exists || m.listedAt.Sub(st.modTime) > 2*time.Second) {
		return m.marks
	}
	m.marks, m.seen, m.listedAt = readEndMarks(m.dir, now), st, now
	m.listings++
	return m.marks
}

// readEndMarks returns the job keys marked ended, and removes marks older
// than staleMark.
func readEndMarks(dir string, now time.Time) map[string]bool {
	entries, err := os.ReadDir(filepath.Join(dir, EndedDir))
	if err != nil {
		return nil
	}
	marks := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !jobIDPattern.MatchString(name) {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > staleMark {
			_ = os.Remove(filepath.Join(dir, EndedDir, name))
			continue
		}
		marks[jobKey(name, "", "")] = true
	}
	return marks
}

// removeEndMark removes the mark of a job whose record was written.
func removeEndMark(dir, id string) {
	if !jobIDPattern.MatchString(id) {
		return
	}
	_ = os.Remove(filepath.Join(dir, EndedDir, id)) // gone already: nothing to do
}
