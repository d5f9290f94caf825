//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

func newReader(t *testing.T, lib nvml.Interface, groups map[string]bool) *Reader {
	t.Helper()
	return newReaderWith(t, lib, Options{Groups: groups, Now: steppingClock()})
}

// steppingClock is a clock that moves a second each time it is read, so
// that every GPM window of the fixtures is long enough.
func steppingClock() func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

// newReaderWith starts a Reader and closes it, checking Close, when the
// test ends.
func newReaderWith(t testing.TB, lib nvml.Interface, opts Options) *Reader {
	t.Helper()
	r, err := New(lib, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func read(t *testing.T, r *Reader) *snapshot.Snapshot {
	t.Helper()
	snap, err := r.Read(context.Background())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return snap
}

func noGroupErrors(t *testing.T, snap *snapshot.Snapshot) {
	t.Helper()
	for name, st := range snap.Groups {
		if st.Err != nil {
			t.Errorf("group %s: unexpected error %v", name, st.Err)
		}
	}
}

func want[T comparable](t *testing.T, what string, got snapshot.Opt[T], value T) {
	t.Helper()
	if !got.Valid || got.Value != value {
		t.Errorf("%s = %+v, want %v", what, got, value)
	}
}

func wantAbsent[T any](t *testing.T, what string, got snapshot.Opt[T]) {
	t.Helper()
	if got.Valid {
		t.Errorf("%s = %v, want absent", what, got.Value)
	}
}

func TestReadConvertsEveryGroupToBaseUnits(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0)}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)

	if snap.DriverVersion != "550.90.07" || snap.CUDADriverVersion != "12.4" || snap.NVMLVersion != "12.550.90.07" {
		t.Errorf("versions = %q %q %q", snap.DriverVersion, snap.CUDADriverVersion, snap.NVMLVersion)
	}
	if len(snap.Devices) != 1 {
		t.Fatalf("got %d devices", len(snap.Devices))
	}
	d := snap.Devices[0]
	if !d.Up || d.UUID != "GPU-00000000-0000-0000-0000-000000000000" {
		t.Errorf("identity: up=%v uuid=%q", d.Up, d.UUID)
	}
	wantInfo := snapshot.Info{
		Name: "NVIDIA H100 80GB HBM3", Brand: "nvidia", Architecture: "hopper",
		PCIBusID: "00000000:18:00.0", Serial: "1650123456780", VBIOSVersion: "96.00.74.00.01",
		ComputeCapability: "9.0", PersistenceMode: "enabled", ComputeMode: "default",
		MIGMode: "disabled", ECCMode: "enabled",
	}
	if d.Info != wantInfo {
		t.Errorf("info = %+v\nwant   %+v", d.Info, wantInfo)
	}

	want(t, "utilization.gpu", d.Utilization.GPU, 0.75)
	want(t, "utilization.memory", d.Utilization.Memory, 0.40)
	want(t, "utilization.encoder", d.Utilization.Encoder, 0)
	want(t, "utilization.decoder", d.Utilization.Decoder, 0.05)

	want(t, "memory.total", d.Memory.Total, 80*gib)
	want(t, "memory.reserved", d.Memory.Reserved, 512*mib)
	want(t, "memory.used", d.Memory.Used, 10*gib)
	want(t, "memory.free", d.Memory.Free, 80*gib-512*mib-10*gib)
	want(t, "memory.bar1_total", d.Memory.BAR1Total, 128*gib)
	want(t, "memory.bar1_used", d.Memory.BAR1Used, 2*mib)

	want(t, "temperature.gpu", d.Temperature.GPU, 45)
	want(t, "temperature.memory", d.Temperature.Memory, 50)
	want(t, "temperature.slowdown", d.Temperature.SlowdownThreshold, 90)
	want(t, "temperature.shutdown", d.Temperature.ShutdownThreshold, 92)
	want(t, "temperature.mem_max", d.Temperature.MemoryMaxThreshold, 95)
	wantAbsent(t, "fan (no fans)", d.FanSpeed)

	wantClocks := []snapshot.Clock{
		{Type: "graphics", Current: snapshot.Some(1755e6), Max: snapshot.Some(1980e6)},
		{Type: "sm", Current: snapshot.Some(1755e6), Max: snapshot.Some(1980e6)},
		{Type: "memory", Current: snapshot.Some(2619e6), Max: snapshot.Some(2619e6)},
		{Type: "video", Current: snapshot.Some(1545e6), Max: snapshot.Some(1755e6)},
	}
	if len(d.Clocks) != len(wantClocks) {
		t.Fatalf("clocks = %+v", d.Clocks)
	}
	for i := range wantClocks {
		if d.Clocks[i] != wantClocks[i] {
			t.Errorf("clock %d = %+v, want %+v", i, d.Clocks[i], wantClocks[i])
		}
	}
	want(t, "pstate", d.PState, 0)

	active := map[string]bool{}
	for _, e := range d.ClockEvents {
		if e.Active {
			active[e.Reason] = true
		}
	}
	if len(d.ClockEvents) != 9 || len(active) != 2 || !active["gpu_idle"] || !active["sw_power_cap"] {
		t.Errorf("clock events = %+v", d.ClockEvents)
	}

	want(t, "power.usage", d.Power.Usage, 350.125)
	want(t, "power.limit", d.Power.EnforcedLimit, 700)
	want(t, "power.energy", d.Power.Energy, 123456.789)

	want(t, "pcie.tx", d.PCIe.TxBytes, 1000)
	want(t, "pcie.rx", d.PCIe.RxBytes, 2000)
	want(t, "pcie.gen", d.PCIe.LinkGen, 5)
	want(t, "pcie.width", d.PCIe.LinkWidth, 16)
	want(t, "pcie.max_gen", d.PCIe.MaxLinkGen, 5)
	want(t, "pcie.max_width", d.PCIe.MaxLinkWidth, 16)
	want(t, "pcie.replay", d.PCIe.ReplayCounter, 3)

	want(t, "ecc.volatile_corrected", d.ECC.VolatileCorrected, 1)
	want(t, "ecc.volatile_uncorrected", d.ECC.VolatileUncorrected, 0)
	want(t, "ecc.aggregate_corrected", d.ECC.AggregateCorrected, 7)
	want(t, "ecc.aggregate_uncorrected", d.ECC.AggregateUncorrected, 2)
	wantAbsent(t, "ecc.retired_single (Hopper remaps rows)", d.ECC.RetiredPagesSingleBit)
	wantAbsent(t, "ecc.retired_pending", d.ECC.RetiredPagesPending)
	want(t, "ecc.remapped_correctable", d.ECC.RemappedRowsCorrectable, 2)
	want(t, "ecc.remapped_pending", d.ECC.RemappedRowsPending, false)

	if len(d.NVLinks) != 18 {
		t.Fatalf("nvlinks: got %d links, want 18", len(d.NVLinks))
	}
	l3 := d.NVLinks[3]
	if l3.Link != 3 || !l3.Active {
		t.Errorf("link 3 = %+v", l3)
	}
	want(t, "nvlink3.tx", l3.TxBytes, 13*1024)
	want(t, "nvlink3.rx", l3.RxBytes, 23*1024)
	want(t, "nvlink3.crc_flit", l3.CRCFlitErrors, 32)
	want(t, "nvlink3.crc_data", l3.CRCDataErrors, 33)
	want(t, "nvlink3.replay", l3.ReplayErrors, 30)
	want(t, "nvlink3.recovery", l3.RecoveryErrors, 31)
	if d.NVLinks[17].Active {
		t.Errorf("link 17 should be inactive")
	}

	// The first read already has GPM values: New took the baseline sample.
	want(t, "gpm.sm_active", d.GPM.SMActive, 0.80)
	want(t, "gpm.sm_occupancy", d.GPM.SMOccupancy, 0.40)
	want(t, "gpm.tensor", d.GPM.TensorActive, 0.30)
	want(t, "gpm.dram", d.GPM.DRAMActive, 0.25)
	want(t, "gpm.fp16", d.GPM.FP16Active, 0.20)
	want(t, "gpm.fp32", d.GPM.FP32Active, 0.10)
	want(t, "gpm.fp64", d.GPM.FP64Active, 0.05)
	if d.MIGInstances != nil {
		t.Errorf("MIG disabled, got instances %+v", d.MIGInstances)
	}

	for _, g := range snapshot.AllGroups {
		if _, ok := snap.Groups[g]; !ok {
			t.Errorf("Groups lacks %q", g)
		}
	}
	if snap.Groups[snapshot.GroupNVLink].Duration <= 0 {
		t.Errorf("nvlink duration not measured")
	}
}

