//go:build cgo

package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestDeterministicWithPinnedTime(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			cfg := Config{Profile: p.Name, PinTime: pinAt(90 * time.Second)}
			a, b := newSim(t, cfg), newSim(t, cfg)
			first := dump(t, a)
			if second := dump(t, b); first != second {
				t.Errorf("two simulators at the same pinned time differ:\n%s\n---\n%s", first, second)
			}
			time.Sleep(2 * time.Millisecond)
			if again := dump(t, a); again != first {
				t.Errorf("a pinned simulator changed over real time")
			}
			// A different time gives different readings.
			a.SetElapsed(200 * time.Second)
			if later := dump(t, a); later == first {
				t.Errorf("readings did not change with the simulated time")
			}
		})
	}
}

func TestNowFollowsElapsed(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(10 * time.Second)})
	if got, want := s.Now(), Epoch.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
	s.SetElapsed(time.Hour)
	if got := s.Now(); !got.Equal(Epoch.Add(time.Hour)) {
		t.Errorf("Now after SetElapsed = %v", got)
	}
	// Unpinned, the clock runs with real time.
	s = newSim(t, Config{Profile: "h100"})
	t0 := s.Now()
	time.Sleep(5 * time.Millisecond)
	if d := s.Now().Sub(t0); d < 5*time.Millisecond {
		t.Errorf("unpinned clock advanced %v over 5ms", d)
	}
}

// With WallClock (the demo) the unpinned clock is the real time, and the
// readings' timestamps are too; pinned, WallClock changes nothing.
func TestWallClockIsTheRealTime(t *testing.T) {
	before := time.Now()
	s := newSim(t, Config{Profile: "h100", WallClock: true})
	if now := s.Now(); now.Before(before) || now.After(time.Now()) {
		t.Errorf("Now = %v, want the real time (between %v and %v)", now, before, time.Now())
	}
	if start := s.ClockStart(); start.Before(before.Add(-time.Millisecond)) || start.After(s.Now()) {
		t.Errorf("ClockStart = %v, want the real time at New", start)
	}
	dev, _ := s.DeviceGetHandleByIndex(0)
	values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION}}
	if r := dev.GetFieldValues(values); r != nvml.SUCCESS {
		t.Fatalf("GetFieldValues: %v", r)
	}
	if ts := time.UnixMicro(values[0].Timestamp); ts.Before(before.Add(-time.Millisecond)) || ts.After(time.Now()) {
		t.Errorf("a field value stamped %v, want the real time", ts)
	}
	pinned := newSim(t, Config{Profile: "h100", WallClock: true, PinTime: pinAt(time.Minute)})
	if got := pinned.Now(); !got.Equal(Epoch.Add(time.Minute)) {
		t.Errorf("pinned with WallClock: Now = %v, want Epoch + 1m", got)
	}
}

// counters reads every counter of a device that must only grow.
func counters(t *testing.T, d nvml.Device) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	get := func(name string, v uint64, r nvml.Return) {
		if r == nvml.SUCCESS {
			out[name] = v
		}
	}
	e, r := d.GetTotalEnergyConsumption()
	get("energy", e, r)
	for _, f := range []struct {
		name      string
		id, scope uint32
	}{
		{"pcie_tx", nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0},
		{"pcie_rx", nvml.FI_DEV_PCIE_COUNT_RX_BYTES, 0},
		{"energy_field", nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0},
		{"nvlink0_tx", nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0},
		{"nvlink5_rx", nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 5},
		{"nvlink1_raw_tx", nvml.FI_DEV_NVLINK_THROUGHPUT_RAW_TX, 1},
	} {
		v, r := fieldULL(t, d, f.id, f.scope)
		get(f.name, v, r)
	}
	for _, kind := range []nvml.MemoryErrorType{nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.MEMORY_ERROR_TYPE_UNCORRECTED} {
		v, r := d.GetTotalEccErrors(kind, nvml.VOLATILE_ECC)
		get(fmt.Sprint("ecc_volatile", kind), v, r)
		v, r = d.GetTotalEccErrors(kind, nvml.AGGREGATE_ECC)
		get(fmt.Sprint("ecc_aggregate", kind), v, r)
	}
	rp, r := d.GetPcieReplayCounter()
	get("replay", uint64(rp), r)
	for link := range 18 {
		v, r := d.GetNvLinkErrorCounter(link, nvml.NVLINK_ERROR_DL_REPLAY)
		get(fmt.Sprint("nvlink_replay", link), v, r)
	}
	return out
}

