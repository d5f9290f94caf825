//go:build cgo

package jobs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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

// A checkpoint that cannot be read does not stop gpuwatch: it is moved
// aside (kept), counted, and the jobs it held are restored as far as they
// can be read, their records marked partial rather than dropped.
func TestCorruptCheckpointIsMovedAsideAndItsJobsMarkedPartial(t *testing.T) {
	opts := Options{CheckpointInterval: 10 * time.Second}
	r := jobRig(t, opts)
	r.run(step, 30*time.Second) // the pod and job 1234 run
	if err := r.rec.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.dir, CheckpointName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Torn inside job 1234's figures (the pod's come first).
	cut := bytes.Index(data, []byte(`"key":"slurm/1234"`)) + 150
	if cut < 150 || cut >= len(data) {
		t.Fatalf("checkpoint %s", data)
	}
	torn := data[:cut]
	if err := os.WriteFile(path, torn, 0o640); err != nil {
		t.Fatal(err)
	}
	if running, err := ReadRunning(r.dir); err != nil || len(running) != 2 {
		t.Errorf("gpuwatch job on a torn checkpoint: %d running, %v; want both jobs, no error", len(running), err)
	}
	r.crashAndRestart(opts)
	aside, _ := filepath.Glob(path + CorruptCheckpointSuffix + "*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if kept, _ := os.ReadFile(aside[0]); !bytes.Equal(kept, torn) {
		t.Error("the corrupt checkpoint was not kept as it was")
	}
	if n := testutil.ToFloat64(prometheusOne(r.rec, "gpuwatch_journal_checkpoints_corrupt_total")); n != 1 {
		t.Errorf("gpuwatch_journal_checkpoints_corrupt_total %v, want 1", n)
	}
	r.sim.SetElapsed(32 * time.Second)
	r.run(step, 90*time.Second)
	recs, skipped, err := ReadJournal(r.dir)
	if err != nil || skipped != 0 || len(recs) != 2 {
		t.Fatalf("records after the restart: %+v %d %v", recs, skipped, err)
	}
	for _, rec := range recs {
		if rec.Partial == "" {
			t.Errorf("record of %s is not marked partial", rec.ID)
		}
	}
	pod, job := recs[0], recs[1]
	// The pod's figures up to 30 s were read whole: its start stands.
	if pod.Kind != KindPod || !pod.Start.Equal(time.Date(2026, 1, 1, 0, 0, 18, 0, time.UTC)) {
		t.Errorf("pod record %+v: want its checkpointed start", pod)
	}
	if job.ID != "1234" || job.Slurm == nil || job.Start.Before(time.Date(2026, 1, 1, 0, 0, 32, 0, time.UTC)) {
		t.Errorf("job record %+v: want job 1234 from the restart on", job)
	}
}

// A checkpoint that is not JSON at all is moved aside too.
func TestGarbageCheckpointDoesNotStopTheRecorder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CheckpointName), []byte("{"), 0o640); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(Options{Dir: dir, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if aside, _ := filepath.Glob(filepath.Join(dir, CheckpointName+CorruptCheckpointSuffix+"*")); len(aside) != 1 {
		t.Errorf("moved aside: %v", aside)
	}
}