func TestStaticIdentityIsReadOnce(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0)}
	r := newReader(t, h, AllGroups())
	for range 3 {
		read(t, r)
	}
	for _, call := range []string{"Device.GetName", "Device.GetSerial", "Device.GetPciInfo", "Device.GetVbiosVersion", "Interface.SystemGetDriverVersion"} {
		if n := h.log.count(call); n != 1 {
			t.Errorf("%s called %d times in 3 reads, want 1", call, n)
		}
	}
	// Links are discovered once: 36 probes, then 18 per read.
	if n := h.log.count("Device.GetNvLinkState"); n != 36+3*18 {
		t.Errorf("GetNvLinkState called %d times, want %d", n, 36+3*18)
	}
	// Liveness is probed every time.
	if n := h.log.count("Device.GetUUID"); n < 3 {
		t.Errorf("GetUUID called %d times, want at least one per read", n)
	}
	if n := h.log.count("Device.GetPcieThroughput"); n != 0 {
		t.Errorf("GetPcieThroughput must never be called (it blocks 20 ms), called %d times", n)
	}
	if n := h.log.count("Device.GetFieldValues"); n != 3 {
		t.Errorf("GetFieldValues called %d times in 3 reads, want one batched call per read", n)
	}
}

func TestUnsupportedReadingsAreAbsentNotZero(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeConsumer(h, 0)}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if !d.Up {
		t.Fatalf("device down: %s", d.DownReason)
	}
	if d.Info.Brand != "geforce rtx" || d.Info.Architecture != "ada" || d.Info.ComputeCapability != "8.9" {
		t.Errorf("info = %+v", d.Info)
	}
	if d.Info.ECCMode != "" || d.Info.MIGMode != "" || d.Info.Serial != "" {
		t.Errorf("unsupported modes must be empty: %+v", d.Info)
	}
	want(t, "fan (average of 30%, 50%)", d.FanSpeed, 0.40)
	want(t, "memory.total (v1 fallback)", d.Memory.Total, 24*gib)
	want(t, "memory.used (v1 fallback)", d.Memory.Used, 1*gib)
	wantAbsent(t, "memory.reserved (v1 has none)", d.Memory.Reserved)
	wantAbsent(t, "bar1", d.Memory.BAR1Total)
	wantAbsent(t, "temperature.memory", d.Temperature.Memory)
	wantAbsent(t, "temperature.gpu", d.Temperature.GPU)
	wantAbsent(t, "pcie.tx", d.PCIe.TxBytes)
	wantAbsent(t, "ecc.volatile_corrected", d.ECC.VolatileCorrected)
	wantAbsent(t, "ecc.remapped", d.ECC.RemappedRowsCorrectable)
	wantAbsent(t, "gpm.sm_active", d.GPM.SMActive)
	wantAbsent(t, "power.limit", d.Power.EnforcedLimit)
	want(t, "power.usage", d.Power.Usage, 95)
	if d.NVLinks != nil {
		t.Errorf("NVLinks = %+v, want nil", d.NVLinks)
	}
	if d.Clocks != nil || d.ClockEvents != nil {
		t.Errorf("clocks %+v events %+v, want nil", d.Clocks, d.ClockEvents)
	}
	wantAbsent(t, "pstate", d.PState)

	// A card without NVLink is probed once, then never again.
	read(t, r)
	if n := h.log.count("Device.GetNvLinkState"); n != nvml.NVLINK_MAX_LINKS {
		t.Errorf("GetNvLinkState called %d times over 2 reads, want %d", n, nvml.NVLINK_MAX_LINKS)
	}
}

