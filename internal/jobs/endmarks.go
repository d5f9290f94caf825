package jobs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// DefaultEpilogDir is where the Slurm node epilog
// (deploy/slurm/gpuwatch-epilog.sh), run as root, says a job ended: an
// empty file named by the job ID. It is root's own directory, which
// gpuwatch only reads: root never writes in a directory gpuwatch's user
// controls. Slurm still lists a job whose epilog runs (COMPLETING), and
// gpuwatch reads the job list at most every --slurm.poll-interval; the
// mark lets the next accounting tick write the record at once, if none of
// the job's processes is left.
const DefaultEpilogDir = "/run/gpuwatch-epilog"

// DoneDir is gpuwatch's answer to the epilog, in the accounting
// directory: an empty file named by the job ID once the job's record is
// written, or once a marked job turns out to have had no GPU here. The
// epilog waits (a bounded time) for it, and only looks.
const DoneDir = "done"

// staleMark is how long a mark of a job this node never saw counts, and
// how long an answer is kept.
const staleMark = time.Hour

var jobIDPattern = regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`)

// MarkEnded writes the end mark of Slurm job id in the epilog's directory
// dir (what the epilog does, for tests and tools).
func MarkEnded(dir, id string) error {
	if !jobIDPattern.MatchString(id) {
		return fmt.Errorf("job ID %q: want digits (an array task: JOB_TASK)", id)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, id), nil, 0o644)
}

// endMarks reads the end marks at every accounting tick, but lists the
// directory only when it may have changed: a mark made or removed changes
// the directory's modification time. Listing it (open, read, close, a
// stat per mark) was a sixth of a tick with records on; a stat is one
// call. The directory is listed anyway when its time is too close to the
// last listing's to tell a later change from it (a file system's times
// may be coarse), and at least every endMarksRelist.
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
	if info, err := os.Stat(m.dir); err == nil {
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

// readEndMarks returns the job keys marked ended, but for marks older
// than staleMark (an epilog killed before it removed its mark).
func readEndMarks(dir string, now time.Time) map[string]bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	marks := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !jobIDPattern.MatchString(name) {
			continue
		}
		if info, err := e.Info(); err != nil || now.Sub(info.ModTime()) > staleMark {
			continue
		}
		marks[jobKey(name, "", "")] = true
	}
	return marks
}

// answers writes gpuwatch's answers to the epilog in DoneDir, in the
// accounting directory d.
type answers struct {
	d *safeDir
	// given are the answers written in the last staleMark, with when.
	given map[string]time.Time
	swept time.Time
}

// prepare makes DoneDir (0750) if missing.
func (a *answers) prepare() error {
	err := a.d.mkdir(DoneDir, 0o750)
	if err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("%s: %w", DoneDir, err)
	}
	if k, err := a.d.kind(DoneDir); err != nil || k != syscall.S_IFDIR {
		return fmt.Errorf("%s in the accounting directory is not a directory: move it away", DoneDir)
	}
	return nil
}

// done tells the epilog of Slurm job id that it need not wait.
func (a *answers) done(id string, now time.Time) error {
	if !jobIDPattern.MatchString(id) {
		return nil
	}
	if _, ok := a.given[id]; ok {
		return nil
	}
	sub, err := a.openDone()
	if err != nil {
		return err
	}
	defer sub.close()
	f, err := sub.open(id, syscall.O_WRONLY|syscall.O_CREAT)
	if err != nil {
		return err
	}
	if a.given == nil {
		a.given = map[string]time.Time{}
	}
	a.given[id] = now
	return f.Close()
}

// sweep removes answers older than staleMark, at most every
// endMarksRelist.
func (a *answers) sweep(now time.Time) {
	if now.Sub(a.swept) < endMarksRelist {
		return
	}
	a.swept = now
	for id, at := range a.given {
		if now.Sub(at) > staleMark {
			delete(a.given, id)
		}
	}
	sub, err := a.openDone()
	if err != nil {
		return
	}
	defer sub.close()
	names, _ := sub.f.Readdirnames(-1)
	for _, name := range names {
		if !jobIDPattern.MatchString(name) {
			continue
		}
		mtime, ok := sub.mtime(name)
		if !ok {
			continue
		}
		if now.Sub(mtime) > staleMark {
			_ = sub.remove(name)
		}
	}
}

// openDone opens DoneDir without following a link.
func (a *answers) openDone() (*safeDir, error) {
	sub, err := a.d.openSubdir(DoneDir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DoneDir, err)
	}
	return sub, nil
}
