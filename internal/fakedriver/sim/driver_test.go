//go:build cgo

package sim

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim/internal/genguard"
)

func TestGuardGeneratedFileIsCurrent(t *testing.T) {
	want, err := genguard.Source()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(genguard.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		line := 1 + bytes.Count(have[:commonPrefix(have, want)], []byte("\n"))
		t.Fatalf("%s is stale (first difference at line %d): run go generate ./internal/fakedriver/sim", genguard.FileName, line)
	}
}

func TestDriverKey(t *testing.T) {
	cfg, err := ParseConfig([]byte("profile: h100\ndriver: R535\n"), "x.yaml")
	if err != nil || cfg.Driver != "R535" {
		t.Fatalf("ParseConfig: %+v %v", cfg, err)
	}
	_, err = ParseConfig([]byte("profile: h100\ndriver: R999\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), `x.yaml: driver "R999" is not a known driver branch (one of R470, `) {
		t.Fatalf("unknown branch: %v", err)
	}
	if _, err := New(Config{Profile: "h100", Driver: "R1"}); err == nil {
		t.Fatal("New accepted driver R1")
	}
}

func TestDriverVersionsFollowBranch(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", Driver: "R535"})
	if v, _ := s.SystemGetDriverVersion(); v != "535.54.03" {
		t.Errorf("driver version %q", v)
	}
	if v, _ := s.SystemGetNVMLVersion(); v != "12.535.54.03" {
		t.Errorf("NVML version %q", v)
	}
	if v, _ := s.SystemGetCudaDriverVersion(); v != 12020 {
		t.Errorf("CUDA version %d", v)
	}
	plain := newSim(t, Config{Profile: "h100"})
	if v, _ := plain.SystemGetDriverVersion(); v != DriverVersion {
		t.Errorf("without a branch: driver version %q", v)
	}
}

func TestLookupSymbolFollowsBranch(t *testing.T) {
	for _, tc := range []struct {
		driver, symbol string
		found          bool
	}{
		{"", "nvmlGpmQueryDeviceSupport", true},
		{"", "nvmlNoSuchFunction", true}, // no branch: every symbol, as before
		{"R470", "nvmlGpmQueryDeviceSupport", false},
		{"R470", "nvmlDeviceGetName", true},
		{"R525", "nvmlGpmQueryDeviceSupport", true},
		{"R510", "nvmlDeviceGetCurrentClocksEventReasons", false},
		{"R550", "nvmlDeviceGetCurrentClocksEventReasons", true},
	} {
		s := newSim(t, Config{Profile: "h100", Driver: tc.driver})
		err := s.Extensions().LookupSymbol(tc.symbol)
		if (err == nil) != tc.found {
			t.Errorf("driver %q LookupSymbol(%s) = %v, want found=%v", tc.driver, tc.symbol, err, tc.found)
		}
		if err != nil && !strings.Contains(err.Error(), "undefined symbol: "+tc.symbol) {
			t.Errorf("error %q does not name the symbol", err)
		}
		// The guarded library answers the same.
		if lerr := s.Library().Extensions().LookupSymbol(tc.symbol); (lerr == nil) != (err == nil) {
			t.Errorf("driver %q: Library().Extensions() disagrees: %v vs %v", tc.driver, lerr, err)
		}
	}
}

func TestUnknownFieldIDsAnswerInvalidArgument(t *testing.T) {
	for _, tc := range []struct {
		driver string
		want   nvml.Return
	}{
		{"R550", nvml.ERROR_INVALID_ARGUMENT}, // PCIe byte counters came with R570's header
		{"R570", nvml.SUCCESS},
		{"", nvml.SUCCESS},
	} {
		s := newSim(t, Config{Profile: "h100", Driver: tc.driver, PinTime: pinAt(time.Hour)})
		values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_PCIE_COUNT_TX_BYTES}, {FieldId: nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION}}
		if r := handle(t, s, 0).GetFieldValues(values); r != nvml.SUCCESS {
			t.Fatalf("driver %q: GetFieldValues: %v", tc.driver, r)
		}
		if got := nvml.Return(values[0].NvmlReturn); got != tc.want {
			t.Errorf("driver %q: field 197 answered %v, want %v", tc.driver, got, tc.want)
		}
		if got := nvml.Return(values[1].NvmlReturn); got != nvml.SUCCESS {
			t.Errorf("driver %q: energy field answered %v", tc.driver, got)
		}
	}
}

// mustPanicMissing runs call and returns the MissingFunctionError it panics with.
func mustPanicMissing(t *testing.T, what string, call func()) *MissingFunctionError {
	t.Helper()
	var got any
	func() {
		defer func() { got = recover() }()
		call()
	}()
	var mf *MissingFunctionError
	if err, ok := got.(error); !ok || !errors.As(err, &mf) {
		t.Fatalf("%s: want a MissingFunctionError panic, got %v", what, got)
	}
	return mf
}

