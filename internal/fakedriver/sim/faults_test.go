//go:build cgo

package sim

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func exampleSim(t *testing.T) *Sim {
	t.Helper()
	cfg, err := LoadConfig("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PinTime = pinAt(0)
	return newSim(t, cfg)
}

func TestLostGPU(t *testing.T) {
	s := exampleSim(t)
	d := handle(t, s, 3)
	if _, r := d.GetPowerUsage(); r != nvml.SUCCESS {
		t.Fatalf("before lost_after: %v", r)
	}
	s.SetElapsed(30 * time.Second)
	// The handle is still handed out, like real NVML ...
	d = handle(t, s, 3)
	// ... but every call on it, modelled or not, says the GPU is lost.
	if _, r := d.GetPowerUsage(); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GetPowerUsage: %v", r)
	}
	if _, r := d.GetUUID(); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GetUUID: %v", r)
	}
	if _, r := d.GetBoardPartNumber(); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("unmodelled GetBoardPartNumber: %v", r)
	}
	vals := []nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}}
	if r := d.GetFieldValues(vals); r != nvml.ERROR_GPU_IS_LOST || nvml.Return(vals[0].NvmlReturn) != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("GetFieldValues: %v / %v", r, nvml.Return(vals[0].NvmlReturn))
	}
	if _, r := s.DeviceGetHandleByUUID(s.devices[3].uuid); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("DeviceGetHandleByUUID: %v", r)
	}
	// The other GPUs keep answering.
	if _, r := handle(t, s, 2).GetPowerUsage(); r != nvml.SUCCESS {
		t.Errorf("gpu 2: %v", r)
	}
	if n, _ := s.DeviceGetCount(); n != 8 {
		t.Errorf("count %d", n)
	}
}

func TestUnsupportedFault(t *testing.T) {
	s := exampleSim(t)
	d := handle(t, s, 1)
	if _, r := d.GetPowerUsage(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetPowerUsage on gpu 1: %v", r)
	}
	if v, r := fieldULL(t, d, nvml.FI_DEV_POWER_INSTANT, 0); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("FI_DEV_POWER_INSTANT on gpu 1: %d %v", v, r)
	}
	// Other reads of the same GPU, and power on other GPUs, still work.
	if _, r := d.GetEnforcedPowerLimit(); r != nvml.SUCCESS {
		t.Errorf("power_limit is a separate name: %v", r)
	}
	if _, r := handle(t, s, 0).GetPowerUsage(); r != nvml.SUCCESS {
		t.Errorf("gpu 0 power: %v", r)
	}
}

// Each unsupported name turns at least one call NOT_SUPPORTED that
// succeeds without the fault.
func TestEveryUnsupportedNameHasAnEffect(t *testing.T) {
	probes := map[string]func(d *device) nvml.Return{
		"utilization":        func(d *device) nvml.Return { _, r := d.GetUtilizationRates(); return r },
		"encoder":            func(d *device) nvml.Return { _, _, r := d.GetEncoderUtilization(); return r },
		"decoder":            func(d *device) nvml.Return { _, _, r := d.GetDecoderUtilization(); return r },
		"memory":             func(d *device) nvml.Return { _, r := d.GetMemoryInfo_v2(); return r },
		"bar1":               func(d *device) nvml.Return { _, r := d.GetBAR1MemoryInfo(); return r },
		"temperature":        func(d *device) nvml.Return { _, r := d.GetTemperature(nvml.TEMPERATURE_GPU); return r },
		"memory_temperature": func(d *device) nvml.Return { _, r := fieldULL(t, d, nvml.FI_DEV_MEMORY_TEMP, 0); return r },
		"temperature_thresholds": func(d *device) nvml.Return {
			_, r := d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
			return r
		},
		"fan_speed":     func(d *device) nvml.Return { _, r := d.GetFanSpeed(); return r },
		"pstate":        func(d *device) nvml.Return { _, r := d.GetPerformanceState(); return r },
		"power":         func(d *device) nvml.Return { _, r := d.GetPowerUsage(); return r },
		"power_limit":   func(d *device) nvml.Return { _, r := d.GetEnforcedPowerLimit(); return r },
		"energy":        func(d *device) nvml.Return { _, r := d.GetTotalEnergyConsumption(); return r },
		"clocks":        func(d *device) nvml.Return { _, r := d.GetClockInfo(nvml.CLOCK_SM); return r },
		"clock_events":  func(d *device) nvml.Return { _, r := d.GetCurrentClocksEventReasons(); return r },
		"pcie":          func(d *device) nvml.Return { _, r := fieldULL(t, d, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0); return r },
		"pcie_replay":   func(d *device) nvml.Return { _, r := d.GetPcieReplayCounter(); return r },
		"ecc":           func(d *device) nvml.Return { _, r := d.GetTotalEccErrors(0, 0); return r },
		"retired_pages": func(d *device) nvml.Return { _, r := d.GetRetiredPagesPendingStatus(); return r },
		"remapped_rows": func(d *device) nvml.Return { _, _, _, _, r := d.GetRemappedRows(); return r },
		"nvlink":        func(d *device) nvml.Return { _, r := d.GetNvLinkState(0); return r },
		"gpm": func(d *device) nvml.Return {
			sample, _ := d.sim.GpmSampleAlloc()
			return sample.Get(d)
		},
		"processes":           func(d *device) nvml.Return { _, r := d.GetComputeRunningProcesses(); return r },
		"process_utilization": func(d *device) nvml.Return { _, r := d.GetProcessUtilization(0); return r },
		"serial":              func(d *device) nvml.Return { _, r := d.GetSerial(); return r },
		"vbios":               func(d *device) nvml.Return { _, r := d.GetVbiosVersion(); return r },
		"mig":                 func(d *device) nvml.Return { _, _, r := d.GetMigMode(); return r },
		"events":              func(d *device) nvml.Return { _, r := d.GetSupportedEventTypes(); return r },
	}
	for _, name := range UnsupportedNames() {
		t.Run(name, func(t *testing.T) {
			probe, ok := probes[name]
			if !ok {
				t.Fatalf("no probe for %q: add one", name)
			}
			profile := "h100"
			switch name {
			case "fan_speed":
				profile = "rtx4090" // SXM modules have no fans
			case "retired_pages":
				profile = "v100" // Ampere and later remap rows instead
			}
			clean := newSim(t, Config{Profile: profile, PinTime: pinAt(time.Minute)})
			if r := probe(clean.devices[0]); r != nvml.SUCCESS {
				t.Fatalf("without the fault: %v", r)
			}
			faulty := newSim(t, Config{Profile: profile, PinTime: pinAt(time.Minute), Faults: []Fault{{GPU: 0, Unsupported: []string{name}}}})
			if r := probe(faulty.devices[0]); r != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("with unsupported [%s]: %v", name, r)
			}
		})
	}
}

