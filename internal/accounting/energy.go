package accounting

import (
	"strconv"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The energy model. NVML measures energy per GPU only (the energy counter,
// nvmlDeviceGetTotalEnergyConsumption); nothing measures it per process or
// per MIG instance. Each interval's increase of the counter is split, so
// that the owners' shares plus the idle part equal the increase exactly:
//
//   - A whole GPU is one unit. Its increase goes to the owners that held it
//     in the interval, in proportion to their SM time; when none used SM
//     time (or it was not measured), equally among them: a GPU held but
//     idle still draws its idle power for its holders. An interval in
//     which nobody held the GPU is idle energy.
//   - A MIG GPU is split into its compute instances by their size (compute
//     slices, from the profile: "1g.10gb" is 1, "1c.3g.40gb" 1, "3g.40gb"
//     3) over the instances that exist. An instance's part goes to the
//     owners listed in it, as for a whole GPU; the part of an instance
//     nobody held is idle energy.
//
// A counter that went down (a driver reload) gives no increase for that
// interval.

// splitEnergy splits device tk's energy increase since the previous tick
// into the owners' figures of the tick (listedOwner.energy,
// endedFigures.energy) and returns the idle part. hasEnergy is false when
// the GPU has no energy counter (or the interval had no valid increase).
func (st *state) splitEnergy(tk *deviceTick) (idle float64, hasEnergy bool) {
	tr := st.devs[tk.dev.UUID]
	e, ok := tk.dev.Power.Energy.Get()
	if !ok || tr == nil || !tr.hasEnergy {
		return 0, false
	}
	increase := e - tr.energy
	if increase < 0 {
		return 0, false
	}
	if !isMIG(tk.dev) || len(tk.dev.MIGInstances) == 0 {
		return splitUnit(increase, tk, ""), true
	}
	var total float64
	for i := range tk.dev.MIGInstances {
		total += computeSlices(tk.dev.MIGInstances[i].Profile)
	}
	for i := range tk.dev.MIGInstances {
		m := &tk.dev.MIGInstances[i]
		idle += splitUnit(increase*computeSlices(m.Profile)/total, tk, m.UUID)
	}
	return idle, true
}

// splitUnit splits one unit's energy (the whole GPU, or the MIG instance
// mig) among the owners in it by SM time, or equally; it returns what
// nobody held (idle).
func splitUnit(joules float64, tk *deviceTick, mig string) (idle float64) {
	in := func(k *snapshot.OwnerKey) bool { return mig == "" || k.MIGUUID == mig }
	var sm float64
	holders := 0
	for i := range tk.list.owners {
		if o := &tk.list.owners[i]; in(&o.key) {
			holders++
			sm += o.sm
		}
	}
	for k, f := range tk.ended {
		if in(&k) {
			sm += f.sm
		}
	}
	switch {
	case sm > 0:
		// Owners with SM time, including one whose processes ended since
		// the previous list and left samples.
		for i := range tk.list.owners {
			if o := &tk.list.owners[i]; in(&o.key) {
				o.energy += joules * o.sm / sm
			}
		}
		for k, f := range tk.ended {
			if in(&k) {
				f.energy += joules * f.sm / sm
			}
		}
	case holders > 0:
		for i := range tk.list.owners {
			if o := &tk.list.owners[i]; in(&o.key) {
				o.energy += joules / float64(holders)
			}
		}
	default:
		return joules
	}
	return 0
}

// computeSlices is a MIG profile's compute size: "1c.3g.40gb" → 1 (a
// compute instance smaller than its GPU instance), "3g.40gb" → 3. An
// unknown profile counts as 1.
func computeSlices(profile string) float64 {
	first, _, _ := strings.Cut(profile, ".")
	if n, err := strconv.Atoi(strings.TrimRight(first, "cg")); err == nil && n > 0 && (strings.HasSuffix(first, "c") || strings.HasSuffix(first, "g")) {
		return float64(n)
	}
	return 1
}
