//go:build cgo

package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// simProcess is one process holding a context on a simulated GPU.
type simProcess struct {
	pid        uint32
	usedMemory uint64
	sm, mem    float64 // utilization ratios
	// compute and graphics say which contexts the process holds; NVML
	// lists it in each matching process list.
	compute, graphics bool
	// mps: the process is a client of an MPS server, listed by
	// GetMPSComputeRunningProcesses (see mps.go).
	mps bool
	mig *migDevice // nil unless the process runs in a MIG instance
	// start and end bound the process's life in elapsed time (end < 0:
	// never ends); steps change its utilization over time.
	start, end time.Duration
	steps      []UtilizationStep
	// sampledFrom: no utilization sample is stamped before it (a
	// processes_from entry without a start: when the file named it).
	sampledFrom time.Duration
}

// alive says whether the process exists at elapsed time e.
func (p *simProcess) alive(e time.Duration) bool {
	return e >= p.start && (p.end < 0 || e < p.end)
}

// utilAt is the process's SM and memory utilization at elapsed time e.
func (p *simProcess) utilAt(e time.Duration) (sm, mem float64) {
	sm, mem = p.sm, p.mem
	for _, st := range p.steps {
		if e < st.At.D() {
			break
		}
		sm, mem = st.SMUtilization, st.MemoryUtilization
	}
	return sm, mem
}

// noInstance is what NVML puts in ProcessInfo's instance IDs outside MIG.
const noInstance = 0xFFFFFFFF

// placeProcesses checks each process against the profile, attaches it to
// its device (and MIG instance), then derives each device's load from its
// processes.
func (s *Sim) placeProcesses(cfg *Config, procs []ProcessSpec) error {
	placed, err := s.place(cfg, "processes", procs, nil)
	if err != nil {
		return err
	}
	for i, d := range s.devices {
		d.processes = placed[i]
		d.processesUsed = usedThroughout(d.processes)
		d.steadySamples = steadySamplesOf(d.processes)
		d.giWeights = giWeightsOf(d.processes)
		d.act.sm, d.act.mem = d.loadFromProcesses()
	}
	return nil
}

// place checks each process against the profile and returns every
// device's process list: those of base (by device index; nil for none)
// followed by procs. list names the config key in errors.
func (s *Sim) place(cfg *Config, list string, procs []ProcessSpec, base [][]simProcess) ([][]simProcess, error) {
	placed := make([][]simProcess, len(s.devices))
	for i := range placed {
		if base != nil {
			placed[i] = slices.Clone(base[i])
		}
	}
	for i, p := range procs {
		at := cfg.where(list, i, p.line)
		if p.GPU >= len(s.devices) {
			return nil, fmt.Errorf("%s: gpu %d out of range (profile %s has GPUs 0-%d)", at, p.GPU, s.profile.name, len(s.devices)-1)
		}
		onDevice := placed[p.GPU]
		for _, q := range onDevice {
			if q.pid == p.PID {
				return nil, fmt.Errorf("%s: pid %d is already listed on gpu %d", at, p.PID, p.GPU)
			}
		}
		sp := newSimProcess(p)
		mig, capacity, err := s.devices[p.GPU].room(p, onDevice)
		if err != nil {
			return nil, fmt.Errorf("%s: gpu %d %w", at, p.GPU, err)
		}
		if p.UsedMemoryBytes > capacity {
			return nil, fmt.Errorf("%s: used_memory_bytes %d does not fit: %d bytes free on gpu %d", at, p.UsedMemoryBytes, capacity, p.GPU)
		}
		sp.mig = mig
		placed[p.GPU] = append(onDevice, sp)
	}
	return placed, nil
}

// newSimProcess is the process p configures, not yet placed in a MIG
// instance.
func newSimProcess(p ProcessSpec) simProcess {
	sp := simProcess{
		pid: p.PID, usedMemory: p.UsedMemoryBytes,
		sm: p.SMUtilization, mem: p.MemoryUtilization,
		compute:  p.Type != "graphics" && p.Type != "mps",
		graphics: p.Type == "graphics" || p.Type == "compute+graphics",
		mps:      p.Type == "mps" || p.Type == "compute+mps",
		end:      -1,
		steps:    p.Schedule,
	}
	if p.Start != nil {
		sp.start = p.Start.D()
	}
	if p.End != nil {
		sp.end = p.End.D()
	}
	return sp
}

