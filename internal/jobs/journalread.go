package jobs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"time"
)

// MaxRecordBytes is the longest journal line read as a record: longer
// ones are skipped (and counted), not read into memory.
const MaxRecordBytes = 16 << 20

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

// JournalRead is what ReadJournalReport found.
type JournalRead struct {
	// Records are the journal's records, oldest first, each identity once.
	Records []Record
	// Skipped counts lines that are not a record: torn, over
	// MaxRecordBytes, or not JSON.
	Skipped int
	// Duplicates counts records dropped as a copy of an earlier one (a
	// crash between the journal's write and the checkpoint's).
	Duplicates int
	// Warnings name the files that could not be read and why (a
	// directory or a link where a rotated file should be), by their name
	// in the directory.
	Warnings []string
}

// RecordIdentity names one record: a job (or pod) on a node from its
// start. A requeued Slurm job keeps its ID and gets a new start.
type RecordIdentity struct {
	Node, Kind, ID string
	Start          time.Time
}

// Identity returns r's identity.
func (r Record) Identity() RecordIdentity {
	return RecordIdentity{Node: r.Node, Kind: r.Kind, ID: r.ID, Start: r.Start.UTC()}
}

// ReadJournal reads every record of the journal in dir, oldest first,
// rotated files included, each record once. Lines that are not a record
// (a torn last line, one over MaxRecordBytes) are skipped and counted in
// skipped; so are files that are not regular files. A directory without
// a journal has no records.
func ReadJournal(dir string) (records []Record, skipped int, err error) {
	r, err := ReadJournalReport(dir)
	return r.Records, r.Skipped + len(r.Warnings), err
}

// ReadJournalReport reads the journal in dir as ReadJournal does, and says
// what it skipped. Files are opened without following links. Errors name
// files by their name in dir, never by the absolute path.
func ReadJournalReport(dir string) (JournalRead, error) {
	var out JournalRead
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, errors.New("the accounting directory cannot be opened: " + errName(err))
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return out, errors.New("the accounting directory cannot be listed: " + errName(err))
	}
	var rotated []int
	for _, name := range names {
		if n, ok := rotatedNumber(name); ok {
			rotated = append(rotated, n)
		}
	}
	// The highest number is the oldest.
	slices.SortFunc(rotated, func(a, b int) int { return b - a })
	seen := map[RecordIdentity]bool{}
	for _, n := range append(rotated, 0) {
		if err := readJournalFile(d, rotatedName(n), seen, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// errName is an error's text without the path an *os.PathError carries.
func errName(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

func readJournalFile(d *os.File, name string, seen map[RecordIdentity]bool, out *JournalRead) error {
	f, err := openReadNoFollow(d, name)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) {
		out.Warnings = append(out.Warnings, name+" is a symbolic link: not read")
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	if err := checkOpened(f, name, false); err != nil {
		out.Warnings = append(out.Warnings, name+" is not a regular file: not read")
		return nil
	}
	return scanRecords(f, func(line []byte) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			out.Skipped++
			return
		}
		id := r.Identity()
		if seen[id] {
			out.Duplicates++
			return
		}
		seen[id] = true
		out.Records = append(out.Records, r)
	}, func() { out.Skipped++ })
}

// scanRecords calls line for each line of r up to MaxRecordBytes, and
// tooLong for each longer one, which it reads past without keeping.
func scanRecords(r io.Reader, line func([]byte), tooLong func()) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case long:
		case len(buf)+len(chunk) > MaxRecordBytes+1:
			long, buf = true, buf[:0]
		default:
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if long {
			tooLong()
		} else if len(bytes.TrimSpace(buf)) > 0 {
			line(bytes.TrimSuffix(buf, []byte("\n")))
		}
		buf, long = buf[:0], false
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errors.New("reading the journal: " + errName(err))
		}
	}
}