func registerXID(t *testing.T, s *Sim, gpus ...int) nvml.EventSet {
	t.Helper()
	set, r := s.EventSetCreate()
	if r != nvml.SUCCESS {
		t.Fatal(r)
	}
	for _, i := range gpus {
		if r := handle(t, s, i).RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
			t.Fatalf("RegisterEvents gpu %d: %v", i, r)
		}
	}
	return set
}

func TestXIDDeliveredOnce(t *testing.T) {
	s := exampleSim(t)
	set := registerXID(t, s, 0, 1, 2)
	// A second event set gets its own copy.
	other := registerXID(t, s, 2)
	if _, r := set.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Fatalf("before at: %v", r)
	}
	s.SetElapsed(10 * time.Second)
	ev, r := set.Wait(0)
	if r != nvml.SUCCESS {
		t.Fatalf("after at: %v", r)
	}
	if ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != 79 || ev.Device != handle(t, s, 2) {
		t.Errorf("event %+v", ev)
	}
	if ev.GpuInstanceId != 0xFFFFFFFF || ev.ComputeInstanceId != 0xFFFFFFFF {
		t.Errorf("non-MIG event instance ids %x %x", ev.GpuInstanceId, ev.ComputeInstanceId)
	}
	s.SetElapsed(time.Hour)
	if _, r := set.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Errorf("second Wait: %v, the XID must come once", r)
	}
	if ev, r := other.Wait(0); r != nvml.SUCCESS || ev.EventData != 79 {
		t.Errorf("second set: %+v %v", ev, r)
	}
	// A set without GPU 2 registered never sees it.
	none := registerXID(t, newSimFromExample(t), 0, 1)
	if _, r := none.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Errorf("unregistered device: %v", r)
	}
	// Nor does a set that registered GPU 2 after the XID: NVML records
	// only events after the registration.
	late := registerXID(t, s, 2)
	if ev, r := late.Wait(0); r != nvml.ERROR_TIMEOUT {
		t.Errorf("set registered after the XID: %+v %v", ev, r)
	}
	if r := set.Free(); r != nvml.SUCCESS {
		t.Errorf("Free: %v", r)
	}
}

// A set with a lost GPU registered fails every Wait with GPU_IS_LOST, even
// with another GPU's XID due; a set rebuilt without it delivers again.
func TestWaitAnswersGPUIsLostUntilRebuilt(t *testing.T) {
	s := exampleSim(t)
	set := registerXID(t, s, 2, 3)
	s.SetElapsed(time.Minute) // GPU 3 lost at 30s, GPU 2's XID due at 10s
	if _, r := set.Wait(0); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("Wait with a lost GPU registered: %v", r)
	}
	s.SetElapsed(5 * time.Second)
	rebuilt := registerXID(t, s, 2)
	s.SetElapsed(time.Minute)
	if ev, r := rebuilt.Wait(0); r != nvml.SUCCESS || ev.EventData != 79 {
		t.Errorf("rebuilt set: %+v %v", ev, r)
	}
}

