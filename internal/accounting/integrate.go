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
//   - Held time and memory: an owner named by the GPU's last process list
//     held the GPU (and the memory listed then) for the whole interval.
//     The reader lists when the samples show a process start or end, and
//     every ListInterval: a busy owner's start is off by less than one
//     interval, its end by less than two; an idle one's by up to
//     ListInterval.
//   - SM time, where the driver measures it per process (whole GPUs): the
//     sum of the process's samples newer than the previous tick, each
//     standing for one driver sample period. Samples exist only while a
//     process runs, so a process's start and end cost nothing here, and a
//     process that ended since the last list still finds its owner (in
//     the list before).
//   - SM time on a MIG instance: the driver has no per-process samples
//     there; GPM measures the instance's SM activity, split equally
//     among the owners listed in it (modelled).
//   - MPS: each client is its own process with its own samples. The MPS
//     server and control daemon are no owner: samples the driver gives
//     the server go to the clients listed on that GPU, in proportion to
//     their own (equally when they have none).
//   - Energy: see energy.go.

// deviceTick is one GPU's figures for one interval. The listed owners'
// figures are kept beside them in list (listedOwner.sm, .energy); those
// of owners listed only in the list before (processes that ended since,
// whose last samples are still being read) in ended.
type deviceTick struct {
	dev *snapshot.Device
	dt  float64 // the interval, seconds
	// list is the last process list's owners, who held the GPU in the
	// interval; before the list before it.
	list, before *ownerList
	// ended is the SM-seconds and energy of owners not in list.
	ended map[snapshot.OwnerKey]*endedFigures
	// smMeasured says whether SM time was measured at all (per GPU) and
	// smMeasuredMIG per MIG instance.
	smMeasured    bool
	smMeasuredMIG map[string]bool
}

// endedFigures are an ended owner's figures of one interval.
type endedFigures struct{ sm, energy float64 }

// addSM adds SM-seconds to owner k, listed or ended.
func (tk *deviceTick) addSM(k snapshot.OwnerKey, v float64) {
	if j, ok := tk.list.indexOf(&k); ok {
		tk.list.owners[j].sm += v
		return
	}
	f := tk.ended[k]
	if f == nil {
		f = &endedFigures{}
		tk.ended[k] = f
	}
	f.sm += v
}

// integrate adds the interval ending at s.Time. It reports whether it did
// (not for the first snapshot, nor one no newer than the last).
func (st *state) integrate(s *snapshot.Snapshot, opts Options) bool {
	if !st.started {
		st.started, st.last = true, s.Time
		st.devProcs.group(s)
		for i := range s.Devices {
			if d := &s.Devices[i]; d.UUID != "" {
				st.trackEnergy(d, st.track(s, i))
			}
		}
		return false
	}
	dt := s.Time.Sub(st.last).Seconds()
	if dt <= 0 {
		return false
	}
	st.last = s.Time
	byUUID := st.byUUID
	clear(byUUID)
	st.devProcs.group(s)
	for i := range s.Devices {
		d := &s.Devices[i]
		if !d.Up || d.UUID == "" {
			continue
		}
		tr := st.track(s, i)
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
	// Every process of a list is asked: a scan for the names' common
	// part rules out the others without splitting their command lines.
	if !strings.Contains(p.Owner.Command, "nvidia-cuda-mps-") {
		return false
	}
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
// process that started or ended (nvmlbackend.AccountingOptions.ListProcessesEvery).
func (st *state) tickDevice(d *snapshot.Device, tr *deviceTrack, dt float64) *deviceTick {
	tk := &tr.tick
	if tk.ended == nil {
		tk.ended, tk.smMeasuredMIG = map[snapshot.OwnerKey]*endedFigures{}, map[string]bool{}
	}
	clear(tk.ended)
	clear(tk.smMeasuredMIG)
	tk.dev, tk.dt, tk.list, tk.before, tk.smMeasured = d, dt, &tr.list, &tr.before, false
	tk.list.startTick()
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
	for i := range tk.dev.MIGInstances {
		m := &tk.dev.MIGInstances[i]
		active, ok := m.GPM.SMActive.Get()
		if !ok || math.IsNaN(active) {
			continue
		}
		tk.smMeasuredMIG[m.UUID] = true
		in := 0
		for j := range tk.list.owners {
			if tk.list.owners[j].key.MIGUUID == m.UUID {
				in++
			}
		}
		for j := range tk.list.owners {
			if o := &tk.list.owners[j]; o.key.MIGUUID == m.UUID {
				o.sm += active * dt / float64(in)
			}
		}
	}
}

// smMeasuredFor says whether SM time was measured for owner k this interval.
func (tk *deviceTick) smMeasuredFor(k *snapshot.OwnerKey) bool {
	if tk.smMeasured {
		return true
	}
	return k.MIGUUID != "" && tk.smMeasuredMIG[k.MIGUUID]
}

// addOwners adds the interval to the totals of the owners of one GPU.
func (st *state) addOwners(tk *deviceTick, now time.Time, dt float64) {
	idle, hasEnergy := st.splitEnergy(tk)
	for i := range tk.list.owners {
		o := &tk.list.owners[i]
		t := st.listedTotal(o, now)
		t.LastSeen = now
		t.Seconds += dt
		if o.hasMemory {
			t.MemoryByteSeconds = snapshot.Some(t.MemoryByteSeconds.Value + float64(o.memory)*dt)
			t.MemoryBytesMax = snapshot.Some(max(t.MemoryBytesMax.Value, o.memory))
		}
		t.SMSeconds.Value += o.sm
		if tk.smMeasuredFor(&o.key) {
			t.SMSeconds.Valid = true
		}
		if hasEnergy {
			t.EnergyJoules = snapshot.Some(t.EnergyJoules.Value + o.energy)
		}
	}
	// Owners whose processes ended since the list before: their samples
	// read now make a total only when they used SM time.
	for k, f := range tk.ended {
		t := st.owners[k]
		if t == nil && f.sm <= 0 {
			continue
		}
		t = st.owner(k, now)
		t.SMSeconds = snapshot.Some(t.SMSeconds.Value + f.sm)
		if hasEnergy {
			t.EnergyJoules = snapshot.Some(t.EnergyJoules.Value + f.energy)
		}
	}
	if !hasEnergy {
		return
	}
	e := st.idle[tk.dev.UUID]
	if e == nil {
		e = &snapshot.DeviceEnergy{GPU: tk.dev.Index, GPUUUID: tk.dev.UUID}
		st.idle[tk.dev.UUID] = e
	}
	e.Joules += idle
}

// track takes device s.Devices[dev]'s process list of this snapshot, when the reader
// listed them: it replaces the last list, which becomes the list before.
// A device the reader did not list keeps its last list. A device never
// listed (tracked from a read that did not list it) has none yet.
func (st *state) track(s *snapshot.Snapshot, dev int) *deviceTrack {
	d := &s.Devices[dev]
	tr := st.devs[d.UUID]
	if tr == nil {
		tr = &deviceTrack{}
		st.devs[d.UUID] = tr
	}
	if d.ProcessesNotListed {
		return tr
	}
	tr.spare.fill(s, d, st.devProcs.of(dev), &tr.list)
	tr.list, tr.before, tr.spare = tr.spare, tr.list, tr.before
	tr.lists++
	return tr
}

// trackEnergy remembers the energy counter for the next tick.
func (st *state) trackEnergy(d *snapshot.Device, tr *deviceTrack) {
	if e, ok := d.Power.Energy.Get(); ok && d.Up {
		tr.energy, tr.hasEnergy = e, true
	}
}
