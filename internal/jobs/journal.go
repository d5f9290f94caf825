package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// JournalName is the journal's file in the accounting directory; rotated
// files add .1 (the newest) to .N.
const JournalName = "jobs.jsonl"

// Defaults of the journal's rotation: 4 files of 16 MiB at most, some
// 100 000 records of an 8-GPU node.
const (
	DefaultJournalMaxBytes = 16 << 20
	DefaultJournalFiles    = 4
)

// Journal is an append-only file of records, one JSON line each, fsync'd
// before Append returns. When a record would take the file past maxBytes
// the file is rotated: jobs.jsonl becomes jobs.jsonl.1, .1 becomes .2 and
// so on, and the oldest beyond files in all is deleted. So the journal
// never holds more than files × maxBytes (plus one record), but while a
// rotation fails (see Append).
//
// What it guarantees: a record Append accepted is on disk, whole, on its
// own line; a record it refused left nothing behind (the file is cut back
// to its last complete record before anything else is written). The
// directory is locked for one writer as long as the Journal is open.
type Journal struct {
	dir      *safeDir
	maxBytes int64
	files    int

	mu sync.Mutex
	f  *os.File
	// size is the end of the last complete record; dirty says bytes past
	// it may be on disk (a write or sync failed and the cut failed too).
	size  int64
	dirty bool
	// rotateErr is the last rotation's error, nil once one succeeded.
	rotateErr error
	stats     JournalStats
}

// JournalStats say how the journal's writes went since it was opened.
type JournalStats struct {
	// WriteErrors counts appends and rotations that failed.
	WriteErrors uint64
	// LastWrite is when a record was last written and synced (zero: none).
	LastWrite time.Time
	// RotateErr is why the last rotation failed, nil once one succeeded.
	RotateErr error
}

// rotationSlack is how far past maxBytes the current file may grow while
// its rotation fails: records keep being written (none is lost for an
// obstacle in the directory) within a bound.
const rotationSlack = 2

// OpenJournal opens (or creates) the journal in dir, after checking that
// the directory belongs to this process's user or root and is writable by
// no one else. A last line left half-written by a crash is cut off, so the
// next record starts a line. Rotated files beyond files (left by a larger
// --accounting.journal-files) are removed.
func OpenJournal(dir string, maxBytes int64, files int) (*Journal, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultJournalMaxBytes
	}
	if files <= 0 {
		files = DefaultJournalFiles
	}
	d, err := openSafeDir(dir)
	if err != nil {
		return nil, fmt.Errorf("accounting directory: %w", err)
	}
	// One writer per directory: a second gpuwatch on it would interleave
	// records and checkpoints. The lock is the directory's, so it is held
	// across rotations, and goes with the process however it ends.
	if err := d.lock(); err != nil {
		_ = d.close()
		return nil, fmt.Errorf("accounting directory %s: locked by another gpuwatch (%w)", d.path, err)
	}
	j := &Journal{dir: d, maxBytes: maxBytes, files: files}
	if err := j.open(); err != nil {
		_ = d.close()
		return nil, err
	}
	return j, nil
}

func rotatedName(n int) string {
	if n == 0 {
		return JournalName
	}
	return JournalName + "." + strconv.Itoa(n)
}

func (j *Journal) open() error {
	f, err := j.dir.open(JournalName, syscall.O_RDWR|syscall.O_CREAT)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	size, err := cutTornLine(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("journal %s: %w", JournalName, err)
	}
	j.f, j.size, j.dirty = f, size, false
	if info, err := f.Stat(); err == nil && size > 0 && j.stats.LastWrite.IsZero() {
		j.stats.LastWrite = info.ModTime()
	}
	return nil
}