// groupCalls lists, per group, the device methods the group may call
// (besides the liveness probe GetUUID, which every read makes).
var groupCalls = map[string][]string{
	snapshot.GroupInfo: {"GetName", "GetBrand", "GetArchitecture", "GetPciInfo", "GetMinorNumber", "GetSerial", "GetVbiosVersion",
		"GetCudaComputeCapability", "GetPersistenceMode", "GetComputeMode", "GetMigMode", "GetEccMode", "GetVirtualizationMode"},
	snapshot.GroupUtilization: {"GetUtilizationRates", "GetEncoderUtilization", "GetDecoderUtilization"},
	snapshot.GroupMemory:      {"GetMemoryInfo_v2", "GetMemoryInfo", "GetBAR1MemoryInfo"},
	snapshot.GroupTemperature: {"GetTemperature", "GetTemperatureThreshold", "GetFieldValues"},
	snapshot.GroupFan:         {"GetNumFans", "GetFanSpeed_v2", "GetFanSpeed"},
	snapshot.GroupClocks:      {"GetClockInfo", "GetMaxClockInfo", "GetPerformanceState"},
	snapshot.GroupClockEvents: {"GetCurrentClocksEventReasons", "GetSupportedClocksEventReasons"},
	snapshot.GroupPower: {"GetPowerUsage", "GetEnforcedPowerLimit", "GetTotalEnergyConsumption",
		"GetPowerManagementDefaultLimit", "GetPowerManagementLimitConstraints"},
	snapshot.GroupPCIe: {"GetFieldValues", "GetCurrPcieLinkGeneration", "GetCurrPcieLinkWidth",
		"GetMaxPcieLinkGeneration", "GetMaxPcieLinkWidth", "GetPcieReplayCounter"},
	snapshot.GroupECC:    {"GetTotalEccErrors", "GetRetiredPages", "GetRetiredPagesPendingStatus", "GetRemappedRows"},
	snapshot.GroupNVLink: {"GetNvLinkState", "GetNvLinkErrorCounter", "GetFieldValues"},
	snapshot.GroupXID:    {"GetSupportedEventTypes", "RegisterEvents"},
	snapshot.GroupGPM:    {"GpmQueryDeviceSupport", "GpmSampleGet", "GpmMigSampleGet", "GetMigMode", "GetMaxMigDeviceCount", "GetMigDeviceHandleByIndex"},
	snapshot.GroupMIG:    {"GetMigMode", "GetMaxMigDeviceCount", "GetMigDeviceHandleByIndex"},
	snapshot.GroupProcesses: {"GetMigMode", "GetMaxMigDeviceCount", "GetMigDeviceHandleByIndex",
		"GetComputeRunningProcesses", "GetGraphicsRunningProcesses", "GetMPSComputeRunningProcesses", "GetProcessUtilization"},
}

