package exporter

import (
	"strconv"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
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
	// Map device index → position of the device, for devices that are up.
	// Processes of a down or unknown device are not reported.
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
		o := &p.Owner
		k := ownerKey{
			dev:       dev,
			user:      o.User,
			container: containerLabel(&o.Container),
			// Compose labels let PromQL sum per compose service without
			// joining an info series on the container name, which is
			// not unique across hosts.
			composeProject: o.Container.ComposeProject,
			composeService: o.Container.ComposeService,
			pod:            o.Pod.Name,
			namespace:      o.Pod.Namespace,
			slurmJob:       o.Slurm.JobID,
		}
		if pidLabels {
			k.pid, k.command = p.PID, o.Command
		}
		j, ok := index[k]
		if !ok {
			j = len(aggs)
			index[k] = j
			aggs = append(aggs, ownerAgg{key: k})
		}
		a := &aggs[j]
		if v, ok := p.UsedMemory.Get(); ok {
			a.memory += v
			a.hasMemory = true
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
	em.procCounts, em.procAggs = counts, aggs

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
		a := &aggs[i]
		d := &s.Devices[a.key.dev]
		em.lv[0], em.lv[1] = itoa(d.Index), d.UUID
		em.lv[2], em.lv[3], em.lv[4], em.lv[5] = a.key.user, a.key.container, a.key.composeProject, a.key.composeService
		em.lv[6], em.lv[7], em.lv[8] = a.key.pod, a.key.namespace, a.key.slurmJob
		n := 9
		if pidLabels {
			em.lv[9], em.lv[10] = strconv.FormatUint(uint64(a.key.pid), 10), a.key.command
			n = 11
		}
		// em.emit may repair invalid UTF-8 in em.lv in place; the
		// repaired values serve the next metric just as well.
		if a.hasMemory && em.on(mProcMemory) {
			em.emit(mProcMemory, float64(a.memory), em.lv[:n])
		}
		if a.hasSM && em.on(mProcSM) {
			em.emit(mProcSM, a.sm, em.lv[:n])
		}
		if a.hasMemUt && em.on(mProcMemUtil) {
			em.emit(mProcMemUtil, a.memUtil, em.lv[:n])
		}
	}
	collectAllocations(em, s)
	collectAccounting(em, s)
}