// Free does not wake a waiter: it returns at its timeout.
func TestFreeDoesNotWakeWait(t *testing.T) {
	s := exampleSim(t)
	set := registerXID(t, s, 2)
	done := make(chan nvml.Return)
	start := time.Now()
	var returned atomic.Bool
	go func() {
		_, r := set.Wait(200)
		returned.Store(true)
		done <- r
	}()
	// Free must come while Wait is in progress: a set freed before the
	// Wait begins answers at once, and rightly so. (On a machine too
	// loaded to see the Wait within its 200ms, Free comes after it.)
	testenv.Eventually(t, 10*time.Second, func() error {
		if testenv.GoroutinesWaitingIn("sim.(*eventSet).Wait") == 0 && !returned.Load() {
			return errors.New("Wait has not begun")
		}
		return nil
	})
	set.Free()
	r := <-done
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("Wait returned after %v, before its timeout", took)
	}
	if r != nvml.ERROR_INVALID_ARGUMENT && r != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait on a freed set: %v", r)
	}
}

func newSimFromExample(t *testing.T) *Sim {
	s := exampleSim(t)
	s.SetElapsed(time.Hour)
	return s
}

func TestWaitTimesOutInRealTime(t *testing.T) {
	s := exampleSim(t)
	set := registerXID(t, s, 2)
	start := time.Now()
	_, r := set.Wait(60)
	if r != nvml.ERROR_TIMEOUT {
		t.Fatalf("Wait: %v", r)
	}
	if took := time.Since(start); took < 60*time.Millisecond {
		t.Errorf("Wait(60) returned after %v", took)
	}
}

// With a running clock, Wait sleeps until the XID falls due.
func TestWaitWakesWhenXIDFallsDue(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", Faults: []Fault{{GPU: 0, XID: 48, At: pinAt(80 * time.Millisecond)}}})
	set := registerXID(t, s, 0)
	start := time.Now()
	ev, r := set.Wait(5000)
	if r != nvml.SUCCESS || ev.EventData != 48 {
		t.Fatalf("Wait: %+v %v", ev, r)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Wait took %v for an event due at 80ms", took)
	}
}

// With a pinned clock, SetElapsed wakes a waiting Wait.
func TestSetElapsedWakesWait(t *testing.T) {
	s := exampleSim(t)
	set := registerXID(t, s, 2)
	done := make(chan nvml.Return)
	go func() {
		_, r := set.Wait(10000)
		done <- r
	}()
	time.Sleep(20 * time.Millisecond)
	s.SetElapsed(11 * time.Second)
	select {
	case r := <-done:
		if r != nvml.SUCCESS {
			t.Errorf("Wait: %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake on SetElapsed")
	}
}

func TestRegisterUnsupportedEvents(t *testing.T) {
	s := newSim(t, Config{Profile: "rtx4090"})
	set, _ := s.EventSetCreate()
	d := handle(t, s, 0)
	if r := d.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("ECC events on GeForce: %v", r)
	}
	if r := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
		t.Errorf("XID events on GeForce: %v", r)
	}
}

// A hang fault blocks every call on the device inside its window, and only
// there: before it, calls answer at once; after it, they answer again.
func TestHangFault(t *testing.T) {
	cfg, err := ParseConfig([]byte("profile: dgx-h100\nfaults:\n  - {gpu: 4, hang_after: 1h, hang_for: 300ms}\n"), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PinTime = pinAt(0)
	s := newSim(t, cfg)
	dev, _ := s.DeviceGetHandleByIndex(4)
	other, _ := s.DeviceGetHandleByIndex(3)
	s.SetElapsed(time.Hour - time.Second)
	if _, r := dev.GetUUID(); r != nvml.SUCCESS {
		t.Fatalf("before the hang: %v", r)
	}
	s.SetElapsed(time.Hour)
	returned := make(chan struct{})
	go func() { dev.GetUUID(); close(returned) }()
	select {
	case <-returned:
		t.Fatal("a call inside the hang window returned")
	case <-time.After(100 * time.Millisecond):
	}
	if _, r := other.GetUUID(); r != nvml.SUCCESS {
		t.Fatalf("another GPU is affected: %v", r)
	}
	s.SetElapsed(time.Hour + 300*time.Millisecond)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked call did not return after the hang window")
	}
}

func TestHangForNeedsHangAfter(t *testing.T) {
	_, err := ParseConfig([]byte("profile: h100\nfaults:\n  - {gpu: 0, hang_for: 1s}\n"), "cfg.yaml")
	if err == nil || !strings.Contains(err.Error(), "'hang_for' needs a 'hang_after'") {
		t.Fatalf("err = %v", err)
	}
}