var libraryCalls = map[string][]string{
	snapshot.GroupInfo: {"SystemGetDriverVersion", "SystemGetCudaDriverVersion", "SystemGetNVMLVersion"},
	snapshot.GroupXID:  {"EventSetCreate"},
	snapshot.GroupGPM:  {"GpmSampleAlloc", "GpmMetricsGet"},
}

func TestDisabledGroupsMakeNoNVMLCalls(t *testing.T) {
	for _, only := range append([]string{"(none)"}, snapshot.AllGroups...) {
		t.Run(only, func(t *testing.T) {
			h := newFakeHost()
			h.devices = []nvml.Device{newFakeH100(h, 0), newFakeConsumer(h, 1)}
			groups := map[string]bool{}
			if only != "(none)" {
				groups[only] = true
			}
			r := newReader(t, h, groups)
			read(t, r)
			read(t, r)

			allowed := map[string]bool{
				"Interface.Init": true, "Interface.Shutdown": true, "Interface.DeviceGetCount": true,
				"Interface.DeviceGetHandleByIndex": true, "Device.GetUUID": true,
				// Once at start: what the library exports, and its version.
				"Interface.Extensions": true, "Interface.SystemGetDriverVersion": true,
			}
			for _, m := range groupCalls[only] {
				allowed["Device."+m] = true
			}
			for _, m := range libraryCalls[only] {
				allowed["Interface."+m] = true
			}
			for _, call := range h.log.names() {
				if !allowed[call] {
					t.Errorf("%s was called with only group %s enabled", call, only)
				}
			}
			// And the group did make its own calls.
			own := 0
			for _, m := range groupCalls[only] {
				own += h.log.count("Device." + m)
			}
			for _, m := range libraryCalls[only] {
				own += h.log.count("Interface." + m)
			}
			if only != "(none)" && own == 0 {
				t.Errorf("group %s made no call of its own: %v", only, h.log.names())
			}
		})
	}
}

