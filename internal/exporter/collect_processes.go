package exporter

import (
	"strconv"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/validate"
)

// The processes collector: how many processes each GPU has, and the GPU
// memory and utilization of each owner (user, container with its compose
// project and service, pod, Slurm job), summed over the owner's processes
// on that GPU. Aggregating per owner keeps
// cardinality bounded by workloads, not by PIDs; Options.PIDLabels opts in
// to one series per process.
func init() {
	registerCollector(snapshot.GroupProcesses, collector{snapshot: collectProcesses})
}

// ownerKey is what the gpu_process_* series are aggregated by. pid and
// command stay zero unless PID labels are on.
type ownerKey struct {
	dev                            int // position in Snapshot.Devices
	user, container                string
	composeProject, composeService string
	pod, namespace, slurmJob       string
	pid                            uint32
	command                        string
}

type ownerAgg struct {
	key                        ownerKey
	memory                     uint64
	sm, memUtil                float64
	hasMemory, hasSM, hasMemUt bool
	memoryOverflow             bool // the memory sum overflowed: no series
}

// containerLabel names a container by its name, or by the short ID that
// `docker ps` shows when the runtime gave no name.
func containerLabel(c *snapshot.Container) string {
	if c.Name != "" {
		return c.Name
	}
	if len(c.ID) > 12 {
		return c.ID[:12]
	}
	return c.ID
}

func collectProcesses(em *emitter, s *snapshot.Snapshot, pidLabels bool) {
	byIndex := upDevicePositions(em, s)
	counts, aggs := aggregateOwners(em, s, byIndex, pidLabels)
	// A driver that cannot list processes gets no count, rather than 0,
	// and so does a GPU whose list could not be read.
	for i := range s.Devices {
		d := &s.Devices[i]
		if d.Up && d.ProcessesUnknown == "" && !s.Driver.Unavailable(snapshot.GroupProcesses) {
			em.setDevice(d)
			em.dev(mProcesses, float64(counts[i]))
		}
	}
	for i := range aggs {
		emitOwner(em, &s.Devices[aggs[i].key.dev], &aggs[i], pidLabels)
	}
	collectAllocations(em, s)
	collectAccounting(em, s)
}

// upDevicePositions maps a GPU index to its position in s.Devices, -1 for
// a GPU that is down or unknown: their processes are not reported.
func upDevicePositions(em *emitter, s *snapshot.Snapshot) []int32 {
	byIndex := em.devByIndex[:0]
	for i := range s.Devices {
		d := &s.Devices[i]
		if !d.Up || d.Index < 0 || d.Index >= 1<<16 {
			continue
		}
		for len(byIndex) <= d.Index {
			byIndex = append(byIndex, -1)
		}
		byIndex[d.Index] = int32(i)
	}
	em.devByIndex = byIndex
	return byIndex
}

// aggregateOwners counts the processes of each up GPU (by position) and
// sums them per owner, reusing the emitter's buffers.
func aggregateOwners(em *emitter, s *snapshot.Snapshot, byIndex []int32, pidLabels bool) ([]int, []ownerAgg) {
	counts := em.procCounts[:0]
	for range s.Devices {
		counts = append(counts, 0)
	}
	aggs := em.procAggs[:0]
	index := em.procIndex
	clear(index)
	for i := range s.Processes {
		p := &s.Processes[i]
		if p.GPU < 0 || p.GPU >= len(byIndex) || byIndex[p.GPU] < 0 {
			continue
		}
		dev := int(byIndex[p.GPU])
		counts[dev]++
		k := ownerKeyOf(dev, p, pidLabels)
		j, ok := index[k]
		if !ok {
			j = len(aggs)
			index[k] = j
			aggs = append(aggs, ownerAgg{key: k})
		}
		aggs[j].add(p)
	}
	em.procCounts, em.procAggs = counts, aggs
	return counts, aggs
}

func ownerKeyOf(dev int, p *snapshot.Process, pidLabels bool) ownerKey {
	o := &p.Owner
	k := ownerKey{
		dev:       dev,
		user:      o.User,
		container: containerLabel(&o.Container),
		// Compose labels let PromQL sum per compose service without
		// joining an info series on the container name, which is not
		// unique across hosts.
		composeProject: o.Container.ComposeProject,
		composeService: o.Container.ComposeService,
		pod:            o.Pod.Name,
		namespace:      o.Pod.Namespace,
		slurmJob:       o.Slurm.JobID,
	}
	if pidLabels {
		k.pid, k.command = p.PID, o.Command
	}
	return k
}

// add sums one process's readings into its owner's.
func (a *ownerAgg) add(p *snapshot.Process) {
	if v, ok := p.UsedMemory.Get(); ok && !a.memoryOverflow {
		// A sum that overflows 64 bits is no amount of memory: the
		// owner's series is left out rather than wrapped.
		a.memory, ok = validate.Sum(a.memory, v)
		a.hasMemory, a.memoryOverflow = ok, !ok
	}
	if v, ok := p.SMUtilization.Get(); ok {
		a.sm += v
		a.hasSM = true
	}
	if v, ok := p.MemoryUtilization.Get(); ok {
		a.memUtil += v
		a.hasMemUt = true
	}
}

// The positions of the gpu_process_* labels, in the catalog's order
// (ownerLabels, then pid and command with PID labels on).
const (
	labelGPU = iota
	labelUUID
	labelUser
	labelContainer
	labelComposeProject
	labelComposeService
	labelPod
	labelNamespace
	labelSlurmJob
	labelPID     // with PID labels only
	labelCommand // with PID labels only

	ownerLabelCount = labelPID
	pidLabelCount   = labelCommand + 1
)

// emitOwner writes one owner's gpu_process_* series on device d.
func emitOwner(em *emitter, d *snapshot.Device, a *ownerAgg, pidLabels bool) {
	lv := em.lv[:ownerLabelCount]
	lv[labelGPU], lv[labelUUID] = itoa(d.Index), d.UUID
	lv[labelUser], lv[labelContainer] = a.key.user, a.key.container
	lv[labelComposeProject], lv[labelComposeService] = a.key.composeProject, a.key.composeService
	lv[labelPod], lv[labelNamespace], lv[labelSlurmJob] = a.key.pod, a.key.namespace, a.key.slurmJob
	if pidLabels {
		lv = em.lv[:pidLabelCount]
		lv[labelPID], lv[labelCommand] = strconv.FormatUint(uint64(a.key.pid), 10), a.key.command
	}
	// em.emit may repair invalid UTF-8 in lv in place; the repaired
	// values serve the next metric just as well.
	if a.hasMemory && em.on(mProcMemory) {
		em.emit(mProcMemory, float64(a.memory), lv)
	}
	if a.hasSM && em.on(mProcSM) {
		em.emit(mProcSM, a.sm, lv)
	}
	if a.hasMemUt && em.on(mProcMemUtil) {
		em.emit(mProcMemUtil, a.memUtil, lv)
	}
}