func TestCountersOnlyGrow(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			s := newSim(t, Config{Profile: p.Name, PinTime: pinAt(0)})
			n, _ := s.DeviceGetCount()
			n = min(n, 8)
			prev := make([]map[string]uint64, n)
			grew := map[string]bool{}
			// Irregular steps over six hours of simulated time.
			for step, e := 0, time.Duration(0); e < 6*time.Hour; step++ {
				s.SetElapsed(e)
				for i := range n {
					cur := counters(t, handle(t, s, i))
					for k, v := range cur {
						if old, ok := prev[i][k]; ok {
							if strings.HasPrefix(k, "pcie_") {
								// 32-bit counters: they wrap (see pcieCounterWrap).
								if v >= pcieCounterWrap {
									t.Fatalf("gpu %d %s = %d, over 32 bits", i, k, v)
								}
								grew[k] = grew[k] || v != old
								continue
							}
							if v < old {
								t.Fatalf("gpu %d %s went down at %v: %d -> %d", i, k, e, old, v)
							}
							grew[k] = grew[k] || v > old
						}
					}
					prev[i] = cur
				}
				e += time.Duration(1+step%7) * 37 * time.Second
			}
			for _, k := range []string{"energy", "pcie_tx", "pcie_rx"} {
				if !grew[k] {
					t.Errorf("%s never grew", k)
				}
			}
			if p.Name == "dgx-h100" {
				for _, k := range []string{"nvlink0_tx", "nvlink5_rx", "ecc_volatile0", "replay", "nvlink_replay1"} {
					if !grew[k] {
						t.Errorf("%s never grew", k)
					}
				}
			}
		})
	}
}

// Energy is the integral of power: over an interval, its increase divided
// by the time is the mean power, which lies within the power readings.
func TestEnergyMatchesPower(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(0)})
	d := handle(t, s, 0)
	minP, maxP := math.Inf(1), math.Inf(-1)
	e0, _ := d.GetTotalEnergyConsumption()
	for sec := 0; sec <= 600; sec++ {
		s.SetElapsed(time.Duration(sec) * time.Second)
		p, _ := d.GetPowerUsage()
		minP, maxP = min(minP, float64(p)), max(maxP, float64(p))
	}
	e1, _ := d.GetTotalEnergyConsumption()
	mean := float64(e1-e0) / 600 // mJ/s = mW
	if mean < minP || mean > maxP {
		t.Errorf("mean power from energy %.0f mW outside the readings [%.0f, %.0f]", mean, minP, maxP)
	}
	if maxP > 700000 || minP < 72000 {
		t.Errorf("power [%v, %v] mW outside the card's idle..limit", minP, maxP)
	}
}

