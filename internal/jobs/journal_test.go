package jobs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func testRecord(i int) Record {
	return Record{ID: strconv.Itoa(i), Kind: KindSlurm, Node: "n1", Slurm: &SlurmIdentity{JobID: strconv.Itoa(i), User: "alice"},
		Start: time.Unix(int64(i), 0).UTC(), End: time.Unix(int64(i)+60, 0).UTC(),
		GPUs: []GPU{{Index: 0, UUID: "GPU-0", AllocatedSeconds: 60, SMSeconds: new(30.0)}}}
}

// The journal never holds more than files × max-bytes (plus one record),
// keeps the newest records, and reads them back oldest first.
func TestJournalRotationBound(t *testing.T) {
	dir := t.TempDir()
	const maxBytes, files = 4096, 3
	j, err := OpenJournal(dir, maxBytes, files)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 400
	var recordSize int
	for i := range n {
		if err := j.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			st, _ := os.Stat(filepath.Join(dir, JournalName))
			recordSize = int(st.Size())
		}
	}
	entries, _ := os.ReadDir(dir)
	var total int64
	for _, e := range entries {
		info, _ := e.Info()
		total += info.Size()
		if info.Size() > maxBytes {
			t.Errorf("%s is %d bytes, over the %d bound", e.Name(), info.Size(), maxBytes)
		}
	}
	if len(entries) != files || total > files*maxBytes {
		t.Errorf("%d files, %d bytes: want %d files of at most %d bytes in all", len(entries), total, files, files*maxBytes)
	}
	recs, skipped, err := ReadJournal(dir)
	if err != nil || skipped != 0 {
		t.Fatalf("read: %v, %d skipped", err, skipped)
	}
	// The rotated files are full (less than a record short); the current
	// one may have just started.
	if min := (files - 1) * (maxBytes/recordSize - 1); len(recs) < min {
		t.Errorf("kept %d records, want at least %d", len(recs), min)
	}
	for i, r := range recs {
		if want := strconv.Itoa(n - len(recs) + i); r.ID != want {
			t.Fatalf("record %d is %s, want %s (newest kept, oldest first)", i, r.ID, want)
		}
	}
}

// A line half-written by a crash is cut off when the journal is opened,
// so the next record starts a line of its own.
func TestJournalCutsATornLine(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(testRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = j.Close()
	f, err := os.OpenFile(filepath.Join(dir, JournalName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"id":"torn","kind":"slurm","gpus":[{"ind`)
	_ = f.Close()
	if _, skipped, _ := ReadJournal(dir); skipped != 1 {
		t.Fatalf("torn line: %d skipped, want 1", skipped)
	}
	j, err = OpenJournal(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(testRecord(3)); err != nil {
		t.Fatal(err)
	}
	recs, skipped, err := ReadJournal(dir)
	if err != nil || skipped != 0 || len(recs) != 4 || recs[3].ID != "3" {
		t.Fatalf("after reopening: %d records (%v), %d skipped, err %v", len(recs), recs, skipped, err)
	}
}

// A second gpuwatch on the same directory is refused, not interleaved.
func TestJournalHasOneWriter(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j2, err := OpenJournal(dir, 0, 0); err == nil {
		_ = j2.Close()
		t.Fatal("a second writer opened the journal")
	}
	_ = j.Close()
	j2, err := OpenJournal(dir, 0, 0)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	_ = j2.Close()
}
