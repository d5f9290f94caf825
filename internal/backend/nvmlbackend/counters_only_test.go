//go:build cgo

package nvmlbackend

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The accounting's reader (CountersOnly) reads the energy counter, the
// identity and the MIG mode, and none of the power draw, the limits and
// the persistence, compute and ECC modes, which a reader for the scrapes
// reads with the same groups.
func TestCountersOnlyReadsWhatTheCountersUse(t *testing.T) {
	groups := map[string]bool{snapshot.GroupInfo: true, snapshot.GroupPower: true, snapshot.GroupMemory: true}
	for _, countersOnly := range []bool{true, false} {
		h := newFakeHost()
		dev := newFakeH100(h, 0)
		h.devices = append(h.devices, dev)
		r := newModeReader(t, h, Options{Groups: groups, Now: steppingClock()}, readMode{countersOnly: countersOnly})
		calls := func(d *mock.Device) map[string]int {
			return map[string]int{
				"GetPowerUsage": len(d.GetPowerUsageCalls()), "GetEnforcedPowerLimit": len(d.GetEnforcedPowerLimitCalls()),
				"GetPowerManagementDefaultLimit":     len(d.GetPowerManagementDefaultLimitCalls()),
				"GetPowerManagementLimitConstraints": len(d.GetPowerManagementLimitConstraintsCalls()),
				"GetPersistenceMode":                 len(d.GetPersistenceModeCalls()), "GetComputeMode": len(d.GetComputeModeCalls()),
				"GetEccMode": len(d.GetEccModeCalls()), "GetTotalEnergyConsumption": len(d.GetTotalEnergyConsumptionCalls()),
				"GetBAR1MemoryInfo": len(d.GetBAR1MemoryInfoCalls()),
			}
		}
		before := calls(dev)
		snap := read(t, r)
		noGroupErrors(t, snap)
		after := calls(dev)
		d := snap.Devices[0]
		if !d.Power.Energy.Valid || d.Info.MIGMode == "" || d.UUID == "" || d.Info.Name == "" || !d.Memory.Total.Valid {
			t.Fatalf("countersOnly=%v: energy %+v, MIG mode %q, UUID %q, name %q, memory total %+v: want each read", countersOnly, d.Power.Energy, d.Info.MIGMode, d.UUID, d.Info.Name, d.Memory.Total)
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

// With the memory group on (the job records'), the accounting's reader
// takes the GPU's used memory for its listing decision from that group's
// reading: one framebuffer call per read, not two.
func TestAccountingReaderReadsTheFramebufferOnce(t *testing.T) {
	for _, memoryGroup := range []bool{true, false} {
		h := newFakeHost()
		dev := newFakeH100(h, 0)
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
		h.devices = append(h.devices, dev)
		groups := map[string]bool{snapshot.GroupProcesses: true, snapshot.GroupMemory: memoryGroup}
		r := newModeReader(t, h, Options{Groups: groups, Now: steppingClock()}, readMode{processSamples: true, countersOnly: true, listEvery: 8, listSteady: 32})
		for i := range 3 {
			before := len(dev.GetMemoryInfo_v2Calls())
			noGroupErrors(t, read(t, r))
			if made := len(dev.GetMemoryInfo_v2Calls()) - before; made != 1 {
				t.Errorf("memory group %v, read %d: %d framebuffer calls, want 1", memoryGroup, i+1, made)
			}
		}
	}
}
