//go:build cgo

package nvmlbackend

import (
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// noInstance is what NVML puts in ProcessInfo.GpuInstanceId and
// ComputeInstanceId for a process that is not in a MIG instance.
const noInstance = math.MaxUint32

// memoryNotAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long:
// NVML reports it as UsedGpuMemory when it cannot tell (e.g. under WDDM, or
// for processes of another container without the right permissions).
const memoryNotAvailable = math.MaxUint64

// readProcesses lists the compute and graphics processes of the device and
// of each of its MIG devices, with per-process utilization. Owner
// attribution fills Process.Owner later. When a list could not be read
// (an error, or NOT_SUPPORTED with no list read), the device's
// ProcessesUnknown says why: its process count is then unknown, not 0.
func (d *deviceReader) readProcesses() []snapshot.Process {
	if !d.r.processSamples {
		procs := d.listProcesses()
		if len(procs) > 0 && d.can(callGetProcessUtilization) {
			d.addUtilization(procs, d.fetchProcessSamples())
		}
		return procs
	}
	// The accounting's reader: the samples first, each once; they say
	// whether the processes must be listed at this read.
	samples, sampled := d.readProcessSamples()
	var memory usedMemory
	every := 0
	if d.r.listSteady > 0 {
		memory, every = d.usedMemory(), d.r.listEvery
	}
	if !d.st.listing.due(d.listAll, every, samples, sampled, d.out.device.MIGInstances, memory) {
		d.out.device.ProcessesNotListed = true
		return nil
	}
	procs := d.listProcesses()
	d.addUtilization(procs, samples)
	d.st.listing.listed(procs, samples, memory)
	return procs
}

// usedMemory is the GPU's used memory as processListing compares it from
// one list to the next: the MIG instances' summed on a MIG GPU (they are
// read at every read anyway), else the GPU's (the memory group's reading
// when this read has one: the job records read it). A failed read is no error
// of the processes (the scrapes report the memory): the GPU is then
// listed as often as without the comparison.
func (d *deviceReader) usedMemory() usedMemory {
	if migs := d.out.device.MIGInstances; len(migs) > 0 {
		var sum uint64
		for i := range migs {
			v, ok := migs[i].MemoryUsed.Get()
			if !ok {
				return usedMemory{}
			}
			sum += v
		}
		return usedMemory{bytes: sum, known: true}
	}
	if used, ok := d.out.device.Memory.Used.Get(); ok {
		return usedMemory{bytes: used, known: true} // the memory group's reading of this read
	}
	if fb, ret := d.framebuffer(d.dev); ret == nvml.SUCCESS {
		return usedMemory{bytes: fb.Used, known: true}
	}
	return usedMemory{}
}

// listProcesses reads the process lists of the device and of its MIG
// devices.
func (d *deviceReader) listProcesses() []snapshot.Process {
	var lists listOutcomes
	// Sized for the last list's processes: one allocation, where growing
	// by appends made five at 256 processes of 472 bytes each; none for
	// the accounting's reader, whose lists take turns in two buffers.
	var procs []snapshot.Process
	switch {
	case d.r.processSamples:
		procs = d.st.processes.take(d.st.processHint)
	case d.st.processHint > 0:
		procs = make([]snapshot.Process, 0, d.st.processHint)
	}
	procs, onMIG := d.migProcesses(procs, &lists)
	procs = d.parentProcesses(procs, &lists, onMIG)

	d.out.device.ProcessesUnknown = lists.unknown()
	procs = mergeContexts(procs, &d.st.merge)
	d.st.processHint = len(procs)
	if d.r.processSamples {
		d.st.processes.keep(procs)
	}
	return procs
}

// processKey is one process in one kind of list (compute or graphics).
type processKey struct {
	pid  uint32
	kind string
}

// migProcesses appends the processes of each MIG device, which carry its
// identity, to procs and says which were seen there: the same process may
// also appear in the parent GPU's list, where it is skipped.
func (d *deviceReader) migProcesses(procs []snapshot.Process, lists *listOutcomes) ([]snapshot.Process, map[processKey]bool) {
	var onMIG map[processKey]bool // nil on a GPU without MIG devices: no allocation
	for _, m := range d.migDevices(gProcesses) {
		for _, kind := range processKinds {
			if !d.can(kind.need) {
				continue
			}
			list, _, ok := d.listOf(kind, m.handle, lists, false)
			if !ok {
				continue
			}
			for _, info := range list {
				p := newProcess(d.index, d.out.device.UUID, kind.name, info)
				p.MIGUUID = m.uuid
				p.GPUInstanceID = snapshot.Some(m.gpuInstanceID)
				p.ComputeInstanceID = snapshot.Some(m.computeInstanceID)
				procs = append(procs, p)
				if onMIG == nil {
					// Kept by the device from one list to the next.
					if d.st.onMIG == nil {
						d.st.onMIG = make(map[processKey]bool)
					}
					onMIG = d.st.onMIG
					clear(onMIG)
				}
				onMIG[processKey{info.Pid, kind.name}] = true
			}
		}
	}
	return procs, onMIG
}

// parentProcesses appends the GPU's own processes, less those onMIG, to
// procs.
func (d *deviceReader) parentProcesses(procs []snapshot.Process, lists *listOutcomes, onMIG map[processKey]bool) []snapshot.Process {
	for _, kind := range processKinds {
		if d.migEnabled && d.st.migParentDenied {
			break
		}
		if !d.can(kind.need) {
			continue
		}
		list, denied, ok := d.listOf(kind, d.dev, lists, d.migEnabled)
		if denied {
			// nvml.h: on a MIG-enabled GPU the parent's list is returned
			// "only if the caller has appropriate privileges". The MIG
			// devices' lists hold the processes for everyone; privileges
			// do not change while running, so stop asking.
			d.st.migParentDenied = true
			break
		}
		if !ok {
			continue
		}
		for _, info := range list {
			if onMIG[processKey{info.Pid, kind.name}] {
				continue
			}
			p := newProcess(d.index, d.out.device.UUID, kind.name, info)
			if d.migEnabled {
				d.placeInMIG(&p, info)
			}
			procs = append(procs, p)
		}
	}
	return procs
}

// placeInMIG gives a process from the parent GPU's list the MIG instance
// NVML names in it, if any, and that instance's MIG device UUID.
func (d *deviceReader) placeInMIG(p *snapshot.Process, info nvml.ProcessInfo) {
	if info.GpuInstanceId == noInstance || info.ComputeInstanceId == noInstance {
		return
	}
	p.GPUInstanceID = snapshot.Some(int(info.GpuInstanceId))
	p.ComputeInstanceID = snapshot.Some(int(info.ComputeInstanceId))
	for _, m := range d.migDevs {
		if m.gpuInstanceID == int(info.GpuInstanceId) && m.computeInstanceID == int(info.ComputeInstanceId) {
			p.MIGUUID = m.uuid
		}
	}
}

// listOf reads one process list of handle (the GPU or one of its MIG
// devices) and files its failure. denied is the GPU's own list answering
// NO_PERMISSION on a MIG-enabled GPU (migParent), which is no failure.
// ok says the list was read.
func (d *deviceReader) listOf(kind processKind, handle nvml.Device, lists *listOutcomes, migParent bool) (list []nvml.ProcessInfo, denied, ok bool) {
	list, ret, tooLong := listProcesses(handle, kind, d.st.processHint)
	switch {
	case ret == nvml.SUCCESS:
		lists.listed = true
		return list, false, true
	case migParent && ret == nvml.ERROR_NO_PERMISSION:
		return nil, true, false
	case tooLong != nil:
		d.out.stats.fail(gProcesses, fmt.Errorf("gpu %d: %s: %w to all of %d calls (the driver last asked for %d entries; at most %d are offered): its processes are unknown",
			d.index, kind.call, nvmlErr(ret), tooLong.tries, tooLong.asked, maxProcessListEntries))
	default:
		d.ok(gProcesses, kind.call, ret)
	}
	lists.failed(ret)
	return nil, false, false
}

// listOutcomes gathers how a device's process lists answered, to say
// whether its processes are known.
type listOutcomes struct {
	listed      bool   // a list was read
	unsupported bool   // a list answered NOT_SUPPORTED
	failure     string // the first list that failed otherwise, by its code's name
}

// failed notes a list that was not read; NOT_SUPPORTED is not a failure,
// and a lost GPU is reported down instead.
func (o *listOutcomes) failed(ret nvml.Return) {
	switch classify(ret) {
	case succeeded, deviceGone:
	case absent:
		o.unsupported = true
	default:
		if o.failure == "" {
			o.failure = downReason(ret)
		}
	}
}

// unknown is Device.ProcessesUnknown: why the processes are not known, or
// "" when every list asked was read (or unsupported beside one that was).
func (o *listOutcomes) unknown() string {
	switch {
	case o.failure != "":
		return o.failure
	case o.unsupported && !o.listed:
		return "not_supported"
	}
	return ""
}

// processKind is one of NVML's process lists.
type processKind struct {
	name string // Process.Type, and the simulator's name of the list
	call string
	need nvmlCall
	list func(nvml.Device) ([]nvml.ProcessInfo, nvml.Return)
}

var processKinds = [...]processKind{
	{"compute", "GetComputeRunningProcesses", callGetComputeRunningProcesses, nvml.Device.GetComputeRunningProcesses},
	{"graphics", "GetGraphicsRunningProcesses", callGetGraphicsRunningProcesses, nvml.Device.GetGraphicsRunningProcesses},
	// MPS clients; a client also in the compute list is merged into one
	// process of type "compute+mps" (see mergeContexts).
	{processTypeMPS, "GetMPSComputeRunningProcesses", callGetMPSComputeRunningProcesses, nvml.Device.GetMPSComputeRunningProcesses},
}

func newProcess(gpu int, uuid, kind string, info nvml.ProcessInfo) snapshot.Process {
	p := snapshot.Process{GPU: gpu, GPUUUID: uuid, PID: info.Pid, Type: kind}
	if info.UsedGpuMemory != memoryNotAvailable {
		p.UsedMemory = snapshot.Some(info.UsedGpuMemory)
	}
	return p
}

// processSampleLookback is how far before the newest sample seen a read
// asks for samples. The driver samples about every 1/6 s and keeps a buffer
// of past samples; asking only for samples newer than the last read's
// newest left a read made a moment after another (a second Prometheus
// server) with none, and the process without utilization.
const processSampleLookback = uint64(time.Second / time.Microsecond)

// fetchProcessSamples reads the driver's per-process samples from the
// second before the newest sample seen so far (for the gauges: each
// process's newest one). nil when there is none or the read failed.
func (d *deviceReader) fetchProcessSamples() []nvml.ProcessUtilizationSample {
	samples, _ := d.getProcessUtilization(d.st.lastProcessSample - min(d.st.lastProcessSample, processSampleLookback))
	return samples
}

// readProcessSamples reads every sample newer than the previous read's
// newest, each once (the accounting integrates them), into
// Device.ProcessSamples, and the time they are newer than into
// Device.ProcessSamplesSince. sampled says the driver answered: with
// samples, or with none because nobody was busy (then ProcessSamples is
// empty, not nil: measured, not unknown).
func (d *deviceReader) readProcessSamples() (samples []nvml.ProcessUtilizationSample, sampled bool) {
	if !d.can(callGetProcessUtilization) {
		return nil, false
	}
	now := d.r.now()
	since := d.st.lastProcessSample
	samples, sampled = d.getProcessUtilization(since)
	// getProcessUtilization moved lastProcessSample to the newest sample.
	if from, again := d.st.sampleWindowStart(since, d.st.lastProcessSample, now); again {
		since = from
		samples, sampled = d.getProcessUtilization(since)
	}
	if sampled {
		d.st.samplesReadAt = now
		d.out.device.ProcessSamples = d.st.convertSamples(samples)
		d.out.device.ProcessSamplesSince = since
	}
	return samples, sampled
}

// sampleWindowStart says when a read must be made again, and from when.
// A driver that answers one sample per process answers its mean over its
// buffered periods newer than the time asked from: when that time is far
// behind (the GPU answered no sample at the reads since, being idle or
// never read), the mean is over as much of the buffer as the driver keeps,
// a length nvml.h does not give, and no rule can say what time it stands
// for. So when the newest sample answered is more than a second later than
// the time since the last answer (the read's gap) after since, the samples
// are read again from one gap before that newest sample: nothing was
// answered between since and the last answer, so nothing is lost, and
// the mean is over that gap, which the accounting multiplies it by.
// newest is the newest sample time answered (since when none was).
func (st *deviceState) sampleWindowStart(since, newest uint64, now time.Time) (from uint64, again bool) {
	if newest <= since || st.samplesReadAt.IsZero() {
		return 0, false
	}
	gap := uint64(now.Sub(st.samplesReadAt) / time.Microsecond)
	if gap == 0 || newest <= gap+since+uint64(time.Second/time.Microsecond) {
		return 0, false
	}
	return newest - gap, true
}

// getProcessUtilization reads the samples newer than since, into the
// device's buffer (process_utilization.go). ok says the driver answered
// (ERROR_NOT_FOUND, no sample in the window, is an answer).
func (d *deviceReader) getProcessUtilization(since uint64) (samples []nvml.ProcessUtilizationSample, ok bool) {
	samples, ret, tooLong := d.sampleProcessUtilization(since)
	if ret == nvml.ERROR_NOT_FOUND {
		return nil, true
	}
	if tooLong != nil {
		d.samplesTooLong(ret, tooLong)
		return nil, false
	}
	if !d.ok(gProcesses, "GetProcessUtilization", ret) {
		return nil, false
	}
	for _, s := range samples {
		d.st.lastProcessSample = max(d.st.lastProcessSample, s.TimeStamp)
	}
	return samples, true
}

// addUtilization sets each process's SM and memory utilization from its
// newest sample. A process with no sample (idle over the samples read, or
// sampling unsupported, as on MIG) keeps the readings absent.
func (d *deviceReader) addUtilization(procs []snapshot.Process, samples []nvml.ProcessUtilizationSample) {
	if len(procs) == 0 || len(samples) == 0 {
		return
	}
	// Usually a device has a handful of processes and scanning is cheapest;
	// a shared inference or MPS host can have hundreds, where a scan per
	// process turns quadratic (bench/RESULTS.md).
	newestOf := func(pid uint32) *nvml.ProcessUtilizationSample {
		var newest *nvml.ProcessUtilizationSample
		for j := range samples {
			s := &samples[j]
			if s.Pid == pid && (newest == nil || s.TimeStamp > newest.TimeStamp) {
				newest = s
			}
		}
		return newest
	}
	if len(samples) > 16 {
		// Kept by the device from one read to the next: the indexes of
		// each PID's newest sample.
		if d.st.newestSample == nil {
			d.st.newestSample = make(map[uint32]int32, len(samples))
		}
		byPID := d.st.newestSample
		clear(byPID)
		for j := range samples {
			if old, ok := byPID[samples[j].Pid]; !ok || samples[j].TimeStamp > samples[old].TimeStamp {
				byPID[samples[j].Pid] = int32(j)
			}
		}
		newestOf = func(pid uint32) *nvml.ProcessUtilizationSample {
			if j, ok := byPID[pid]; ok {
				return &samples[j]
			}
			return nil
		}
	}
	for i := range procs {
		if newest := newestOf(procs[i].PID); newest != nil {
			procs[i].SMUtilization = snapshot.Some(percent(newest.SmUtil))
			procs[i].MemoryUtilization = snapshot.Some(percent(newest.MemUtil))
		}
	}
}

// convertSamples converts the driver's samples, in its order, into the
// device's buffer of this read (alternating.go). Never nil: no sample is a
// measure.
func (st *deviceState) convertSamples(samples []nvml.ProcessUtilizationSample) []snapshot.ProcessSample {
	out := st.samples.take(len(samples))
	for _, s := range samples {
		out = append(out, snapshot.ProcessSample{PID: s.Pid, TimeMicros: s.TimeStamp, SM: percent(s.SmUtil), Memory: percent(s.MemUtil)})
	}
	return st.samples.keep(out)
}
