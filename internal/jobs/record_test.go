//go:build cgo

package jobs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

const step = 2 * time.Second

var (
	alice = snapshot.Owner{User: "alice", Command: "python train.py --secret-token=xyz",
		Slurm: snapshot.SlurmJob{JobID: "1234", User: "alice", Account: "physics", Partition: "gpu", JobName: "train"}}
	podOwner = snapshot.Owner{User: "root", Command: "python serve.py",
		Pod: snapshot.Pod{Namespace: "ml", Name: "infer-0", UID: "9f1c0d2e-uid", Container: "main"}}
)

// jobRig: Slurm job 1234 holds GPUs 0 and 1 from 4 s to 74 s, runs on GPU 0
// at 80 % SM from 10 s to 70 s with 3 GiB (an XID 79 at 30 s), and leaves
// GPU 1 idle; pod ml/infer-0 runs on GPU 2 at 50 % from 20 s to 50 s.
func jobRig(t *testing.T, opts Options) *rig {
	cfg := sim.Config{Profile: "dgx-h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 100, UsedMemoryBytes: 3 << 30, SMUtilization: 0.8, Start: dur(10 * time.Second), End: dur(70 * time.Second)},
		{GPU: 2, PID: 200, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5, Start: dur(20 * time.Second), End: dur(50 * time.Second)},
	}, Faults: []sim.Fault{{GPU: 0, XID: 79, At: dur(30 * time.Second)}}}
	job := snapshot.SlurmJob{JobID: "1234", User: "alice", Account: "physics", Partition: "gpu"}
	allocs := []timedAllocation{
		{4 * time.Second, 74 * time.Second, snapshot.Allocation{GPU: 0, Slurm: job}},
		{4 * time.Second, 74 * time.Second, snapshot.Allocation{GPU: 1, Slurm: job}},
		{18 * time.Second, 52 * time.Second, snapshot.Allocation{GPU: 2, Pod: podOwner.Pod}},
	}
	r := newRig(t, cfg, map[uint32]snapshot.Owner{100: alice, 200: podOwner}, allocs, opts)
	for i := range r.allocs {
		r.allocs[i].alloc.GPUUUID = r.uuid(r.allocs[i].alloc.GPU)
	}
	return r
}

