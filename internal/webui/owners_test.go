package webui

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// jobs is a snapshot at sec whose processes belong to the given Slurm jobs.
func jobs(sec int64, ids ...string) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Time: time.Unix(sec, 0)}
	for i, id := range ids {
		s.Processes = append(s.Processes, snapshot.Process{PID: uint32(i + 1), UsedMemory: snapshot.Some[uint64](1 << 30),
			Owner: snapshot.Owner{Slurm: snapshot.SlurmJob{JobID: id}}})
	}
	return s
}

func ownerNames(h HistoryDoc) []string {
	var names []string
	for _, o := range h.Owners {
		names = append(names, o.Name)
	}
	return names
}

// TestRunningOwnerEvictsTheLeastRecentlySeen: with every owner slot held
// by finished jobs still inside the window, the job running now gets a
// history, in the slot of the job seen longest ago.
func TestRunningOwnerEvictsTheLeastRecentlySeen(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Hour)
	for i := range MaxOwners {
		// Job i runs at second 1000+i only, then finishes.
		rec.Record(jobs(int64(1000+i), fmt.Sprint(i)), nil)
	}
	rec.Record(jobs(2000, "running"), nil)
	rec.Record(jobs(2100, "running", "next"), nil)
	h := rec.History()
	names := ownerNames(h)
	if len(names) != MaxOwners || !slices.Contains(names, "running") || !slices.Contains(names, "next") {
		t.Fatalf("%d owners held, running job in it: %v, next: %v", len(names), slices.Contains(names, "running"), slices.Contains(names, "next"))
	}
	if slices.Contains(names, "0") || slices.Contains(names, "1") || !slices.Contains(names, "2") {
		t.Errorf("evicted other owners than the two seen longest ago (jobs 0 and 1): %v", names)
	}
	if h.OwnersDropped != 0 {
		t.Errorf("owners_dropped = %d with a slot freed for every new owner", h.OwnersDropped)
	}
	for _, o := range h.Owners {
		if o.Name == "running" && len(o.TimeMilli) != 2 {
			t.Errorf("the running job has %d points, want its 2 collections, 100 s apart", len(o.TimeMilli))
		}
	}
}

// TestOwnersDroppedCountsOwnersNotCollections: owners turned away at
// every collection (more than MaxOwners at once) are counted once each,
// and owners holding a slot now are never evicted for them.
func TestOwnersDroppedCountsOwnersNotCollections(t *testing.T) {
	rec := newTestRecorder(t, &fakeSource{}, time.Second, time.Hour)
	var ids []string
	for i := range MaxOwners + 3 {
		ids = append(ids, fmt.Sprintf("%03d", i))
	}
	rec.Record(jobs(1000, ids[:MaxOwners]...), nil)
	for sec := int64(1001); sec < 1011; sec++ {
		rec.Record(jobs(sec, ids...), nil)
	}
	h := rec.History()
	if h.OwnersDropped != 3 {
		t.Errorf("owners_dropped = %d after 3 owners were turned away at 10 collections; want 3", h.OwnersDropped)
	}
	if names := ownerNames(h); !slices.Equal(names, ids[:MaxOwners]) {
		t.Errorf("owners with a slot changed although all ran at every collection: %v", names)
	}
}
