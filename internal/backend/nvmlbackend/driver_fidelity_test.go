//go:build cgo

package nvmlbackend

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
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
	// GPU 3 falls off the bus; NVML's wait on its set then answers
	// GPU_IS_LOST. That touches GPU 3's own set only, so GPU 1's XID
	// still arrives.
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 3, LostAfter: durationPtr(10 * time.Second)},
		{GPU: 1, XID: 31, At: durationPtr(20 * time.Second)},
	}}, 0)
	regs := &registrations{}
	r := newReaderWith(t, wrappedSim{s, regs.wrap}, Options{Groups: groups(snapshot.GroupXID), Now: s.Now})
	read(t, r)
	regs.waitFor(t, 8)
	s.SetElapsed(11 * time.Second)
	s.SetElapsed(21 * time.Second)
	snap := pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[1].XIDEvents.Value == 1 })
	want(t, "gpu 1 last xid", snap.Devices[1].XIDLastCode, 31)
	if err := snap.Groups[snapshot.GroupXID].Err; err != nil {
		t.Errorf("xid group error after the rebuild: %v", err)
	}
}

// registrations counts the devices' successful RegisterEvents calls, so a
// test raises an XID only once the watcher listens for it.
type registrations struct{ n atomic.Int64 }

func (c *registrations) wrap(d nvml.Device) nvml.Device { return countedRegistrations{d, c} }

func (c *registrations) waitFor(t *testing.T, n int64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := c.n.Load(); got < n {
			return fmt.Errorf("%d successful event registrations, want %d", got, n)
		}
		return nil
	})
}

type countedRegistrations struct {
	nvml.Device
	c *registrations
}

func (d countedRegistrations) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	ret := d.Device.RegisterEvents(types, set)
	if ret == nvml.SUCCESS {
		d.c.n.Add(1)
	}
	return ret
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
	// The XID must come after the GPU is registered on the rebuilt set:
	// NVML drops events from before a registration. The watcher records
	// the wait's error before it creates the new set and clears it only
	// once that set is built, registrations included. So a read made after
	// the second set was created, and without the error, comes after the
	// registration (the count is taken first: a read from before the set's
	// creation may not have the error yet).
	testenv.Eventually(t, 10*time.Second, func() error {
		created := lib.sets()
		if created < 2 {
			return fmt.Errorf("the event set was not rebuilt (%d sets created)", created)
		}
		if err := read(t, r).Groups[snapshot.GroupXID].Err; err != nil {
			return fmt.Errorf("the xid group still has the error of before the rebuild: %v", err)
		}
		return nil
	})
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

func TestSimGPMNeverReportsAWindowShorterThanASecond(t *testing.T) {
	// GPU 0 of dgx-h100 runs a training job: GPM must never read 0 there.
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupGPM))
	// Right after start: the window opened by New is a few ms long.
	snap := read(t, r)
	wantAbsent(t, "gpm sm active right after start", snap.Devices[0].GPM.SMActive)

	s.SetElapsed(time.Hour + 2*time.Second)
	first := read(t, r).Devices[0].GPM
	inRange(t, "gpm sm active after 2s", first.SMActive, 0.05, 1)
	// A second scraper a moment later gets the same complete window,
	// not a near-empty one.
	second := read(t, r).Devices[0].GPM
	if second != first {
		t.Errorf("second read a moment later = %+v, want the last window %+v", second, first)
	}
}

func TestSimGPMOneShotWaitsForAWholeWindow(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	r := newReaderWith(t, s, Options{Groups: groups(snapshot.GroupGPM), Now: s.Now, WaitForGPM: true})
	g := read(t, r).Devices[0].GPM
	inRange(t, "one-shot gpm sm active", g.SMActive, 0.05, 1)
	inRange(t, "one-shot gpm graphics active", g.GraphicsActive, 0.05, 1)
}