func TestUnknownGroupIsAnError(t *testing.T) {
	h := newFakeHost()
	_, err := New(h, Options{Groups: map[string]bool{"memroy": true}})
	if err == nil || !strings.Contains(err.Error(), `memroy`) {
		t.Fatalf("New with a misspelt group: err = %v, want one naming it", err)
	}
}

func TestLibraryNotFound(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := New(lib, Options{Groups: AllGroups()})
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("err = %v, want ErrLibraryNotFound", err)
	}
	if !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("error %q does not name libnvidia-ml.so.1", err)
	}

	lib = &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}
	_, err = New(lib, Options{Groups: AllGroups()})
	if err == nil || errors.Is(err, ErrLibraryNotFound) || !errors.Is(err, nvml.ERROR_DRIVER_NOT_LOADED) {
		t.Fatalf("driver not loaded: err = %v", err)
	}
}

func TestLostGPUIsDownAndOthersAreRead(t *testing.T) {
	h := newFakeHost()
	lost := newFakeH100(h, 1)
	lostNow := false
	var mu sync.Mutex
	isLost := func() bool { mu.Lock(); defer mu.Unlock(); return lostNow }
	origUUID := lost.GetUUIDFunc
	lost.GetUUIDFunc = func() (string, nvml.Return) {
		if isLost() {
			return "", nvml.ERROR_GPU_IS_LOST
		}
		return origUUID()
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), lost, newFakeH100(h, 2)}
	r := newReader(t, h, AllGroups())

	if snap := read(t, r); !snap.Devices[1].Up {
		t.Fatalf("device 1 down before the fault")
	}
	mu.Lock()
	lostNow = true
	mu.Unlock()
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[1]
	if d.Up || d.DownReason != "gpu_is_lost" || d.Index != 1 || d.UUID != "GPU-00000000-0000-0000-0000-000000000001" {
		t.Errorf("lost device = up %v reason %q index %d", d.Up, d.DownReason, d.Index)
	}
	if d.Power.Usage.Valid || d.Info.Name != "" || d.NVLinks != nil {
		t.Errorf("a down device must carry no readings: %+v", d)
	}
	for _, i := range []int{0, 2} {
		if !snap.Devices[i].Up || !snap.Devices[i].Power.Usage.Valid {
			t.Errorf("device %d not read normally: %+v", i, snap.Devices[i])
		}
	}
}

