package nvmlbackend

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The accounting's reader (CountersOnly) reads the energy counter, the
// identity and the MIG mode, and none of the power draw, the limits and
// the persistence, compute and ECC modes, which a reader for the scrapes
// reads with the same groups.
func TestCountersOnlyReadsWhatTheCountersUse(t *testing.T) {
	groups := map[string]bool{snapshot.GroupInfo: true, snapshot.GroupPower: true}
	for _, countersOnly := range []bool{true, false} {
		h := newFakeHost()
		dev := newFakeH100(h, 0)
		h.devices = append(h.devices, dev)
		r := newReaderWith(t, h, Options{Groups: groups, Now: steppingClock(), CountersOnly: countersOnly})
		calls := func(d *mock.Device) map[string]int {
			return map[string]int{
				"GetPowerUsage": len(d.GetPowerUsageCalls()), "GetEnforcedPowerLimit": len(d.GetEnforcedPowerLimitCalls()),
				"GetPowerManagementDefaultLimit":     len(d.GetPowerManagementDefaultLimitCalls()),
				"GetPowerManagementLimitConstraints": len(d.GetPowerManagementLimitConstraintsCalls()),
				"GetPersistenceMode":                 len(d.GetPersistenceModeCalls()), "GetComputeMode": len(d.GetComputeModeCalls()),
				"GetEccMode": len(d.GetEccModeCalls()), "GetTotalEnergyConsumption": len(d.GetTotalEnergyConsumptionCalls()),
			}
		}
		before := calls(dev)
		snap := read(t, r)
		noGroupErrors(t, snap)
		after := calls(dev)
		d := snap.Devices[0]
		if !d.Power.Energy.Valid || d.Info.MIGMode == "" || d.UUID == "" || d.Info.Name == "" {
			t.Fatalf("countersOnly=%v: energy %+v, MIG mode %q, UUID %q, name %q: want each read", countersOnly, d.Power.Energy, d.Info.MIGMode, d.UUID, d.Info.Name)
		}
		if after["GetTotalEnergyConsumption"] != before["GetTotalEnergyConsumption"]+1 {
			t.Errorf("countersOnly=%v: the energy counter read %d times, want once", countersOnly, after["GetTotalEnergyConsumption"]-before["GetTotalEnergyConsumption"])
		}
		for call, n := range after {
			if call == "GetTotalEnergyConsumption" {
				continue
			}
			if made := n - before[call]; (made > 0) == countersOnly {
				t.Errorf("countersOnly=%v: %s called %d times in a read", countersOnly, call, made)
			}
		}
		if countersOnly && (d.Power.Usage.Valid || d.Power.EnforcedLimit.Valid || d.Info.PersistenceMode != "") {
			t.Errorf("counters only: power %+v, persistence %q: read anyway", d.Power, d.Info.PersistenceMode)
		}
	}
}