func TestSimPCIeCountersWrapAndAgreeWithGPMRates(t *testing.T) {
	// A busy H100 on PCIe Gen5 moves several GB/s: the 32-bit counters
	// wrap about every second. Read every 250 ms (less than one wrap in
	// between) and compare a second's traffic with GPM's PCIe rate over
	// that same second.
	start := time.Hour
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, start)
	r := newSimReader(t, s, groups(snapshot.GroupPCIe, snapshot.GroupGPM))
	first := read(t, r).Devices[0]
	var last snapshot.Device
	for step := 1; step <= 4; step++ {
		s.SetElapsed(start + time.Duration(step)*250*time.Millisecond)
		last = read(t, r).Devices[0]
		if last.PCIe.RxBytes.Value < first.PCIe.RxBytes.Value {
			t.Fatalf("rx counter went down at step %d: %d -> %d", step, first.PCIe.RxBytes.Value, last.PCIe.RxBytes.Value)
		}
	}
	for _, c := range []struct {
		what        string
		from, to    uint64
		gpmPerSecnd snapshot.Opt[float64]
	}{
		{"rx", first.PCIe.RxBytes.Value, last.PCIe.RxBytes.Value, last.GPM.PCIeRxBytesPerSecond},
		{"tx", first.PCIe.TxBytes.Value, last.PCIe.TxBytes.Value, last.GPM.PCIeTxBytesPerSecond},
	} {
		if !c.gpmPerSecnd.Valid {
			t.Fatalf("gpm pcie %s rate absent", c.what)
		}
		moved := float64(c.to - c.from)
		if moved < 1<<30 || moved/c.gpmPerSecnd.Value < 0.999 || moved/c.gpmPerSecnd.Value > 1.001 {
			t.Errorf("pcie %s: counter moved %.0f bytes in 1s, gpm rate %.0f B/s", c.what, moved, c.gpmPerSecnd.Value)
		}
	}
	inRange(t, "gpm nvlink tx rate", last.GPM.NVLinkTxBytesPerSecond, 1e9, 18*25e9)
	inRange(t, "gpm nvlink rx rate", last.GPM.NVLinkRxBytesPerSecond, 1e9, 18*25e9)
}

func TestSimMIGParentProcessListNeedsPrivilegesPerInstanceListsDoNot(t *testing.T) {
	// GPU 7 of dgx-h100 is in MIG mode with a service in GPU instance 1.
	// The simulated caller is unprivileged: the GPU's own lists answer
	// NO_PERMISSION, which must not be an error on every scrape.
	s := newSim(t, sim.Config{Profile: "dgx-h100"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses))
	for range 2 {
		snap := read(t, r)
		noGroupErrors(t, snap)
		var inMIG int
		for _, p := range snap.Processes {
			if p.GPU == 7 {
				inMIG++
				if p.MIGUUID == "" || p.GPUInstanceID != snapshot.Some(1) {
					t.Errorf("gpu 7 process without its MIG identity: %+v", p)
				}
			}
		}
		if inMIG == 0 {
			t.Error("no process found on the MIG-enabled GPU 7")
		}
	}
}

func TestSimMIGMemoryIsReportedOncePerGPUInstance(t *testing.T) {
	// dgx-a100-mig's GPU 2 has one 7g.80gb GPU instance split into a 4c and
	// a 3c compute instance: both MIG devices answer the GPU instance's
	// memory.
	s := newSim(t, sim.Config{Profile: "dgx-a100-mig"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupMIG, snapshot.GroupMemory))
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[2]
	if len(d.MIGInstances) != 2 {
		t.Fatalf("gpu 2 MIG instances = %+v", d.MIGInstances)
	}
	var total uint64
	reporting := 0
	for _, m := range d.MIGInstances {
		if m.MemoryTotal.Valid {
			total += m.MemoryTotal.Value
			reporting++
		}
	}
	if reporting != 1 || total > d.Memory.Total.Value || total < d.Memory.Total.Value/2 {
		t.Errorf("%d compute instances report memory, %d bytes in all; the GPU has %d", reporting, total, d.Memory.Total.Value)
	}
}

