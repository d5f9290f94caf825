//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestPowerLimitsBesideTheEnforcedOne(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupPower))
	snap := read(t, r)
	noGroupErrors(t, snap)
	p := snap.Devices[0].Power
	want(t, "enforced", p.EnforcedLimit, 700)
	want(t, "default", p.DefaultLimit, 700)
	want(t, "max", p.MaxLimit, 700)
	if !p.MinLimit.Valid || p.MinLimit.Value <= 0 || p.MinLimit.Value >= 700 {
		t.Errorf("min limit = %+v", p.MinLimit)
	}

	s = newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, Unsupported: []string{"power_limit"}}}}, time.Hour)
	r = newSimReader(t, s, groups(snapshot.GroupPower))
	p = read(t, r).Devices[0].Power
	wantAbsent(t, "default", p.DefaultLimit)
	wantAbsent(t, "min", p.MinLimit)
	wantAbsent(t, "max", p.MaxLimit)
}

func TestMIGModePending(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 2, MIGModePending: true}}}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupMIG))
	snap := read(t, r)
	noGroupErrors(t, snap)
	want(t, "gpu 0 pending", snap.Devices[0].MIGModePending, false)
	want(t, "gpu 2 pending", snap.Devices[2].MIGModePending, true)
	want(t, "gpu 7 (in MIG mode) pending", snap.Devices[7].MIGModePending, false)

	s = newSim(t, sim.Config{Profile: "rtx4090"}, time.Hour)
	r = newSimReader(t, s, groups(snapshot.GroupMIG))
	wantAbsent(t, "no MIG", read(t, r).Devices[0].MIGModePending)

	if _, err := sim.New(sim.Config{Profile: "rtx4090", Faults: []sim.Fault{{GPU: 0, MIGModePending: true}}}); err == nil {
		t.Errorf("mig_mode_pending on a GPU without MIG was accepted")
	}
}
