package jobs

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// trackerSnapshot is one tick of GPU-0, its processes listed (owners
// given) or not (nil).
func trackerSnapshot(at time.Time, owners []snapshot.Owner) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Time: at, Devices: []snapshot.Device{{Index: 0, UUID: "GPU-0", Up: true, ProcessesNotListed: owners == nil}}}
	for i, o := range owners {
		s.Processes = append(s.Processes, snapshot.Process{PID: uint32(100 + i), GPU: 0, GPUUUID: "GPU-0", Owner: o})
	}
	return s
}

// A job's processes on one GPU count as the job once, between lists too,
// and its identity is folded from all of them: the first process that
// names its account names it, whichever process comes first.
func TestTrackerFoldsAJobsProcessesOnAGPU(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	bare := snapshot.Owner{Slurm: snapshot.SlurmJob{JobID: "7"}}
	named := snapshot.Owner{User: "bob", Slurm: snapshot.SlurmJob{JobID: "7", User: "bob", Account: "phys", Partition: "gpu"}}
	tr := NewTracker("node1")
	var procs []snapshot.Owner
	for i := range 300 {
		procs = append(procs, map[bool]snapshot.Owner{true: bare, false: named}[i%3 == 0])
	}
	if ended := tr.Observe(trackerSnapshot(t0, procs), nil); len(ended) != 0 {
		t.Fatalf("first tick ended %+v", ended)
	}
	for i := 1; i <= 3; i++ { // between lists: the last list's holders still run
		if ended := tr.Observe(trackerSnapshot(t0.Add(time.Duration(2*i)*time.Second), nil), nil); len(ended) != 0 {
			t.Fatalf("tick %d between lists ended %+v", i, ended)
		}
	}
	if n := len(tr.listed["GPU-0"]); n != 2 {
		t.Errorf("GPU-0's last list kept as %d holders, want 2 (one per distinct identity)", n)
	}
	ended := tr.Observe(trackerSnapshot(t0.Add(8*time.Second), []snapshot.Owner{}), nil)
	if len(ended) != 1 {
		t.Fatalf("the list without the job ended %d jobs, want 1", len(ended))
	}
	rec := ended[0]
	want := SlurmIdentity{JobID: "7", User: "bob", Account: "phys", Partition: "gpu"}
	if rec.Slurm == nil || *rec.Slurm != want {
		t.Errorf("record's identity %+v, want %+v", rec.Slurm, want)
	}
	if !rec.Start.Equal(t0) || !rec.End.Equal(t0.Add(6*time.Second)) {
		t.Errorf("record from %v to %v, want %v to %v", rec.Start, rec.End, t0, t0.Add(6*time.Second))
	}
}

// What the job records add to an accounting tick on the accounting's
// benchmark fleet (internal/accounting's bench_test.go): 8
// GPUs × 256 processes of 50 Slurm jobs, a tick between lists (most
// ticks) and one that lists every GPU.
func BenchmarkTrackerObserve(b *testing.B) {
	t0 := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	listed := &snapshot.Snapshot{Time: t0}
	for gpu := range 8 {
		uuid := fmt.Sprintf("GPU-%d", gpu)
		listed.Devices = append(listed.Devices, snapshot.Device{Index: gpu, UUID: uuid, Up: true})
		for i := range 256 {
			job := fmt.Sprint(1000 + (gpu*256+i)%50)
			listed.Processes = append(listed.Processes, snapshot.Process{PID: uint32(200000 + gpu*256 + i), GPU: gpu, GPUUUID: uuid,
				Owner: snapshot.Owner{User: "u" + job, Slurm: snapshot.SlurmJob{JobID: job, User: "u" + job}}})
		}
	}
	between := &snapshot.Snapshot{Devices: append([]snapshot.Device(nil), listed.Devices...)}
	for i := range between.Devices {
		between.Devices[i].ProcessesNotListed = true
	}
	for _, c := range []struct {
		name string
		s    *snapshot.Snapshot
	}{{"between-lists", between}, {"list", listed}} {
		b.Run(c.name, func(b *testing.B) {
			tr := NewTracker("node1")
			tr.Observe(listed, nil)
			at := t0
			for b.Loop() {
				at = at.Add(2 * time.Second)
				c.s.Time = at
				if ended := tr.Observe(c.s, nil); len(ended) != 0 {
					b.Fatalf("%d jobs ended", len(ended))
				}
			}
		})
	}
}