func TestGuardPanicsOnFunctionsTheBranchLacks(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", Driver: "R470", PinTime: pinAt(time.Minute)})
	lib := s.Library()
	dev, r := lib.DeviceGetHandleByIndex(0)
	if r != nvml.SUCCESS {
		t.Fatal(r)
	}
	mf := mustPanicMissing(t, "Device.GpmQueryDeviceSupport", func() { dev.GpmQueryDeviceSupport() })
	if mf.Symbol != "nvmlGpmQueryDeviceSupport" || mf.Branch != "R470" || mf.Method != "Device.GpmQueryDeviceSupport" {
		t.Errorf("panic value %+v", mf)
	}
	if !strings.Contains(mf.Error(), "undefined symbol: nvmlGpmQueryDeviceSupport") {
		t.Errorf("message %q", mf.Error())
	}
	mustPanicMissing(t, "GpmQueryDeviceSupport", func() { lib.GpmQueryDeviceSupport(dev) })
	mustPanicMissing(t, "Device.GetMemoryInfo_v2", func() { dev.GetMemoryInfo_v2() })
	mustPanicMissing(t, "Device.GetCurrentClocksEventReasons", func() { dev.GetCurrentClocksEventReasons() })
	want := "Device.GpmQueryDeviceSupport: nvmlGpmQueryDeviceSupport,GpmQueryDeviceSupport: nvmlGpmQueryDeviceSupport," +
		"Device.GetMemoryInfo_v2: nvmlDeviceGetMemoryInfo_v2,Device.GetCurrentClocksEventReasons: nvmlDeviceGetCurrentClocksEventReasons"
	if got := strings.Join(s.MissingFunctionCalls(), ","); got != want {
		t.Errorf("MissingFunctionCalls:\n got %s\nwant %s", got, want)
	}

	// What R470 has answers exactly as the simulator does.
	raw := handle(t, s, 0)
	for name, pair := range map[string][2]string{
		"name":        {pair(dev.GetName()), pair(raw.GetName())},
		"temperature": {pair(dev.GetTemperature(nvml.TEMPERATURE_GPU)), pair(raw.GetTemperature(nvml.TEMPERATURE_GPU))},
		"memory":      {pair(lib.DeviceGetMemoryInfo(dev)), pair(raw.GetMemoryInfo())},
		"throttle":    {pair(dev.GetCurrentClocksThrottleReasons()), pair(raw.GetCurrentClocksThrottleReasons())},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s through the guard %s, directly %s", name, pair[0], pair[1])
		}
	}
	again, _ := lib.DeviceGetHandleByIndex(0)
	if again != dev {
		t.Error("the guard handed out two different wrappers for one device")
	}
}

// Handles inside results (event data, GPM samples, MIG instances) are
// guarded and compare equal to the handles the caller already holds.
func TestGuardKeepsHandleIdentity(t *testing.T) {
	// The XID happens after registration: one from before is not delivered.
	at := Duration(2 * time.Minute)
	s := newSim(t, Config{Profile: "h100", Driver: "R580", PinTime: pinAt(time.Minute),
		Faults: []Fault{{GPU: 0, XID: 79, At: &at}}})
	lib := s.Library()
	dev, _ := lib.DeviceGetHandleByIndex(0)
	set, r := lib.EventSetCreate()
	if r != nvml.SUCCESS {
		t.Fatal(r)
	}
	if r := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	s.SetElapsed(at.D())
	ev, r := set.Wait(1000)
	if r != nvml.SUCCESS || ev.Device != dev || ev.EventData != 79 {
		t.Fatalf("Wait: %+v %v (device equal: %v)", ev, r, ev.Device == dev)
	}
	if r := set.Free(); r != nvml.SUCCESS {
		t.Error(r)
	}
	s1, _ := lib.GpmSampleAlloc()
	s2, _ := lib.GpmSampleAlloc()
	if r := lib.GpmSampleGet(dev, s1); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	s.SetElapsed(2 * time.Minute)
	if r := s2.Get(dev); r != nvml.SUCCESS {
		t.Fatal(r)
	}
	m := nvml.GpmMetricsGetType{Version: nvml.GPM_METRICS_GET_VERSION, NumMetrics: 1, Sample1: s1, Sample2: s2}
	m.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
	if r := lib.GpmMetricsGet(&m); r != nvml.SUCCESS || m.Metrics[0].NvmlReturn != uint32(nvml.SUCCESS) {
		t.Fatalf("GpmMetricsGet: %v %v", r, nvml.Return(m.Metrics[0].NvmlReturn))
	}
	if m.Sample1 != s1 || m.Sample2 != s2 {
		t.Error("GpmMetricsGet left the simulator's own samples in the caller's struct")
	}
}
