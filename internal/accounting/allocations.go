package accounting

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// addAllocations adds the interval to every allocation listed now: held
// time, and idle time when its own processes used less than threshold of
// the GPU's (or MIG instance's) SM time. "Its own": the owners on that GPU
// whose pod (namespace and name) or Slurm job is the allocation's. An
// allocation with no process running was idle; one whose processes' SM
// time was not measured (a MIG instance without GPM) adds no idle time.
func (st *state) addAllocations(s *snapshot.Snapshot, byUUID map[string]*deviceTick, dt float64, threshold float64) {
	if st.allocSeen == nil {
		st.allocSeen = map[allocKey]bool{}
	}
	seen := st.allocSeen
	clear(seen)
	for i := range s.Allocations {
		a := &s.Allocations[i]
		tk := byUUID[a.GPUUUID]
		if tk == nil && a.GPUUUID == "" {
			for _, t := range byUUID {
				if t.dev.Index == a.GPU {
					tk = t
				}
			}
		}
		if tk == nil {
			continue // a GPU that is down or unknown
		}
		k := allocKey{
			uuid: tk.dev.UUID, gpu: tk.dev.Index, mig: a.MIGUUID,
			namespace: a.Pod.Namespace, pod: a.Pod.Name, container: a.Pod.Container,
			job: a.Slurm.JobID, usr: a.Slurm.User,
		}
		// A pod holding several time-sliced replicas of one GPU is
		// listed once per replica; it holds the GPU once.
		if seen[k] {
			continue
		}
		seen[k] = true
		t := st.allocation(k, s.Time)
		t.LastSeen = s.Time
		t.Seconds += dt
		used, measured := allocationUse(tk, a)
		if measured {
			t.IdleSeconds.Valid = true
			if used < threshold*dt {
				t.IdleSeconds.Value += dt
			}
		}
	}
}

// allocationUse is the SM-seconds of the allocation's own owners on its
// GPU (or MIG instance) in the interval, and whether it is known.
func allocationUse(tk *deviceTick, a *snapshot.Allocation) (smSeconds float64, measured bool) {
	mine := func(k snapshot.OwnerKey) bool {
		if a.MIGUUID != "" && k.MIGUUID != a.MIGUUID {
			return false
		}
		if a.Pod.Name != "" {
			return k.Pod == a.Pod.Name && k.Namespace == a.Pod.Namespace
		}
		return a.Slurm.JobID != "" && k.SlurmJob == a.Slurm.JobID
	}
	running := false
	measured = true
	for i := range tk.list.owners {
		if o := &tk.list.owners[i]; mine(o.key) {
			running = true
			smSeconds += o.sm
			if !tk.smMeasuredFor(&o.key) {
				measured = false
			}
		}
	}
	for k, f := range tk.ended {
		if mine(k) {
			smSeconds += f.sm
		}
	}
	if !running {
		return smSeconds, true
	}
	return smSeconds, measured
}

func (st *state) allocation(k allocKey, now time.Time) *snapshot.AllocationTotal {
	t := st.allocs[k]
	if t == nil {
		t = &snapshot.AllocationTotal{
			GPU: k.gpu, GPUUUID: k.uuid, MIGUUID: k.mig,
			Namespace: k.namespace, Pod: k.pod, Container: k.container,
			SlurmJob: k.job, User: k.usr,
			FirstSeen: now, LastSeen: now,
		}
		st.allocs[k] = t
		st.reorder = true
	}
	return t
}
