package ps

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Allocation is a workload that holds a GPU (or a MIG instance of it) in
// the JSON documents: a Slurm job's GRES or a pod's device from the
// kubelet, whether or not any process runs there. It carries no command.
type Allocation struct {
	GPU               int    `json:"gpu"`
	GPUUUID           string `json:"gpu_uuid"`
	MIGUUID           string `json:"mig_uuid,omitempty"`
	GPUInstanceID     *int   `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID *int   `json:"compute_instance_id,omitempty"`
	// Idle is true when no process runs on the allocated GPU (or, for a
	// MIG allocation, on that instance); absent when that is not known
	// (the GPU is down, so its processes cannot be read).
	Idle *bool `json:"idle,omitempty"`

	Pod   *snapshot.Pod      `json:"pod,omitempty"`
	Slurm *snapshot.SlurmJob `json:"slurm,omitempty"`
	// StartTime is when the workload got the GPU (a Slurm job's start);
	// absent when its source does not say (the kubelet does not).
	StartTime *time.Time `json:"start_time,omitempty"`
}

// NewAllocations lists s's allocations on the filter's GPUs, in GPU order,
// each once (the kubelet lists a time-sliced GPU once per replica).
func NewAllocations(s *snapshot.Snapshot, f Filter) []Allocation {
	type key struct {
		gpu                       int
		mig                       string
		pod                       snapshot.Pod
		job, user, acct, partname string
	}
	seen := map[key]bool{}
	out := []Allocation{}
	for _, a := range s.Allocations {
		if !f.keepGPU(a.GPU) {
			continue
		}
		k := key{a.GPU, a.MIGUUID, a.Pod, a.Slurm.JobID, a.Slurm.User, a.Slurm.Account, a.Slurm.Partition}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, newAllocation(s, a))
	}
	slices.SortStableFunc(out, func(x, y Allocation) int {
		return cmp.Or(cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.MIGUUID, y.MIGUUID))
	})
	return out
}

func newAllocation(s *snapshot.Snapshot, a snapshot.Allocation) Allocation {
	out := Allocation{GPU: a.GPU, GPUUUID: a.GPUUUID, MIGUUID: a.MIGUUID}
	// On a GPU that is up, a process seen there makes it busy; only a
	// GPU whose whole process list was read can be called idle.
	if d := device(s, a); d != nil && d.Up {
		if busy(s, a) {
			idle := false
			out.Idle = &idle
		} else if d.ProcessesUnknown == "" && !s.Driver.Unavailable(snapshot.GroupProcesses) {
			idle := true
			out.Idle = &idle
		}
	}
	if a.MIGUUID != "" {
		for _, d := range s.Devices {
			for _, m := range d.MIGInstances {
				if m.UUID == a.MIGUUID {
					gi, ci := m.GPUInstanceID, m.ComputeInstanceID
					out.GPUInstanceID, out.ComputeInstanceID = &gi, &ci
				}
			}
		}
	}
	if a.Pod != (snapshot.Pod{}) {
		pod := a.Pod
		out.Pod = &pod
	}
	if a.Slurm != (snapshot.SlurmJob{}) {
		job := a.Slurm
		out.Slurm = &job
	}
	if !a.Start.IsZero() {
		start := a.Start.UTC()
		out.StartTime = &start
	}
	return out
}

// device is a's GPU in the snapshot, nil when it is not there.
func device(s *snapshot.Snapshot, a snapshot.Allocation) *snapshot.Device {
	for i := range s.Devices {
		if d := &s.Devices[i]; sameGPU(d.Index, d.UUID, a) {
			return d
		}
	}
	return nil
}

// sameGPU matches a GPU to a's by UUID when both have one, else by index.
func sameGPU(index int, uuid string, a snapshot.Allocation) bool {
	if a.GPUUUID != "" && uuid != "" {
		return uuid == a.GPUUUID
	}
	return index == a.GPU
}

// busy says whether a process runs where a is: on its GPU, or on its MIG
// instance. Whose process it is does not matter: a process whose owner
// could not be resolved must not make a busy GPU look idle.
func busy(s *snapshot.Snapshot, a snapshot.Allocation) bool {
	for i := range s.Processes {
		p := &s.Processes[i]
		if sameGPU(p.GPU, p.GPUUUID, a) && (a.MIGUUID == "" || p.MIGUUID == a.MIGUUID) {
			return true
		}
	}
	return false
}

// allocationGPUColumn is the GPU column of an allocation's row.
func allocationGPUColumn(a *Allocation) string {
	p := snapshot.Process{GPU: a.GPU}
	if a.GPUInstanceID != nil {
		p.GPUInstanceID = snapshot.Some(*a.GPUInstanceID)
		p.ComputeInstanceID = snapshot.Some(*a.ComputeInstanceID)
	}
	return gpuColumn(&p)
}
