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
