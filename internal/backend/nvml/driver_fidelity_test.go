package nvmlbackend

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Differences between a real driver and a naive reading of it, each shown
// through the simulator, which behaves as nvml.h says the driver does.

func groups(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestSimProcessWithComputeAndGraphicsContextsIsCountedOnce(t *testing.T) {
	const mem = 3 << 30
	s := newSim(t, sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 4242, UsedMemoryBytes: mem, SMUtilization: 0.4, MemoryUtilization: 0.2, Type: "compute+graphics"},
		{GPU: 0, PID: 77, UsedMemoryBytes: 1 << 30, SMUtilization: 0.1, Type: "compute"},
	}}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses, snapshot.GroupMemory))
	snap := read(t, r)
	noGroupErrors(t, snap)
	if len(snap.Processes) != 2 {
		t.Fatalf("got %d processes, want 2 (pid 4242 once, pid 77): %+v", len(snap.Processes), snap.Processes)
	}
	var memSum uint64
	for _, p := range snap.Processes {
		memSum += p.UsedMemory.Value
		if p.PID == 4242 {
			if p.Type != "compute+graphics" {
				t.Errorf("pid 4242 type = %q, want compute+graphics", p.Type)
			}
			want(t, "pid 4242 memory", p.UsedMemory, mem)
			want(t, "pid 4242 sm", p.SMUtilization, 0.4)
		}
	}
	// The processes' memory adds up to what the device says is used.
	want(t, "device memory used", snap.Devices[0].Memory.Used, memSum)
}

// wrappedSim hands out the simulator's device handles wrapped by wrap, to
// change how one call answers (as another driver would) while the rest of
// the simulated device stays the same.
type wrappedSim struct {
	*sim.Sim
	wrap func(nvml.Device) nvml.Device
}

func (w wrappedSim) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := w.Sim.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return w.wrap(d), ret
}

// olderFieldTable answers INVALID_ARGUMENT for field IDs its driver does
// not know, as drivers before R570 do for the PCIe byte counters.
type olderFieldTable struct {
	nvml.Device
	unknown map[uint32]bool
}

func (o olderFieldTable) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	ret := o.Device.GetFieldValues(values)
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_INVALID_ARGUMENT {
		return ret
	}
	// As the simulator does: SUCCESS only when a field was populated,
	// else the first field's code.
	ret = nvml.SUCCESS
	populated := false
	for i := range values {
		if o.unknown[values[i].FieldId] {
			values[i].NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
		}
		if values[i].NvmlReturn == uint32(nvml.SUCCESS) {
			populated = true
		} else if ret == nvml.SUCCESS {
			ret = nvml.Return(values[i].NvmlReturn)
		}
	}
	if populated {
		return nvml.SUCCESS
	}
	return ret
}

func TestSimFieldValuesNoneSupportedIsAbsentNotAnError(t *testing.T) {
	// A GeForce card has no HBM temperature sensor; without the PCIe
	// counters too, not one field of the batch exists and NVML fails the
	// whole call.
	s := newSim(t, sim.Config{Profile: "rtx4090", Faults: []sim.Fault{{GPU: 0, Unsupported: []string{"pcie"}}}}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupTemperature, snapshot.GroupPCIe))
	for range 2 {
		snap := read(t, r)
		noGroupErrors(t, snap)
		d := snap.Devices[0]
		wantAbsent(t, "memory temperature", d.Temperature.Memory)
		wantAbsent(t, "pcie tx", d.PCIe.TxBytes)
		if !d.Temperature.GPU.Valid {
			t.Error("GPU temperature absent; the other readings must stay")
		}
	}
}

func TestSimFieldValuesNoneKnownToTheDriverIsAbsentNotAnError(t *testing.T) {
	// A PCIe card on a driver that does not know the PCIe byte counters:
	// every field asked for is INVALID_ARGUMENT, and so is the call.
	s := newSim(t, sim.Config{Profile: "rtx4090"}, time.Hour)
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device {
		return olderFieldTable{d, map[uint32]bool{nvml.FI_DEV_PCIE_COUNT_TX_BYTES: true, nvml.FI_DEV_PCIE_COUNT_RX_BYTES: true}}
	}}
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupPCIe), Now: s.Now})
	snap := read(t, r)
	noGroupErrors(t, snap)
	wantAbsent(t, "pcie tx", snap.Devices[0].PCIe.TxBytes)
	if !snap.Devices[0].PCIe.LinkGen.Valid {
		t.Error("link generation absent; the other readings must stay")
	}
}

func TestSimFieldUnknownToTheDriverIsAbsent(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device {
		return olderFieldTable{d, map[uint32]bool{nvml.FI_DEV_PCIE_COUNT_TX_BYTES: true, nvml.FI_DEV_PCIE_COUNT_RX_BYTES: true}}
	}}
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupTemperature, snapshot.GroupPCIe), Now: s.Now})
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	wantAbsent(t, "pcie tx", d.PCIe.TxBytes)
	wantAbsent(t, "pcie rx", d.PCIe.RxBytes)
	if !d.Temperature.Memory.Valid || !d.PCIe.LinkGen.Valid {
		t.Errorf("memory temperature %+v, link gen %+v: want both present", d.Temperature.Memory, d.PCIe.LinkGen)
	}
}
