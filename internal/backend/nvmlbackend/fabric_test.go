//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// healthyFabricMask is nvml.h's health mask of a healthy fabric, built
// from its fields: nothing degraded, recovering or unhealthy, the
// configuration correct.
const healthyFabricMask = nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
	nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION

func degradedBW(mask uint64) uint64 {
	return mask >> nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW & nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW
}

func TestFabricHealthOnNVSwitchHopperOnly(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 3, FabricDegraded: true}}}, time.Hour)
	snap := read(t, newReaderWith(t, s.Library(), Options{Groups: groups(snapshot.GroupNVLink), Now: s.Now}))
	noGroupErrors(t, snap)
	for _, d := range snap.Devices {
		f := d.Fabric
		if d.Index == 3 {
			if !f.HealthMask.Valid || degradedBW(f.HealthMask.Value) != nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE {
				t.Errorf("gpu 3 (fabric_degraded): mask %+v, want degraded bandwidth", f.HealthMask)
			}
			want(t, "gpu 3 summary", f.HealthSummary, nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
			continue
		}
		want(t, "healthy mask", f.HealthMask, healthyFabricMask)
		want(t, "healthy summary", f.HealthSummary, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
	}

	// No NVSwitch fabric: an A100 (pre-Hopper), a lone H100 (no active
	// links), a GeForce card. Absent, never 0.
	for _, profile := range []string{"dgx-a100-mig", "h100", "rtx4090"} {
		s := newSim(t, sim.Config{Profile: profile}, time.Hour)
		snap := read(t, newReaderWith(t, s.Library(), Options{Groups: groups(snapshot.GroupNVLink), Now: s.Now}))
		noGroupErrors(t, snap)
		for _, d := range snap.Devices {
			wantAbsent(t, profile+" mask", d.Fabric.HealthMask)
			wantAbsent(t, profile+" summary", d.Fabric.HealthSummary)
		}
	}
	if _, err := sim.New(sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, FabricDegraded: true}}}); err == nil {
		t.Errorf("fabric_degraded on a GPU without NVSwitch fabric was accepted")
	}
}

// A driver branch without nvmlDeviceGetGpuFabricInfoV (before R550) is
// never asked; the fabric is absent there, present on the branches that
// have it.
func TestFabricHealthByDriverBranch(t *testing.T) {
	for branch, has := range map[string]bool{"R535": false, "R550": true} {
		s := newSim(t, sim.Config{Profile: "dgx-h100", Driver: branch}, time.Hour)
		snap := read(t, newReaderWith(t, s.Library(), Options{Groups: groups(snapshot.GroupNVLink), Now: s.Now}))
		if missing := s.MissingFunctionCalls(); len(missing) > 0 {
			t.Fatalf("%s: called what the branch lacks: %v", branch, missing)
		}
		if got := snap.Devices[0].Fabric.HealthMask.Valid; got != has {
			t.Errorf("%s: fabric mask present = %v, want %v", branch, got, has)
		}
	}
}

// The accounting's reader reads counters only: no fabric.
func TestFabricHealthNotReadForCounters(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Hour)
	r := newModeReader(t, s.Library(), Options{Groups: groups(snapshot.GroupNVLink), Now: s.Now}, readMode{countersOnly: true})
	wantAbsent(t, "counters-only mask", read(t, r).Devices[0].Fabric.HealthMask)
}
