package exporter

import (
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Allocation info series say which workload holds each GPU, whether or not
// its processes are running right now, so one PromQL join turns any device
// metric into a per-pod or per-job figure:
//
//	gpu_utilization_ratio * on(gpu, uuid) group_left(namespace, pod) gpu_kubernetes_allocation_info
//
// They belong to the processes collector: both answer "who uses this GPU".

type allocationKey struct {
	dev                int
	mig, a, b, c, d    string
	kubernetes, slurmJ bool
}

func collectAllocations(em *emitter, s *snapshot.Snapshot) {
	if len(s.Allocations) == 0 || !(em.on(mKubernetesAllocation) || em.on(mSlurmJobAllocation)) {
		return
	}
	// A pod holding several time-sliced replicas of one GPU is listed once
	// per replica; the series must appear once.
	seen := make(map[allocationKey]bool, len(s.Allocations))
	for i := range s.Allocations {
		a := &s.Allocations[i]
		dev := em.deviceFor(s, a.GPU, a.GPUUUID)
		if dev < 0 {
			continue
		}
		d := &s.Devices[dev]
		switch {
		case a.Pod.Name != "" && em.on(mKubernetesAllocation):
			k := allocationKey{dev: dev, mig: a.MIGUUID, a: a.Pod.Namespace, b: a.Pod.Name, c: a.Pod.Container, kubernetes: true}
			if seen[k] {
				continue
			}
			seen[k] = true
			em.lv[0], em.lv[1], em.lv[2], em.lv[3], em.lv[4], em.lv[5] = itoa(d.Index), d.UUID, a.MIGUUID, a.Pod.Namespace, a.Pod.Name, a.Pod.Container
			em.emit(mKubernetesAllocation, 1, em.lv[:6])
		case a.Slurm.JobID != "" && em.on(mSlurmJobAllocation):
			j := &a.Slurm
			k := allocationKey{dev: dev, a: j.JobID, b: j.User, c: j.Account, d: j.Partition, slurmJ: true}
			if seen[k] {
				continue
			}
			seen[k] = true
			em.lv[0], em.lv[1], em.lv[2], em.lv[3], em.lv[4], em.lv[5] = itoa(d.Index), d.UUID, j.JobID, j.User, j.Account, j.Partition
			em.emit(mSlurmJobAllocation, 1, em.lv[:6])
		}
	}
}

// deviceFor finds the position of an up device by UUID, or by index when
// the allocation carries no UUID; -1 when there is none.
func (em *emitter) deviceFor(s *snapshot.Snapshot, index int, uuid string) int {
	for i := range s.Devices {
		d := &s.Devices[i]
		if !d.Up {
			continue
		}
		if (uuid != "" && d.UUID == uuid) || (uuid == "" && d.Index == index) {
			return i
		}
	}
	return -1
}
