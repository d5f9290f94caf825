package jobs

import (
	"testing"
	"time"
)

// A crash loses at most one checkpoint interval of a running job: the
// restarted recorder goes on from the checkpoint, and a finished job's
// record is untouched.
func TestCrashLosesAtMostOneCheckpoint(t *testing.T) {
	opts := Options{CheckpointInterval: 10 * time.Second}
	r := jobRig(t, opts)
	r.run(step, 56*time.Second) // the pod ended at 50 s; job 1234 runs
	before, _, err := ReadJournal(r.dir)
	if err != nil || len(before) != 1 || before[0].Kind != KindPod {
		t.Fatalf("before the crash: %v %v", before, err)
	}
	r.crashAndRestart(opts)
	r.sim.SetElapsed(58 * time.Second)
	r.run(step, 90*time.Second)
	recs, _, err := ReadJournal(r.dir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("after the restart: %d records %v %v", len(recs), recs, err)
	}
	if recs[0].ID != before[0].ID || *recs[0].GPUs[0].SMSeconds != *before[0].GPUs[0].SMSeconds {
		t.Errorf("the finished pod's record changed: %+v, was %+v", recs[0], before[0])
	}
	job := recs[1]
	if job.ID != "1234" || len(job.GPUs) != 2 {
		t.Fatalf("job record: %+v", job)
	}
	// 48 SM-seconds in all; at most the checkpoint interval (10 s) plus the
	// restart's own lost tick (2 s) at 80 % may be lost, not the 38 s
	// before the crash that a fresh start would lose.
	sm := *job.GPUs[0].SMSeconds
	if sm > 48+1.6 || sm < 48-0.8*(10+2+2) {
		t.Errorf("SM-seconds after the crash %.1f, want 48 less at most one checkpoint interval (%.1f)", sm, 48-0.8*14)
	}
	if a := job.GPUs[1].AllocatedSeconds; a < 70-14 || a > 72 {
		t.Errorf("GPU 1 allocated %.0f s after the crash, want 70 s less at most one checkpoint interval", a)
	}
	if !job.Start.Equal(time.Date(2026, 1, 1, 0, 0, 4, 0, time.UTC)) {
		t.Errorf("job start %s: the checkpoint's start was lost", job.Start)
	}
}