func TestGPULostMidReadDropsItsReadings(t *testing.T) {
	h := newFakeHost()
	dev := newFakeH100(h, 0)
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	h.devices = []nvml.Device{dev}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if d.Up || d.DownReason != "gpu_is_lost" || d.UUID == "" {
		t.Fatalf("device = up %v reason %q uuid %q", d.Up, d.DownReason, d.UUID)
	}
	if d.Utilization.GPU.Valid || d.Clocks != nil {
		t.Errorf("readings taken before the loss must be dropped: %+v", d)
	}
	if h.log.count("Device.GetTotalEccErrors") != 0 {
		t.Errorf("groups after the loss were still read")
	}
}

func TestUnexpectedErrorIsReportedAndOnlyThatReadingIsAbsent(t *testing.T) {
	h := newFakeHost()
	dev := newFakeH100(h, 0)
	dev.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	dev.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return { return nvml.ERROR_UNKNOWN }
	h.devices = []nvml.Device{dev}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	d := snap.Devices[0]
	if !d.Up {
		t.Fatalf("an unexpected error must not take the device down")
	}
	wantAbsent(t, "power.limit", d.Power.EnforcedLimit)
	want(t, "power.usage", d.Power.Usage, 350.125)
	err := snap.Groups[snapshot.GroupPower].Err
	if !errors.Is(err, nvml.ERROR_NO_PERMISSION) || !strings.Contains(err.Error(), "GetEnforcedPowerLimit") {
		t.Errorf("power group err = %v", err)
	}
	for _, g := range []string{snapshot.GroupPCIe, snapshot.GroupTemperature, snapshot.GroupNVLink} {
		if !errors.Is(snap.Groups[g].Err, nvml.ERROR_UNKNOWN) {
			t.Errorf("group %s err = %v, want the failed GetFieldValues", g, snap.Groups[g].Err)
		}
	}
	wantAbsent(t, "pcie.tx", d.PCIe.TxBytes)
	want(t, "pcie.gen", d.PCIe.LinkGen, 5)
	want(t, "temperature.gpu", d.Temperature.GPU, 45)
	if snap.Groups[snapshot.GroupMemory].Err != nil {
		t.Errorf("memory group err = %v", snap.Groups[snapshot.GroupMemory].Err)
	}
}

func TestAPanickingBindingDoesNotPanicRead(t *testing.T) {
	h := newFakeHost()
	dev := newFakeH100(h, 0)
	dev.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { panic("broken binding") }
	h.devices = []nvml.Device{dev}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	if err := snap.Groups[snapshot.GroupClocks].Err; err == nil || !strings.Contains(err.Error(), "broken binding") {
		t.Errorf("clocks err = %v", err)
	}
	want(t, "power.usage read after the panic", snap.Devices[0].Power.Usage, 350.125)
}