// Records are journaled when a job or pod ends (allocation gone, no
// process left), with the simulator's known figures.
func TestRecordsAtJobAndPodEnd(t *testing.T) {
	r := jobRig(t, Options{})
	r.run(step, 60*time.Second)
	recs, _, err := ReadJournal(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Kind != KindPod {
		t.Fatalf("at 60s the journal holds %+v, want the pod's record alone", recs)
	}
	r.run(step, 90*time.Second)
	recs, _, err = ReadJournal(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("journal holds %d records, want 2: %+v", len(recs), recs)
	}
	pod, job := recs[0], recs[1]

	if pod.ID != "9f1c0d2e-uid" || pod.Pod == nil || pod.Pod.Namespace != "ml" || pod.Pod.Name != "infer-0" || pod.Node != "node1" {
		t.Errorf("pod identity: %+v %+v", pod, pod.Pod)
	}
	if len(pod.GPUs) != 1 || pod.GPUs[0].UUID != r.uuid(2) {
		t.Fatalf("pod GPUs: %+v", pod.GPUs)
	}
	pg := pod.GPUs[0]
	near(t, "pod SM-seconds", pg.SMSeconds, 30*0.5, 0.5*step.Seconds())
	near(t, "pod allocated seconds", &pg.AllocatedSeconds, 34, step.Seconds())

	if job.ID != "1234" || job.Slurm == nil || *job.Slurm != (SlurmIdentity{JobID: "1234", User: "alice", Account: "physics", Partition: "gpu", JobName: "train"}) {
		t.Errorf("job identity: %+v %+v", job, job.Slurm)
	}
	if d := job.End.Sub(job.Start); d < 68*time.Second || d > 72*time.Second {
		t.Errorf("job ran %s (from %s to %s), want 70s ± one interval", d, job.Start, job.End)
	}
	if len(job.GPUs) != 2 || job.GPUs[0].UUID != r.uuid(0) || job.GPUs[1].UUID != r.uuid(1) {
		t.Fatalf("job GPUs: %+v", job.GPUs)
	}
	g0, g1 := job.GPUs[0], job.GPUs[1]
	if g0.Model != "NVIDIA H100 80GB HBM3" || g0.MemoryTotalBytes == nil || *g0.MemoryTotalBytes < 79<<30 {
		t.Errorf("GPU 0 model %q, memory %v", g0.Model, g0.MemoryTotalBytes)
	}
	near(t, "GPU 0 allocated seconds", &g0.AllocatedSeconds, 70, step.Seconds())
	near(t, "GPU 0 SM-seconds", g0.SMSeconds, 60*0.8, 0.8*step.Seconds())
	near(t, "GPU 0 mean SM utilization", g0.SMUtilizationMean, 48.0/70, 0.03)
	near(t, "GPU 0 max SM utilization", g0.SMUtilizationMax, 0.8, 0.01)
	if g0.MemoryUsedBytesMax == nil || *g0.MemoryUsedBytesMax != 3<<30 {
		t.Errorf("GPU 0 peak memory %v, want 3 GiB", g0.MemoryUsedBytesMax)
	}
	if g0.EnergyJoules == nil || *g0.EnergyJoules <= 0 {
		t.Errorf("GPU 0 energy %v, want some", g0.EnergyJoules)
	}
	if g0.XIDErrors == nil || *g0.XIDErrors != 1 {
		t.Errorf("GPU 0 XIDs %v, want 1", g0.XIDErrors)
	}
	if g1.XIDErrors == nil || *g1.XIDErrors != 0 {
		t.Errorf("GPU 1 XIDs %v, want 0 (watched, none)", g1.XIDErrors)
	}
	if g0.GPM == nil || g0.GPM.SMActive == nil {
		t.Errorf("GPU 0 GPM means absent on an H100: %+v", g0.GPM)
	}
	if g0.ThrottleSeconds == nil {
		t.Errorf("GPU 0 throttle time absent")
	}
	near(t, "GPU 1 allocated seconds", &g1.AllocatedSeconds, 70, step.Seconds())
	near(t, "GPU 1 idle seconds", g1.IdleSeconds, 70, step.Seconds())
	near(t, "GPU 1 SM-seconds (held idle)", g1.SMSeconds, 0, 0)
	if g1.MemoryUsedBytesMax != nil {
		t.Errorf("GPU 1 had no process, yet memory %v", g1.MemoryUsedBytesMax)
	}
	if g1.EnergyJoules == nil || *g1.EnergyJoules <= 0 {
		t.Errorf("GPU 1 held idle drew energy %v, want its idle energy", g1.EnergyJoules)
	}
	near(t, "GPU 0 idle seconds", g0.IdleSeconds, 10, step.Seconds()) // 4–10 s and 70–74 s
}

// Records hold no command lines.
func TestRecordsHoldNoCommandLines(t *testing.T) {
	r := jobRig(t, Options{})
	r.run(step, 90*time.Second)
	data, err := os.ReadFile(filepath.Join(r.dir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || bytes.Contains(data, []byte("secret-token")) || bytes.Contains(data, []byte("train.py")) {
		t.Fatalf("journal:\n%s", data)
	}
}

// A pod on a MIG instance: its record names the instance, its profile and
// size, and has the instance's GPM means; on a MIG GPU without GPM (A100)
// SM time is absent, not 0, and so are the GPM means.
func TestRecordOnMIGInstance(t *testing.T) {
	for _, c := range []struct {
		profile string
		gpu     int
		gpm     bool
	}{{"dgx-h100", 7, true}, {"dgx-a100-mig", 1, false}} {
		t.Run(c.profile, func(t *testing.T) {
			gi, ci := 1, 0
			cfg := sim.Config{Profile: c.profile, Processes: []sim.ProcessSpec{
				{GPU: c.gpu, PID: 701, UsedMemoryBytes: 5 << 30, SMUtilization: 0.6, GPUInstance: &gi, ComputeInstance: &ci, End: dur(30 * time.Second)},
			}}
			r := newRig(t, cfg, map[uint32]snapshot.Owner{701: podOwner}, nil, Options{})
			r.run(step, 40*time.Second)
			recs, _, err := ReadJournal(r.dir)
			if err != nil || len(recs) != 1 || len(recs[0].GPUs) != 1 {
				t.Fatalf("journal: %+v %v", recs, err)
			}
			g := recs[0].GPUs[0]
			// GPU instance 1 is a 3g.40gb: its memory, not the whole GPU's 80 GB.
			if g.MIGUUID == "" || g.MIGProfile != "3g.40gb" || g.Index != c.gpu || g.MemoryTotalBytes == nil || *g.MemoryTotalBytes > 45<<30 || *g.MemoryTotalBytes < 35<<30 {
				t.Errorf("MIG GPU: %+v (memory %v)", g, g.MemoryTotalBytes)
			}
			if g.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax != 5<<30 {
				t.Errorf("peak memory %v", g.MemoryUsedBytesMax)
			}
			if c.gpm {
				if g.SMSeconds == nil || *g.SMSeconds <= 0 || g.GPM == nil || g.GPM.SMActive == nil {
					t.Errorf("with GPM: SM-seconds %v, GPM %+v", g.SMSeconds, g.GPM)
				}
			} else if g.SMSeconds != nil || g.SMUtilizationMean != nil || g.GPM != nil {
				t.Errorf("without GPM: SM-seconds %v, mean %v, GPM %+v, want absent", g.SMSeconds, g.SMUtilizationMean, g.GPM)
			}
		})
	}
}

// The epilog's end mark ends a job whose allocation Slurm still lists
// (COMPLETING), once none of its processes is left; gpuwatch then answers
// the epilog in DoneDir.
func TestEndMarkEndsTheJob(t *testing.T) {
	marks := t.TempDir()
	r := jobRig(t, Options{EpilogDir: marks})
	done := filepath.Join(r.dir, DoneDir, "1234")
	// Marked while its process still runs (until 70 s): it goes on.
	r.run(step, 60*time.Second)
	if err := MarkEnded(marks, "1234"); err != nil {
		t.Fatal(err)
	}
	r.run(step, 68*time.Second)
	if recs, _, _ := ReadJournal(r.dir); len(recs) != 1 {
		t.Fatalf("at 68 s: %d records, want the pod's alone: a marked job with a process left has not ended", len(recs))
	}
	if _, err := os.Stat(done); !os.IsNotExist(err) {
		t.Errorf("the epilog was answered while the job runs: %v", err)
	}
	// The process ends at 70 s; the allocation is listed until 74 s. The
	// 70 s tick reads its last samples (to 69.8 s); the 72 s tick finds
	// none, which has the reader list the GPU's processes: it is gone.
	r.run(step, 72*time.Second)
	recs, _, _ := ReadJournal(r.dir)
	if len(recs) != 2 || recs[1].ID != "1234" {
		t.Fatalf("at 72 s: %+v, want job 1234's record", recs)
	}
	if end := recs[1].End; !end.Before(sim.Epoch.Add(72 * time.Second)) {
		t.Errorf("job ended at %s, want its last process's tick (70 s), not its allocation's end", end)
	}
	if _, err := os.Stat(done); err != nil {
		t.Errorf("the epilog was not answered: %v", err)
	}
	// The epilog removes its own mark.
	if err := os.Remove(filepath.Join(marks, "1234")); err != nil {
		t.Fatal(err)
	}
	r.run(step, 90*time.Second)
	if recs, _, _ := ReadJournal(r.dir); len(recs) != 2 {
		t.Errorf("after the allocation went: %d records, want 2 (no second record of 1234)", len(recs))
	}
	if err := MarkEnded(marks, "../x"); err == nil {
		t.Error("MarkEnded accepted a path as a job ID")
	}
}

// A mark that comes after the job's record (gpuwatch saw a cancelled job
// leave Slurm's list before its epilog ran), or of a job that never had a
// GPU here, is answered at the next tick: the epilog need not wait.
func TestEndMarkAfterTheRecordIsAnswered(t *testing.T) {
	marks := t.TempDir()
	r := jobRig(t, Options{EpilogDir: marks})
	r.run(step, 90*time.Second)
	if recs, _, _ := ReadJournal(r.dir); len(recs) != 2 || recs[1].ID != "1234" {
		t.Fatalf("at 90 s: %+v, want job 1234's record", recs)
	}
	if err := MarkEnded(marks, "1234"); err != nil {
		t.Fatal(err)
	}
	if err := MarkEnded(marks, "5678"); err != nil { // a job this node never saw
		t.Fatal(err)
	}
	r.run(step, 90*time.Second+step)
	for _, id := range []string{"1234", "5678"} {
		if _, err := os.Stat(filepath.Join(r.dir, DoneDir, id)); err != nil {
			t.Errorf("the epilog of job %s was not answered: %v", id, err)
		}
	}
	if recs, _, _ := ReadJournal(r.dir); len(recs) != 2 {
		t.Errorf("%d records, want 2 (no second record of 1234)", len(recs))
	}
}

// A job that started is in the checkpoint from its first tick, so that
// `gpuwatch job` on the node shows it at once, as running, from the live
// totals (not a checkpoint interval later).
func TestRunningJobShownAtOnce(t *testing.T) {
	r := jobRig(t, Options{CheckpointInterval: time.Hour})
	r.run(step, 12*time.Second)
	recs, err := FromLocal(r.dir, Query{ID: "1234"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !recs[0].Running || recs[0].End.Before(recs[0].Start) {
		t.Fatalf("at 12 s, an hour's checkpoint interval: %+v, want job 1234 running", recs)
	}
	s, ok := Summarize("1234", recs)
	if !ok || !s.Running {
		t.Errorf("summary %+v: want it marked running", s)
	}
}