// room is where p runs on the device (its MIG instance; nil without MIG)
// and the memory left there by the processes already onDevice. The error
// completes "gpu N": p names no instance of a MIG-enabled GPU, one it
// lacks, or one on a GPU without MIG.
func (d *device) room(p ProcessSpec, onDevice []simProcess) (*migDevice, uint64, error) {
	if !d.migEnabled {
		if p.GPUInstance != nil || p.ComputeInstance != nil {
			return nil, 0, errors.New("is not in MIG mode: remove gpu_instance/compute_instance")
		}
		capacity := (d.model.memoryMiB - d.model.reservedMiB) * mib
		return nil, capacity - min(capacity, allocatedBytes(onDevice)), nil
	}
	if p.GPUInstance == nil {
		return nil, 0, fmt.Errorf("is in MIG mode: set gpu_instance (and compute_instance) to one of %s", d.migInstanceList())
	}
	ci := 0
	if p.ComputeInstance != nil {
		ci = *p.ComputeInstance
	}
	m := d.findMIG(*p.GPUInstance, ci)
	if m == nil {
		return nil, 0, fmt.Errorf("has no MIG instance gpu_instance=%d compute_instance=%d (valid: %s)", *p.GPUInstance, ci, d.migInstanceList())
	}
	capacity := m.gi.memoryBytes()
	for _, q := range onDevice {
		if q.mig != nil && q.mig.gi == m.gi {
			capacity -= min(capacity, q.usedMemory)
		}
	}
	return m, capacity, nil
}

// loadFromProcesses sums the processes' utilization into the device's base
// load. A process in a MIG instance only drives its share of the GPU.
func (d *device) loadFromProcesses() (sm, mem float64) {
	for _, p := range d.processes {
		share := 1.0
		if p.mig != nil {
			share = float64(p.mig.ciSlices) / float64(migTotalSlices)
		}
		sm += p.sm * share
		mem += p.mem * share
	}
	return math.Min(sm, 1), math.Min(mem, 1)
}

// The process lists of a MIG-enabled GPU's own handle are, as nvml.h says,
// returned "only if the caller has appropriate privileges"; unless the
// simulated caller is privileged (Config.Privileged) they answer
// NO_PERMISSION and the per-instance lists (MIG device handles) are the
// way in.
func (d *device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.whole(d.parentProcesses(false))
}

func (d *device) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.whole(d.parentProcesses(true))
}

func (d *device) parentProcesses(graphics bool) ([]nvml.ProcessInfo, nvml.Return) {
	if _, r := d.begin(featProcesses); r != nvml.SUCCESS {
		return nil, r
	}
	if d.migEnabled && !d.sim.privileged {
		return nil, nvml.ERROR_NO_PERMISSION
	}
	return d.runningProcesses(graphics, nil)
}

