package accounting

import (
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The integration rules, per interval (previous tick, this tick]:
//
//   - Held time and memory: an owner listed at this tick held the GPU
//     (and the memory listed) for the whole interval. An owner's start
//     and end fall somewhere in an interval, so each is off by less than
//     one interval, half of one on average, in opposite directions.
//   - SM time, where the driver measures it per process (whole GPUs): the
//     sum of the process's samples newer than the previous tick, each
//     standing for one driver sample period. Samples exist only while a
//     process runs, so a process's start and end cost nothing here, and a
//     process that ended since the previous tick still finds its owner.
//   - SM time on a MIG instance: the driver has no per-process samples
//     there; GPM measures the instance's SM activity, split equally
//     among the owners listed in it (modelled).
//   - MPS: each client is its own process with its own samples. The MPS
//     server and control daemon are no owner: samples the driver gives
//     the server go to the clients listed on that GPU, in proportion to
//     their own (equally when they have none).
//   - Energy: see energy.go.

// deviceTick is one GPU's figures for one interval.
type deviceTick struct {
	dev *snapshot.Device
	dt  float64 // the interval, seconds
	// present is who held the GPU in the interval (the last list's
	// owners), before the list before it (for the owners of samples left
	// by processes that ended since) and daemons the MPS daemons' PIDs.
	present map[snapshot.OwnerKey]*presence
	list    *ownerList
	before  *ownerList
	// sm is each owner's SM-seconds in the interval; smMeasured says
	// whether SM time was measured at all (per GPU) and smMeasuredMIG
	// per MIG instance.
	sm            map[snapshot.OwnerKey]float64
	smMeasured    bool
	smMeasuredMIG map[string]bool
}

type presence struct {
	memory    uint64
	hasMemory bool
	mpsClient bool
}

// integrate adds the interval ending at s.Time. It reports whether it did
// (not for the first snapshot, nor one no newer than the last).
func (st *state) integrate(s *snapshot.Snapshot, opts Options) bool {
	if !st.started {
		st.started, st.last = true, s.Time
		for i := range s.Devices {
			if d := &s.Devices[i]; d.UUID != "" {
				st.trackEnergy(d, st.track(s, d))
			}
		}
		return false
	}
	dt := s.Time.Sub(st.last).Seconds()
	if dt <= 0 {
		return false
	}
	st.last = s.Time
	byUUID := make(map[string]*deviceTick, len(s.Devices))
	for i := range s.Devices {
		d := &s.Devices[i]
		if !d.Up || d.UUID == "" {
			continue
		}
		tr := st.track(s, d)
		tk := st.tickDevice(d, tr, dt)
		byUUID[d.UUID] = tk
		st.addOwners(tk, s.Time, dt)
		st.trackEnergy(d, tr)
	}
	st.addAllocations(s, byUUID, dt, opts.IdleThreshold)
	return true
}

// keyOf is the owner key of process p on device d.
func keyOf(d *snapshot.Device, p *snapshot.Process) snapshot.OwnerKey {
	o := &p.Owner
	return snapshot.OwnerKey{
		GPU: d.Index, GPUUUID: d.UUID, MIGUUID: p.MIGUUID,
		User: o.User, Container: o.Container.Label(),
		ComposeProject: o.Container.ComposeProject, ComposeService: o.Container.ComposeService,
		Pod: o.Pod.Name, Namespace: o.Pod.Namespace, SlurmJob: o.Slurm.JobID,
	}
}

// isMPSDaemon recognises the MPS server and control daemon by their
// program name: they run the clients' work and own none of it.
func isMPSDaemon(p *snapshot.Process) bool {
	prog, _, _ := strings.Cut(p.Owner.Command, " ")
	switch filepath.Base(prog) {
	case "nvidia-cuda-mps-server", "nvidia-cuda-mps-control":
		return true
	}
	return false
}

func isMIG(d *snapshot.Device) bool {
	return d.Info.MIGMode == "enabled" || len(d.MIGInstances) > 0
}

// tickDevice works out who held device d in the interval and their SM time.
// Who held it is the last process list's owners: the reader lists a GPU's
// processes only every few ticks, and at once when its samples show a
// process that started or ended (nvmlbackend.Options.ListProcessesEvery).
func (st *state) tickDevice(d *snapshot.Device, tr *deviceTrack, dt float64) *deviceTick {
	if tr.sm == nil {
		tr.sm = map[snapshot.OwnerKey]float64{}
	}
	clear(tr.sm)
	tk := &deviceTick{dev: d, dt: dt, present: tr.list.present, list: &tr.list, before: &tr.before, sm: tr.sm}
	switch {
	case isMIG(d):
		st.smFromGPM(tk, dt)
	case d.ProcessSamples != nil:
		tk.smMeasured = true
		st.smFromSamples(tk, tr)
	}
	return tk
}

// smFromGPM gives each MIG instance's measured SM activity (GPM) to the
// owners listed in it, equally.
func (st *state) smFromGPM(tk *deviceTick, dt float64) {
	tk.smMeasuredMIG = map[string]bool{}
	for i := range tk.dev.MIGInstances {
		m := &tk.dev.MIGInstances[i]
		active, ok := m.GPM.SMActive.Get()
		if !ok || math.IsNaN(active) {
			continue
		}
		tk.smMeasuredMIG[m.UUID] = true
		var in []snapshot.OwnerKey
		for k := range tk.present {
			if k.MIGUUID == m.UUID {
				in = append(in, k)
			}
		}
		for _, k := range in {
			tk.sm[k] += active * dt / float64(len(in))
		}
	}
}

// smMeasuredFor says whether SM time was measured for owner k this interval.
func (tk *deviceTick) smMeasuredFor(k snapshot.OwnerKey) bool {
	if tk.smMeasured {
		return true
	}
	return k.MIGUUID != "" && tk.smMeasuredMIG[k.MIGUUID]
}

// addOwners adds the interval to the totals of the owners of one GPU.
func (st *state) addOwners(tk *deviceTick, now time.Time, dt float64) {
	shares, idle, hasEnergy := st.splitEnergy(tk)
	for k, p := range tk.present {
		t := st.owner(k, now)
		t.LastSeen = now
		t.Seconds += dt
		if p.hasMemory {
			t.MemoryByteSeconds = snapshot.Some(t.MemoryByteSeconds.Value + float64(p.memory)*dt)
			t.MemoryBytesMax = snapshot.Some(max(t.MemoryBytesMax.Value, p.memory))
		}
	}
	for k, v := range tk.sm {
		if t := st.owners[k]; t != nil || v > 0 {
			t = st.owner(k, now)
			t.SMSeconds = snapshot.Some(t.SMSeconds.Value + v)
		}
	}
	for k := range tk.present {
		if tk.smMeasuredFor(k) {
			t := st.owners[k]
			t.SMSeconds.Valid = true
		}
	}
	if !hasEnergy {
		return
	}
	for k, j := range shares {
		if _, known := st.owners[k]; !known && j == 0 {
			continue // an ended process's samples with no SM time: no new total
		}
		t := st.owner(k, now)
		t.EnergyJoules = snapshot.Some(t.EnergyJoules.Value + j)
	}
	for k := range tk.present {
		st.owners[k].EnergyJoules.Valid = true
	}
	e := st.idle[tk.dev.UUID]
	if e == nil {
		e = &snapshot.DeviceEnergy{GPU: tk.dev.Index, GPUUUID: tk.dev.UUID}
		st.idle[tk.dev.UUID] = e
	}
	e.Joules += idle
}

// track takes device d's process list of this snapshot, when the reader
// listed them: it replaces the last list, which becomes the list before.
// A device the reader did not list keeps its last list. A device never
// listed (tracked from a read that did not list it) has none yet.
func (st *state) track(s *snapshot.Snapshot, d *snapshot.Device) *deviceTrack {
	tr := st.devs[d.UUID]
	if tr == nil {
		tr = &deviceTrack{}
		st.devs[d.UUID] = tr
	}
	if d.ProcessesNotListed {
		return tr
	}
	tr.spare.fill(s, d)
	tr.list, tr.before, tr.spare = tr.spare, tr.list, tr.before
	return tr
}

// trackEnergy remembers the energy counter for the next tick.
func (st *state) trackEnergy(d *snapshot.Device, tr *deviceTrack) {
	if e, ok := d.Power.Energy.Get(); ok && d.Up {
		tr.energy, tr.hasEnergy = e, true
	}
}
