package nvmlbackend

import (
	"sync"
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

func TestSimXIDTotalAndLastCodeExistFromStart(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 2, XID: 48, At: durationPtr(10 * time.Second)},
		{GPU: 2, XID: 79, At: durationPtr(12 * time.Second)},
	}}, 0)
	r := newSimReader(t, s, groups(snapshot.GroupXID))
	snap := read(t, r)
	for _, d := range snap.Devices {
		want(t, "xid events at start", d.XIDEvents, 0)
		want(t, "last xid at start", d.XIDLastCode, 0)
	}
	s.SetElapsed(13 * time.Second)
	snap = pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[2].XIDEvents.Value == 2 })
	want(t, "gpu 2 last xid", snap.Devices[2].XIDLastCode, 79)
	want(t, "gpu 1 xid events", snap.Devices[1].XIDEvents, 0)
}

func TestSimXIDsBeforeStartAreNotCounted(t *testing.T) {
	// NVML records only events after the registration.
	s := newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, XID: 79, At: durationPtr(time.Second)}}}, time.Minute)
	r := newSimReader(t, s, groups(snapshot.GroupXID))
	time.Sleep(50 * time.Millisecond)
	snap := read(t, r)
	want(t, "xid events", snap.Devices[0].XIDEvents, 0)
}

func TestSimXIDWatcherSurvivesALostGPU(t *testing.T) {
	// GPU 3 falls off the bus; NVML's wait then answers GPU_IS_LOST. The
	// set must be rebuilt without it so that GPU 1's XID still arrives.
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 3, LostAfter: durationPtr(10 * time.Second)},
		{GPU: 1, XID: 31, At: durationPtr(20 * time.Second)},
	}}, 0)
	r := newSimReader(t, s, groups(snapshot.GroupXID))
	read(t, r)
	s.SetElapsed(11 * time.Second)
	time.Sleep(50 * time.Millisecond) // let the watcher see the loss first
	s.SetElapsed(21 * time.Second)
	snap := pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[1].XIDEvents.Value == 1 })
	want(t, "gpu 1 last xid", snap.Devices[1].XIDLastCode, 31)
	if err := snap.Groups[snapshot.GroupXID].Err; err != nil {
		t.Errorf("xid group error after the rebuild: %v", err)
	}
}

// flakySet answers Wait with the codes in fail first, then as the
// simulator's set does. After ERROR_UNKNOWN it stays broken, as nvml.h
// says the set is then undefined.
type flakySet struct {
	nvml.EventSet
	mu     sync.Mutex
	fail   []nvml.Return
	broken bool
}

func (f *flakySet) Wait(ms uint32) (nvml.EventData, nvml.Return) {
	f.mu.Lock()
	if f.broken {
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
		return nvml.EventData{}, nvml.ERROR_UNKNOWN
	}
	if len(f.fail) > 0 {
		ret := f.fail[0]
		f.fail = f.fail[1:]
		f.broken = ret == nvml.ERROR_UNKNOWN
		f.mu.Unlock()
		return nvml.EventData{}, ret
	}
	f.mu.Unlock()
	return f.EventSet.Wait(ms)
}

// flakySets makes the first event set created flaky; later ones are the
// simulator's own.
type flakySets struct {
	wrappedSim
	mu    sync.Mutex
	first []nvml.Return
	made  int
}

func (f *flakySets) EventSetCreate() (nvml.EventSet, nvml.Return) {
	set, ret := f.Sim.EventSetCreate()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made++
	if ret != nvml.SUCCESS || f.made > 1 {
		return set, ret
	}
	return &flakySet{EventSet: set, fail: f.first}, ret
}

func (f *flakySets) sets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made
}

// registersUnwrapped registers the simulator's own set inside a flakySet.
type registersUnwrapped struct{ nvml.Device }

func (d registersUnwrapped) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	if f, ok := set.(*flakySet); ok {
		set = f.EventSet
	}
	return d.Device.RegisterEvents(types, set)
}

func newFlakySets(s *sim.Sim, fail ...nvml.Return) *flakySets {
	return &flakySets{
		wrappedSim: wrappedSim{s, func(d nvml.Device) nvml.Device { return registersUnwrapped{d} }},
		first:      fail,
	}
}

func TestSimXIDWatcherRebuildsTheSetAfterUnknownError(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, XID: 79, At: durationPtr(10 * time.Second)}}}, 0)
	lib := newFlakySets(s, nvml.ERROR_UNKNOWN)
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupXID), Now: s.Now})
	deadline := time.Now().Add(5 * time.Second)
	for lib.sets() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.SetElapsed(11 * time.Second)
	snap := pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[0].XIDEvents.Value == 1 })
	if err := snap.Groups[snapshot.GroupXID].Err; err != nil {
		t.Errorf("xid group error after the rebuild: %v", err)
	}
}

func TestSimXIDWaitErrorIsClearedOnTimeout(t *testing.T) {
	// One transient failure; afterwards the waits time out normally, with
	// no XID to clear the error.
	s := newSim(t, sim.Config{Profile: "h100"}, 0)
	lib := newFlakySets(s, nvml.ERROR_IRQ_ISSUE)
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupXID), Now: s.Now})
	pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Groups[snapshot.GroupXID].Err == nil })
}

func TestSimXIDStopIsBoundedWhenTheDriverHangs(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{
		{GPU: 0, HangAfter: durationPtr(time.Second), HangFor: durationPtr(time.Hour)},
	}}, 0)
	r, err := New(s, Options{Groups: groups(snapshot.GroupXID), Now: s.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.SetElapsed(2 * time.Hour) }) // release the hung wait
	s.SetElapsed(2 * time.Second)
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the event wait hangs")
	}
}
