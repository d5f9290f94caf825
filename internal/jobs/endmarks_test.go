package jobs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The end marks are listed when the directory changed, when its time is
// too close to the last listing's to tell, and every endMarksRelist;
// otherwise a tick takes the last listing.
func TestEndMarksListedWhenTheDirectoryChanged(t *testing.T) {
	dir := t.TempDir()
	ended := filepath.Join(dir, "marks")
	if err := os.MkdirAll(ended, 0o770); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	long := now.Add(-time.Hour)
	if err := os.Chtimes(ended, long, long); err != nil {
		t.Fatal(err)
	}
	m := endMarks{dir: ended}
	read := func(at time.Duration, wantListings int, wantMarked bool) {
		t.Helper()
		marks := m.read(now.Add(at))
		if m.listings != wantListings || marks["slurm/1234"] != wantMarked {
			t.Errorf("at +%v: %d listings, job 1234 marked %v; want %d, %v", at, m.listings, marks["slurm/1234"], wantListings, wantMarked)
		}
	}
	read(0, 1, false)
	read(2*time.Second, 1, false) // unchanged for an hour: the listing stands
	if err := MarkEnded(ended, "1234"); err != nil {
		t.Fatal(err)
	}
	read(time.Second, 2, true)
	// Listed within 2 s of the directory's time: a change in the same
	// tick of a coarse clock would not show, so it is listed again, until
	// a listing comes 2 s after it.
	read(1500*time.Millisecond, 3, true)
	read(4*time.Second, 4, true)
	read(6*time.Second, 4, true)
	if err := os.Chtimes(ended, long, long); err != nil {
		t.Fatal(err)
	}
	read(8*time.Second, 5, true) // its time moved
	read(10*time.Second, 5, true)
	read(10*time.Second+endMarksRelist, 6, true)
	if err := os.RemoveAll(ended); err != nil {
		t.Fatal(err)
	}
	read(12*time.Second+endMarksRelist, 7, false) // gone: no marks
	read(14*time.Second+endMarksRelist, 7, false)
}