func TestReadingsInRealRanges(t *testing.T) {
	for _, p := range Profiles() {
		s := newSim(t, Config{Profile: p.Name, PinTime: pinAt(0)})
		n, _ := s.DeviceGetCount()
		for sec := 0; sec < 900; sec += 13 {
			s.SetElapsed(time.Duration(sec) * time.Second)
			for i := range n {
				d := handle(t, s, i)
				if u, r := d.GetUtilizationRates(); r == nvml.SUCCESS && (u.Gpu > 100 || u.Memory > 100) {
					t.Fatalf("%s gpu %d utilization %+v", p.Name, i, u)
				}
				limit, _ := d.GetEnforcedPowerLimit()
				if pw, _ := d.GetPowerUsage(); pw > limit {
					t.Fatalf("%s gpu %d power %d over limit %d", p.Name, i, pw, limit)
				}
				for _, c := range []nvml.ClockType{nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM, nvml.CLOCK_MEM, nvml.CLOCK_VIDEO} {
					cur, _ := d.GetClockInfo(c)
					hi, _ := d.GetMaxClockInfo(c)
					if cur == 0 || cur > hi {
						t.Fatalf("%s gpu %d clock %d = %d, max %d", p.Name, i, c, cur, hi)
					}
				}
				temp, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
				slow, _ := d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
				if temp < 20 || temp >= slow {
					t.Fatalf("%s gpu %d temperature %d (slowdown %d)", p.Name, i, temp, slow)
				}
				m, _ := d.GetMemoryInfo()
				if m.Used+m.Free != m.Total {
					t.Fatalf("%s gpu %d memory %+v does not add up", p.Name, i, m)
				}
			}
		}
	}
}

func TestIdleAndBusyClockEvents(t *testing.T) {
	// Only GPU 0 runs its training rank; GPU 1 is idle.
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(0), Processes: []ProcessSpec{
		{GPU: 0, PID: 71201, UsedMemoryBytes: 74 * gib, SMUtilization: 0.78, MemoryUtilization: 0.46},
	}})
	idle := handle(t, s, 1)
	if r, _ := idle.GetCurrentClocksEventReasons(); r&nvml.ClocksEventReasonGpuIdle == 0 {
		t.Errorf("idle GPU reasons %#x lack GPU_IDLE", r)
	}
	if c, _ := idle.GetClockInfo(nvml.CLOCK_SM); c != 345 {
		t.Errorf("idle SM clock %d", c)
	}
	busy := handle(t, s, 0)
	sawCap := false
	for sec := range 600 {
		s.SetElapsed(time.Duration(sec) * time.Second)
		r, _ := busy.GetCurrentClocksEventReasons()
		if r&nvml.ClocksEventReasonGpuIdle != 0 {
			t.Fatalf("busy GPU reports GPU_IDLE at %ds", sec)
		}
		p, _ := busy.GetPowerUsage()
		capped := r&nvml.ClocksEventReasonSwPowerCap != 0
		if capped != (p > 665000) {
			t.Fatalf("at %ds power %d mW but SW power cap = %v", sec, p, capped)
		}
		sawCap = sawCap || capped
	}
	if !sawCap {
		t.Error("GPU 0 never hit the SW power cap over 10 minutes")
	}
}