// RemoveExtraFiles removes rotated files numbered files or more, which a
// larger --accounting.journal-files left; it returns those it could not
// remove (a directory in the way), with why.
func (j *Journal) RemoveExtraFiles() []error {
	entries, err := os.ReadDir(j.dir.path)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, e := range entries {
		if n, ok := rotatedNumber(e.Name()); ok && n >= j.files {
			if err := j.dir.remove(e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// rotatedNumber is N of jobs.jsonl.N.
func rotatedNumber(name string) (int, bool) {
	if len(name) <= len(JournalName)+1 || name[:len(JournalName)+1] != JournalName+"." {
		return 0, false
	}
	n, err := strconv.Atoi(name[len(JournalName)+1:])
	return n, err == nil && n > 0 && strconv.Itoa(n) == name[len(JournalName)+1:]
}

// Append writes r as one line and syncs it to disk. An error means r is
// not in the journal and nothing of it is: the caller keeps it and tries
// again. A rotation that fails is retried at the next Append; meanwhile
// the record goes on the current file, up to rotationSlack × maxBytes.
func (j *Journal) Append(r Record) error {
	r.Running = false
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal closed")
	}
	if err := j.cutBack(); err != nil {
		return j.failed(err)
	}
	if j.size > 0 && j.size+int64(len(line)) > j.maxBytes {
		if err := j.rotate(); err != nil {
			j.rotateErr = err
			j.stats.WriteErrors++
			if j.size+int64(len(line)) > rotationSlack*j.maxBytes {
				return fmt.Errorf("%w; the current file is full (%d bytes)", err, j.size)
			}
		} else {
			j.rotateErr = nil
		}
	}
	if _, err := j.f.WriteAt(line, j.size); err != nil {
		j.dirty = true
		return j.failed(fmt.Errorf("journal: %w", errors.Join(err, j.cutBack())))
	}
	if err := j.f.Sync(); err != nil {
		j.dirty = true
		return j.failed(fmt.Errorf("journal: %w", errors.Join(err, j.cutBack())))
	}
	j.size += int64(len(line))
	j.stats.LastWrite = time.Now()
	return nil
}

func (j *Journal) failed(err error) error {
	j.stats.WriteErrors++
	return err
}

// cutBack removes what a failed write may have left past the last
// complete record.
func (j *Journal) cutBack() error {
	if !j.dirty {
		return nil
	}
	if err := j.f.Truncate(j.size); err != nil {
		return fmt.Errorf("cutting a failed write back to the last record: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("cutting a failed write back to the last record: %w", err)
	}
	j.dirty = false
	return nil
}

// rotate shifts the files by one and starts an empty journal. It checks
// every rotated name first, so an obstacle (a directory) fails it before
// anything moved; the current file stays open until its rename succeeded.
func (j *Journal) rotate() error {
	for n := 1; n < j.files; n++ {
		k, err := j.dir.kind(rotatedName(n))
		if err != nil {
			return fmt.Errorf("journal rotation: %w", err)
		}
		if k != 0 && k != syscall.S_IFREG {
			return fmt.Errorf("journal rotation: %s is not a regular file: move it out of the accounting directory", rotatedName(n))
		}
	}
	if j.files > 1 {
		if err := j.dir.remove(rotatedName(j.files - 1)); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("journal rotation: %w", err)
		}
	}
	for n := j.files - 2; n >= 1; n-- {
		if err := j.dir.rename(rotatedName(n), rotatedName(n+1)); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("journal rotation: %w", err)
		}
	}
	old := j.f
	if k, err := j.dir.kind(JournalName); err == nil && k == 0 {
		// A rename that went through before the new file could be made.
	} else if j.files > 1 {
		if err := j.dir.rename(JournalName, rotatedName(1)); err != nil {
			return fmt.Errorf("journal rotation: %w", err)
		}
	} else if err := j.dir.remove(JournalName); err != nil {
		return fmt.Errorf("journal rotation: %w", err)
	}
	if err := j.dir.sync(); err != nil {
		return fmt.Errorf("journal rotation: %w", err)
	}
	if err := j.open(); err != nil {
		// The old file, now rotated, takes the records until a new one
		// can be made; its offset and size stand.
		return fmt.Errorf("journal rotation: %w", err)
	}
	_ = old.Close()
	return nil
}

// Stats returns how the journal's writes went.
func (j *Journal) Stats() JournalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.RotateErr = j.rotateErr
	return s
}

// Close closes the journal and releases the directory's lock.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := errors.Join(j.f.Close(), j.dir.close())
	j.f = nil
	return err
}