func TestSimClockEventReasonsTheDeviceCannotReportAreAbsent(t *testing.T) {
	// A data-centre H100 drives no display: it cannot report the display
	// clock setting reason, so it must not be shown as "not active".
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupClockEvents))
	snap := read(t, r)
	noGroupErrors(t, snap)
	reasons := map[string]bool{}
	for _, e := range snap.Devices[0].ClockEvents {
		reasons[e.Reason] = true
	}
	if reasons["display_clock_setting"] || !reasons["sw_power_cap"] || !reasons["gpu_idle"] {
		t.Errorf("h100 clock event reasons = %v, want sw_power_cap and gpu_idle but not display_clock_setting", reasons)
	}
	// A GeForce card can report all of them.
	s = newSim(t, sim.Config{Profile: "rtx4090"}, time.Hour)
	r = newSimReader(t, s, groups(snapshot.GroupClockEvents))
	if n := len(read(t, r).Devices[0].ClockEvents); n != len(clockEventReasons) {
		t.Errorf("rtx4090 reports %d reasons, want all %d", n, len(clockEventReasons))
	}
}

func TestSimProcessUtilizationOfTwoReadsAMomentApart(t *testing.T) {
	// The driver samples every 1/6 s. A second scrape (another Prometheus
	// server, or textfile beside serve) a moment after the first finds no
	// sample newer than the first one's: it must still report the process.
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses))
	for i, at := range []time.Duration{time.Hour, time.Hour + 50*time.Millisecond, time.Hour + 3*time.Second} {
		s.SetElapsed(at)
		snap := read(t, r)
		noGroupErrors(t, snap)
		if len(snap.Processes) != 1 {
			t.Fatalf("read %d: processes %+v", i, snap.Processes)
		}
		want(t, "process sm utilization", snap.Processes[0].SMUtilization, 0.72)
	}
}

// samplesGrew answers the first GetProcessUtilization with
// INSUFFICIENT_SIZE, as NVML does when samples arrive between the size
// query and the read that go-nvml makes.
type samplesGrew struct {
	nvml.Device
	mu    *sync.Mutex
	calls *int
}

func (d samplesGrew) GetProcessUtilization(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	d.mu.Lock()
	*d.calls++
	first := *d.calls == 1
	d.mu.Unlock()
	if first {
		return nil, nvml.ERROR_INSUFFICIENT_SIZE
	}
	return d.Device.GetProcessUtilization(lastSeen)
}

func TestSimProcessUtilizationInsufficientSizeIsRetried(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	var mu sync.Mutex
	calls := 0
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device { return samplesGrew{d, &mu, &calls} }}
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now})
	snap := read(t, r)
	noGroupErrors(t, snap)
	if len(snap.Processes) != 1 {
		t.Fatalf("processes %+v", snap.Processes)
	}
	want(t, "process sm utilization", snap.Processes[0].SMUtilization, 0.72)
}

// preR535 is a library from before R535: it lacks
// nvmlDeviceGetSupportedClocksEventReasons (it has the ...ThrottleReasons
// name), and calling a function the library lacks would end the process.
type preR535 struct{ wrappedSim }

func (preR535) Extensions() nvml.ExtendedInterface {
	return lacks{"nvmlDeviceGetSupportedClocksEventReasons"}
}

type lacks []string

func (l lacks) LookupSymbol(name string) error {
	if slices.Contains(l, name) {
		return fmt.Errorf("undefined symbol: %s", name)
	}
	return nil
}

type noSupportedEventReasons struct{ nvml.Device }

func (noSupportedEventReasons) GetSupportedClocksEventReasons() (uint64, nvml.Return) {
	panic("symbol lookup error: undefined symbol: nvmlDeviceGetSupportedClocksEventReasons")
}

func TestSimSupportedClockEventsOnADriverBeforeR535(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100"}, time.Hour)
	lib := preR535{wrappedSim{s, func(d nvml.Device) nvml.Device { return noSupportedEventReasons{d} }}}
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupClockEvents), Now: s.Now})
	snap := read(t, r)
	noGroupErrors(t, snap)
	for _, e := range snap.Devices[0].ClockEvents {
		if e.Reason == "display_clock_setting" {
			t.Error("display_clock_setting reported: the throttle-reasons name was not used")
		}
	}
	if len(snap.Devices[0].ClockEvents) == 0 {
		t.Error("no clock events")
	}
}