func TestXIDCountedOnTheRightDevice(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	r := newReader(t, h, AllGroups())
	if n := h.log.count("Device.RegisterEvents"); n != 2 {
		t.Fatalf("RegisterEvents called %d times, want 2", n)
	}
	h.events <- nvml.EventData{Device: h.devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	h.events <- nvml.EventData{Device: h.devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	h.events <- nvml.EventData{Device: h.devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 13}

	snap := pollUntil(t, r, func(s *snapshot.Snapshot) bool {
		return len(s.Devices[1].XIDErrors) == 2 && s.Devices[1].XIDErrors[1].Count == 2
	})
	got := snap.Devices[1].XIDErrors
	if got[0] != (snapshot.XIDCount{XID: 13, Count: 1}) || got[1] != (snapshot.XIDCount{XID: 79, Count: 2}) {
		t.Errorf("device 1 xids = %+v", got)
	}
	if snap.Devices[0].XIDErrors != nil {
		t.Errorf("device 0 xids = %+v, want none", snap.Devices[0].XIDErrors)
	}
}

// TestXIDEventSetCreateFailure: when a later GPU's event set cannot be
// created, the sets already made are freed and none is registered; the
// failure is the xid group's error. A driver without event sets
// (NOT_SUPPORTED) is no error.
func TestXIDEventSetCreateFailure(t *testing.T) {
	for _, c := range []struct {
		ret     nvml.Return
		wantErr bool
	}{{nvml.ERROR_UNKNOWN, true}, {nvml.ERROR_NOT_SUPPORTED, false}} {
		t.Run(c.ret.String(), func(t *testing.T) {
			h := newFakeHost()
			h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1), newFakeH100(h, 2)}
			var mu sync.Mutex
			created, freed := 0, 0
			h.Interface.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
				mu.Lock()
				defer mu.Unlock()
				if created == 2 {
					return nil, c.ret
				}
				created++
				return &mock.EventSet{FreeFunc: func() nvml.Return {
					mu.Lock()
					defer mu.Unlock()
					freed++
					return nvml.SUCCESS
				}}, nvml.SUCCESS
			}
			r := newReader(t, h, groups(snapshot.GroupXID))
			err := read(t, r).Groups[snapshot.GroupXID].Err
			if c.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), "EventSetCreate")) {
				t.Errorf("xid group error = %v, want one naming EventSetCreate: %v", err, c.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if created != 2 || freed != 2 {
				t.Errorf("%d sets created, %d freed; want 2 and 2", created, freed)
			}
			if n := h.log.count("Device.RegisterEvents"); n != 0 {
				t.Errorf("RegisterEvents called %d times, want none", n)
			}
		})
	}
}

// pollUntil reads until cond holds, failing after a few seconds.
func pollUntil(t *testing.T, r *Reader, cond func(*snapshot.Snapshot) bool) *snapshot.Snapshot {
	t.Helper()
	var snap *snapshot.Snapshot
	testenv.Eventually(t, 5*time.Second, func() error {
		if snap = read(t, r); !cond(snap) {
			return fmt.Errorf("no snapshot met the condition; the last one's devices: %+v", snap.Devices)
		}
		return nil
	})
	return snap
}

func TestReadDoesNotWaitForXIDEvents(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0)}
	r := newReader(t, h, map[string]bool{snapshot.GroupXID: true})
	// The watcher is blocked in Wait (500 ms timeout) almost all the time;
	// ten reads must not queue behind it. Not a timing assertion on speed,
	// only that reads complete while Wait is outstanding: reads queued
	// behind it would take about 500ms each, 5s for the ten.
	done := make(chan struct{})
	go func() {
		for range 10 {
			if _, err := r.Read(context.Background()); err != nil {
				t.Error(err)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2500 * time.Millisecond):
		t.Fatal("reads blocked behind the XID event wait")
	}
}