func TestLibraryNeedsInit(t *testing.T) {
	s, err := New(Config{Profile: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, r := s.DeviceGetCount(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("DeviceGetCount before Init: %v", r)
	}
	s.Init()
	d := handle(t, s, 0)
	if r := s.Shutdown(); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	if _, r := d.GetPowerUsage(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("device call after Shutdown: %v", r)
	}
	if r := s.Shutdown(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("second Shutdown: %v", r)
	}
	if _, r := s.DeviceGetHandleByIndex(0); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("DeviceGetHandleByIndex after Shutdown: %v", r)
	}
}

func TestIdentity(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100"})
	seen := map[string]bool{}
	for i := range 8 {
		d := handle(t, s, i)
		uuid, _ := d.GetUUID()
		if seen[uuid] || len(uuid) != 40 || uuid[:4] != "GPU-" {
			t.Errorf("gpu %d uuid %q", i, uuid)
		}
		seen[uuid] = true
		if byUUID, r := s.DeviceGetHandleByUUID(uuid); r != nvml.SUCCESS || byUUID != d {
			t.Errorf("DeviceGetHandleByUUID(%s) = %v", uuid, r)
		}
		if idx, _ := d.GetIndex(); idx != i {
			t.Errorf("GetIndex = %d", idx)
		}
	}
	d := handle(t, s, 4)
	pci, _ := d.GetPciInfo()
	if got := cString(pci.BusId[:]); got != "00000000:9A:00.0" {
		t.Errorf("bus id %q", got)
	}
	if major, minor, _ := d.GetCudaComputeCapability(); major != 9 || minor != 0 {
		t.Errorf("cc %d.%d", major, minor)
	}
	if b, _ := d.GetBrand(); b != nvml.BRAND_NVIDIA {
		t.Errorf("brand %v", b)
	}
	if a, _ := d.GetArchitecture(); a != nvml.DEVICE_ARCH_HOPPER {
		t.Errorf("arch %v", a)
	}
	m, _ := d.GetMemoryInfo()
	if m.Total != 81559*mib {
		t.Errorf("memory total %d", m.Total)
	}
	if l, _ := d.GetEnforcedPowerLimit(); l != 700000 {
		t.Errorf("power limit %d mW", l)
	}
	if v, _ := s.SystemGetDriverVersion(); v != "550.90.07" {
		t.Errorf("driver %q", v)
	}
	if v, _ := s.SystemGetCudaDriverVersion(); v != 12040 {
		t.Errorf("cuda %d", v)
	}
	// UUIDs are stable across simulators.
	s2 := newSim(t, Config{Profile: "dgx-h100"})
	u1, _ := handle(t, s, 3).GetUUID()
	u2, _ := handle(t, s2, 3).GetUUID()
	if u1 != u2 {
		t.Errorf("uuid not stable: %s vs %s", u1, u2)
	}
}

func TestFieldValueEncoding(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute)})
	d := handle(t, s, 0)
	vals := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_MEMORY_TEMP},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: 17},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: 18}, // H100 has links 0-17
		{FieldId: nvml.FI_DEV_NVLINK_LINK_COUNT},
		{FieldId: nvml.FI_DEV_PCIE_COUNT_TX_BYTES},
		{FieldId: 9999},
		{FieldId: nvml.FI_DEV_RETIRED_SBE}, // a real field the simulator does not model
	}
	if r := d.GetFieldValues(vals); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	wantRet := []nvml.Return{nvml.SUCCESS, nvml.SUCCESS, nvml.ERROR_INVALID_ARGUMENT, nvml.SUCCESS, nvml.SUCCESS, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_NOT_SUPPORTED}
	wantType := []nvml.ValueType{nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 0, nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 0, 0}
	for i, v := range vals {
		if nvml.Return(v.NvmlReturn) != wantRet[i] || nvml.ValueType(v.ValueType) != wantType[i] {
			t.Errorf("field %d: return %v type %d, want %v type %d", v.FieldId, nvml.Return(v.NvmlReturn), v.ValueType, wantRet[i], wantType[i])
		}
		if v.Timestamp != Epoch.Add(time.Minute).UnixMicro() {
			t.Errorf("field %d timestamp %d", v.FieldId, v.Timestamp)
		}
	}
	temp, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
	if memTemp, _ := fieldULL(t, d, nvml.FI_DEV_MEMORY_TEMP, 0); memTemp <= uint64(temp) {
		t.Errorf("HBM %d°C should run warmer than the die %d°C", memTemp, temp)
	}
}

// lib.DeviceGetX(dev) and dev.GetX() agree, modelled or not.
func TestLibraryCallsForwardToDevice(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(time.Minute)})
	d := handle(t, s, 0)
	p1, r1 := s.DeviceGetPowerUsage(d)
	p2, r2 := d.GetPowerUsage()
	if p1 != p2 || r1 != r2 || r1 != nvml.SUCCESS {
		t.Errorf("DeviceGetPowerUsage %d/%v vs GetPowerUsage %d/%v", p1, r1, p2, r2)
	}
	if n, r := s.DeviceGetNumGpuCores(d); n != 0 || r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("unmodelled DeviceGetNumGpuCores = %d, %v", n, r)
	}
	if _, r := s.DeviceGetPowerUsage(nil); r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("nil device: %v", r)
	}
}
