package jobs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
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
// never holds more than files × maxBytes (plus one record).
type Journal struct {
	dir      string
	maxBytes int64
	files    int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// OpenJournal opens (or creates) the journal in dir. A last line left
// half-written by a crash is cut off, so the next record starts a line.
func OpenJournal(dir string, maxBytes int64, files int) (*Journal, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultJournalMaxBytes
	}
	if files <= 0 {
		files = DefaultJournalFiles
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("accounting directory: %w", err)
	}
	j := &Journal{dir: dir, maxBytes: maxBytes, files: files}
	if err := j.open(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *Journal) path(n int) string {
	p := filepath.Join(j.dir, JournalName)
	if n > 0 {
		p += "." + strconv.Itoa(n)
	}
	return p
}

func (j *Journal) open() error {
	f, err := os.OpenFile(j.path(0), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	// One writer per journal: a second gpuwatch on the same directory
	// would interleave records and checkpoints. The lock goes with the
	// process, however it ends.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return fmt.Errorf("journal %s: locked by another gpuwatch (%w)", j.path(0), err)
	}
	size, err := cutTornLine(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("journal %s: %w", j.path(0), err)
	}
	j.f, j.size = f, size
	return nil
}

// cutTornLine truncates f after its last newline and leaves the offset at
// the end; it returns the size.
func cutTornLine(f *os.File) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || size == 0 {
		return size, err
	}
	// Look back for the last newline, a block at a time.
	const block = 4096
	end := size
	buf := make([]byte, block)
	for end > 0 {
		start := max(0, end-block)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = start + int64(i) + 1
			break
		}
		end = start
	}
	if end == size {
		return size, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	_, err = f.Seek(end, io.SeekStart)
	return end, err
}

// Append writes r as one line and syncs it to disk.
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
	if j.size > 0 && j.size+int64(len(line)) > j.maxBytes {
		if err := j.rotate(); err != nil {
			return err
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// rotate shifts the files by one and starts an empty journal.
func (j *Journal) rotate() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.f = nil
	if err := os.Remove(j.path(j.files - 1)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("journal rotation: %w", err)
	}
	for n := j.files - 2; n >= 0; n-- {
		if err := os.Rename(j.path(n), j.path(n+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal rotation: %w", err)
		}
	}
	if err := syncDir(j.dir); err != nil {
		return err
	}
	return j.open()
}

// Close closes the journal.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// ReadJournal reads every record of the journal in dir, oldest first,
// rotated files included. Lines that are not a record (a torn last line)
// are skipped and counted in skipped. A directory without a journal has
// no records.
func ReadJournal(dir string) (records []Record, skipped int, err error) {
	matches, _ := filepath.Glob(filepath.Join(dir, JournalName+".*"))
	var rotated []int
	for _, m := range matches {
		if n, err := strconv.Atoi(filepath.Ext(m)[1:]); err == nil && n > 0 {
			rotated = append(rotated, n)
		}
	}
	// The highest number is the oldest.
	slices.SortFunc(rotated, func(a, b int) int { return b - a })
	paths := make([]string, 0, len(rotated)+1)
	for _, n := range rotated {
		paths = append(paths, filepath.Join(dir, JournalName+"."+strconv.Itoa(n)))
	}
	paths = append(paths, filepath.Join(dir, JournalName))
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, skipped, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == "" {
				skipped++
				continue
			}
			records = append(records, r)
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, skipped, fmt.Errorf("%s: %w", p, err)
		}
	}
	return records, skipped, nil
}

// syncDir makes renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