func TestCloseFreesGPMSamplesAndShutsDown(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	r, err := New(h, Options{Groups: AllGroups()})
	if err != nil {
		t.Fatal(err)
	}
	read(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if h.freed != 4 { // two samples per device
		t.Errorf("freed %d GPM samples, want 4", h.freed)
	}
	if h.log.count("Interface.Shutdown") != 1 {
		t.Errorf("Shutdown not called once")
	}
	if _, err := r.Read(context.Background()); err == nil {
		t.Errorf("Read after Close succeeded")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestGPMSupportIsAskedAgainAfterAFailure: a failed GpmQueryDeviceSupport
// is the gpm group's error and is asked again at the next read; once the
// device answered, it is not asked again.
func TestGPMSupportIsAskedAgainAfterAFailure(t *testing.T) {
	h := newFakeHost()
	var mu sync.Mutex
	asked := 0
	h.devices = []nvml.Device{newFakeH100(h, 0, func(d *mock.Device) {
		d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			if asked <= 2 { // at start (priming) and at the first read
				return nvml.GpmSupport{}, nvml.ERROR_UNKNOWN
			}
			return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
		}
	})}
	r := newReader(t, h, groups(snapshot.GroupGPM))
	first := read(t, r)
	if err := first.Groups[snapshot.GroupGPM].Err; err == nil || !strings.Contains(err.Error(), "GpmQueryDeviceSupport") {
		t.Errorf("gpm error after a failed question = %v", err)
	}
	wantAbsent(t, "gpm sm active before support is known", first.Devices[0].GPM.SMActive)
	read(t, r) // asked again: supported; the first sample
	var last *snapshot.Snapshot
	for range 3 {
		last = read(t, r)
	}
	noGroupErrors(t, last)
	want(t, "gpm sm active", last.Devices[0].GPM.SMActive, 0.80)
	if n := h.log.count("Device.GpmQueryDeviceSupport"); n != 3 {
		t.Errorf("GpmQueryDeviceSupport asked %d times, want 3 (twice failed, once answered)", n)
	}
}

func TestConcurrentReads(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeConsumer(h, 1), newFakeH100(h, 2)}
	r := newReader(t, h, AllGroups())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				snap, err := r.Read(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if len(snap.Devices) != 3 || !snap.Devices[2].GPM.SMActive.Valid {
					t.Errorf("bad concurrent snapshot: %+v", snap.Devices)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCanceledContext(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	r := newReader(t, h, AllGroups())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestSnapshotTimeUsesTheGivenClock(t *testing.T) {
	h := newFakeHost()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r, err := New(h, Options{Groups: AllGroups(), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if snap := read(t, r); !snap.Time.Equal(at) {
		t.Errorf("time = %v, want %v", snap.Time, at)
	}
}

// A reader with AccountingOptions.XIDFrom waits on no GPU itself: it serves the
// other reader's counts, and closing it leaves that reader's watcher
// running. One whose XIDFrom does not read XIDs watches on its own.
func TestXIDFromAnotherReader(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	owner := newReader(t, h, groups(snapshot.GroupXID))
	borrower := newModeReader(t, h, Options{Groups: groups(snapshot.GroupXID), Now: steppingClock()}, readMode{xidFrom: owner})
	if n, m := h.log.count("Interface.EventSetCreate"), h.log.count("Device.RegisterEvents"); n != 2 || m != 2 {
		t.Fatalf("%d event sets created, %d registrations; want 2 and 2 (the owner's alone)", n, m)
	}
	xid79 := nvml.EventData{Device: h.devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	h.events <- xid79
	counted := func(n uint64) func(*snapshot.Snapshot) bool {
		return func(s *snapshot.Snapshot) bool { return s.Devices[1].XIDEvents.Value == n }
	}
	got := pollUntil(t, borrower, counted(1)).Devices[1].XIDErrors
	if want := []snapshot.XIDCount{{XID: 79, Count: 1}}; !slices.Equal(got, want) {
		t.Errorf("the borrower's gpu 1 xids = %+v, want %+v", got, want)
	}
	if err := borrower.Close(); err != nil {
		t.Fatal(err)
	}
	h.events <- xid79
	pollUntil(t, owner, counted(2))

	// An XIDFrom without the xid group lends nothing.
	h2 := newFakeHost()
	h2.devices = []nvml.Device{newFakeH100(h2, 0)}
	noXID := newReader(t, h2, groups(snapshot.GroupInfo))
	own := newModeReader(t, h2, Options{Groups: groups(snapshot.GroupXID), Now: steppingClock()}, readMode{xidFrom: noXID})
	if n := h2.log.count("Device.RegisterEvents"); n != 1 {
		t.Fatalf("RegisterEvents called %d times, want 1 (its own watcher)", n)
	}
	h2.events <- nvml.EventData{Device: h2.devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	pollUntil(t, own, func(s *snapshot.Snapshot) bool { return s.Devices[0].XIDEvents.Value == 1 })
}

// newModeReader is newReaderWith for a reader with some of the accounting
// reader's modes, each tested on its own.
func newModeReader(t testing.TB, lib nvml.Interface, opts Options, mode readMode) *Reader {
	t.Helper()
	r, err := openReader(lib, opts, mode)
	if err != nil {
		t.Fatalf("openReader: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}