// runningProcesses lists the compute or graphics processes of the device,
// or only of one MIG device when only is set. A process holding both
// contexts is in both lists, each time with all of its memory, as nvml.h
// says of usedGpuMemory. On a MIG-enabled GPU the
// instance IDs are filled; otherwise NVML sets them to 0xFFFFFFFF.
func (d *device) runningProcesses(graphics bool, only *migDevice) ([]nvml.ProcessInfo, nvml.Return) {
	e, r := d.begin(featProcesses)
	if r != nvml.SUCCESS {
		return nil, r
	}
	out := []nvml.ProcessInfo{}
	for _, p := range d.procs() {
		holds := p.compute
		if graphics {
			holds = p.graphics
		}
		if !holds || (only != nil && p.mig != only) || !p.alive(e) {
			continue
		}
		info := nvml.ProcessInfo{Pid: p.pid, UsedGpuMemory: p.usedMemory, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
		if d.sick.isBogus(bogusProcessMemory) {
			info.UsedGpuMemory = impossibleProcessB
		}
		if p.mig != nil {
			info.GpuInstanceId = uint32(p.mig.gi.id)
			info.ComputeInstanceId = uint32(p.mig.ciID)
		}
		out = append(out, info)
	}
	return out, r
}

// The driver samples process utilization every processSamplePeriod and
// keeps the samples of the last processSampleBuffer. A process that was
// idle over all of a query's periods has no sample (nvml.h: "one
// utilization sample structure is returned per process running, that had
// some non-zero utilization during the last sample period").
//
// How a query answers is Config.ProcessSamples:
//
//   - per_process (the default): one sample per process, its mean
//     utilization over the buffered periods newer than lastSeenTimestamp
//     (periods before it ran count as idle), stamped with the newest
//     period's time. This is what drivers are seen to do: tools that
//     read the call report as many samples as processes, and a value
//     "since the previous query" when lastSeenTimestamp is the previous
//     answer's time (nvml.h: "Set lastSeenTimeStamp to a timeStamp
//     retrieved from a previous query to read utilization since the
//     previous query").
//   - every_period: every buffered sample newer than lastSeenTimestamp,
//     several per process, each stamped with the (past) time it was
//     taken, which nvml.h's words also admit.
const (
	processSamplePeriod = time.Second / 6
	// processSampleBuffer is sixty periods (10 s): as a count, since 1/6
	// s is no whole number of nanoseconds and 10 s would hold a 61st.
	// How long a real driver keeps them nvml.h does not say; 10 s is the
	// longest interval at which NVIDIA's own per-process monitor reads
	// them (nvidia-smi pmon -d, at most 10 s), and tools that read
	// without lastSeenTimestamp see the mean lag a busy process by far
	// more than that (docs/accounting.md, "Why 5 s").
	processSampleBuffer = 60 * processSamplePeriod
)

// Values of Config.ProcessSamples.
const (
	ProcessSamplesPerProcess  = "per_process"
	ProcessSamplesEveryPeriod = "every_period"
)

// GetProcessUtilization returns the samples newer than lastSeenTimestamp
// (µs since the Unix epoch on the simulated clock), or ERROR_NOT_FOUND
// when there is none, as NVML does. It is NOT_SUPPORTED in MIG mode.
func (d *device) GetProcessUtilization(lastSeenTimestamp uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	return d.appendProcessUtilization(nil, lastSeenTimestamp)
}

// ProcessUtilizationSized answers one call of the C function
// nvmlDeviceGetProcessUtilization with a buffer: the samples newer than
// lastSeenTimestamp written into buf and their count when they fit, or
// ERROR_INSUFFICIENT_SIZE and the count they need. The NVML reader calls
// it with a buffer it keeps from one read to the next, as it calls the C
// function on a real driver (the fake libnvidia-ml.so.1 answers that C
// function from GetProcessUtilization).
func (d *device) ProcessUtilizationSized(buf []nvml.ProcessUtilizationSample, lastSeenTimestamp uint64) (uint32, nvml.Return) {
	out, r := d.appendProcessUtilization(buf[:0:len(buf)], lastSeenTimestamp)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if len(out) > len(buf) {
		return uint32(len(out)), nvml.ERROR_INSUFFICIENT_SIZE
	}
	return uint32(len(out)), r
}

// appendProcessUtilization appends the samples newer than
// lastSeenTimestamp to out (GetProcessUtilization's answer).
func (d *device) appendProcessUtilization(out []nvml.ProcessUtilizationSample, lastSeenTimestamp uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	e, r := d.begin(featProcessUtilization)
	if r != nvml.SUCCESS {
		return nil, r
	}
	if d.migEnabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	w := sampleWindowOf(d.sim.epoch, e, lastSeenTimestamp)
	n := len(out)
	if d.sim.everyPeriod {
		out = d.everyPeriodSamples(out, &w)
	} else {
		out = d.perProcessSamples(out, &w)
	}
	if len(out) == n {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, r
}

// sampleWindow is the buffered sample periods a query reads: those of
// the last processSampleBuffer up to newest whose time (in µs, as the
// driver stamps it) is after lastSeen. Their times are worked out once
// per query, not once per process: at 256 processes per GPU that was
// most of what a simulated query cost.
type sampleWindow struct {
	newest  time.Duration // elapsed time
	periods int
	at      [bufferedPeriods]time.Duration // newest first
	ts      [bufferedPeriods]uint64
}

// bufferedPeriods is how many periods processSampleBuffer holds.
const bufferedPeriods = int(processSampleBuffer / processSamplePeriod)

func sampleWindowOf(epoch time.Time, e time.Duration, lastSeenTimestamp uint64) sampleWindow {
	w := sampleWindow{newest: e.Truncate(processSamplePeriod)}
	for at := w.newest; at > w.newest-processSampleBuffer && at >= 0; at -= processSamplePeriod {
		ts := uint64(epoch.Add(at).UnixMicro())
		if ts <= lastSeenTimestamp {
			break
		}
		w.at[w.periods], w.ts[w.periods] = at, ts
		w.periods++
	}
	return w
}

// each calls f for each period of the window, newest first, with its
// time stamp.
func (w *sampleWindow) each(f func(at time.Duration, ts uint64)) {
	for i := range w.periods {
		f(w.at[i], w.ts[i])
	}
}

// sampled says whether process p has a sample for period at.
func (p *simProcess) sampled(at time.Duration) bool {
	return p.compute && p.alive(at) && at >= p.sampledFrom
}

func (d *device) perProcessSamples(out []nvml.ProcessUtilizationSample, w *sampleWindow) []nvml.ProcessUtilizationSample {
	if w.periods == 0 {
		return out
	}
	procs := d.procs()
	if out == nil {
		out = make([]nvml.ProcessUtilizationSample, 0, len(procs))
	}
	ts := w.ts[0]
	if d.steadySamples != nil && d.sim.live == nil {
		for _, s := range d.steadySamples {
			out = append(out, nvml.ProcessUtilizationSample{Pid: s.pid, TimeStamp: ts, SmUtil: s.sm, MemUtil: s.mem})
		}
		return out
	}
	for i := range procs {
		p := &procs[i]
		sm, mem := p.meanOver(w)
		if sm == 0 && mem == 0 {
			continue
		}
		out = append(out, nvml.ProcessUtilizationSample{Pid: p.pid, TimeStamp: ts, SmUtil: pct(sm), MemUtil: pct(mem)})
	}
	return out
}

// steadySample is what any read answers for a process that lives
// throughout at one utilization, but for the time stamp.
type steadySample struct {
	pid     uint32
	sm, mem uint32 // percent
}

// steadySamplesOf is perProcessSamples' answer, but for the time stamp,
// for any read when every process with a compute
// context lives throughout at one utilization (so that a simulated fleet
// of hundreds of processes does not cost a read what a driver's answer
// would not: the processes' records are most of the simulator's memory);
// nil otherwise. Every period a read looks at is at or after the start
// of the run, so each such process is sampled at all of them, and its
// mean over any of them is its one utilization.
func steadySamplesOf(procs []simProcess) []steadySample {
	out := make([]steadySample, 0, len(procs))
	for i := range procs {
		p := &procs[i]
		if !p.compute {
			continue // never sampled
		}
		if p.start > 0 || p.end >= 0 || len(p.steps) > 0 || p.sampledFrom > 0 {
			return nil
		}
		sm, mem := p.sm, p.mem
		if sm == 0 && mem == 0 {
			continue
		}
		out = append(out, steadySample{pid: p.pid, sm: pct(sm), mem: pct(mem)})
	}
	return out
}

// meanOver is p's mean SM and memory utilization over the window's
// periods, those it was not sampled at counting as idle.
func (p *simProcess) meanOver(w *sampleWindow) (sm, mem float64) {
	oldest := w.at[w.periods-1]
	if len(p.steps) == 0 && p.sampled(oldest) && p.sampled(w.at[0]) {
		// Sampled throughout at one utilization (a life is one span):
		// most processes at most reads, where looking each period up was
		// most of a simulated query's cost.
		return p.sm, p.mem
	}
	for _, at := range w.at[:w.periods] {
		if p.sampled(at) {
			s, m := p.utilAt(at)
			sm, mem = sm+s, mem+m
		}
	}
	n := float64(w.periods)
	return sm / n, mem / n
}

func (d *device) everyPeriodSamples(out []nvml.ProcessUtilizationSample, w *sampleWindow) []nvml.ProcessUtilizationSample {
	procs := d.procs()
	if out == nil {
		// Sized for every process busy at every period asked for: a read
		// of the whole buffer of 2048 processes would otherwise grow it
		// ten times.
		out = make([]nvml.ProcessUtilizationSample, 0, w.periods*len(procs))
	}
	w.each(func(at time.Duration, ts uint64) {
		for i := range procs {
			p := &procs[i]
			if !p.sampled(at) {
				continue
			}
			sm, mem := p.utilAt(at)
			if sm == 0 && mem == 0 {
				continue
			}
			out = append(out, nvml.ProcessUtilizationSample{Pid: p.pid, TimeStamp: ts, SmUtil: pct(sm), MemUtil: pct(mem)})
		}
	})
	return out
}
