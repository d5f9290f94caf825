//go:build cgo

package nvmlbackend

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Small hand-made NVML fixtures built on go-nvml's moq mocks. They pin
// exact values, so the tests can check unit conversions and error handling
// precisely; the simulator tests (sim_test.go) check realistic profiles.

// callLog counts NVML calls by method name ("Device.GetPowerUsage").
type callLog struct {
	mu sync.Mutex
	n  map[string]int
}

func newCallLog() *callLog { return &callLog{n: make(map[string]int)} }

func (c *callLog) add(name string) {
	c.mu.Lock()
	c.n[name]++
	c.mu.Unlock()
}

func (c *callLog) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *callLog) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.n {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

var returnType = reflect.TypeFor[nvml.Return]()

// instrument wraps every XxxFunc field of the moq mock *m: a nil one
// answers zero values and ERROR_NOT_SUPPORTED, as a device without the
// feature would; every call is counted in log as "<kind>.<Method>".
func instrument(m any, kind string, log *callLog) {
	v := reflect.ValueOf(m).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Func || !strings.HasSuffix(f.Name, "Func") {
			continue
		}
		name := kind + "." + strings.TrimSuffix(f.Name, "Func")
		fv := v.Field(i)
		orig := fv.Interface()
		ft := f.Type
		fv.Set(reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
			if log != nil {
				log.add(name)
			}
			if !reflect.ValueOf(orig).IsNil() {
				return reflect.ValueOf(orig).Call(args)
			}
			out := make([]reflect.Value, ft.NumOut())
			for j := range out {
				out[j] = reflect.Zero(ft.Out(j))
				if ft.Out(j) == returnType {
					out[j] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return out
		}))
	}
}

// fakeHost is a mock NVML library serving the given devices.
type fakeHost struct {
	*mock.Interface
	log     *callLog
	devices []nvml.Device

	// GPM: every sample taken gets a sequence number; GpmMetricsGet checks
	// it is asked about an older and a newer sample.
	gpmMu  sync.Mutex
	gpmSeq map[nvml.GpmSample]int
	seq    int
	freed  int

	// events feeds the event set's Wait.
	events chan nvml.EventData
}

func newFakeHost(devices ...nvml.Device) *fakeHost {
	h := &fakeHost{
		log:     newCallLog(),
		devices: devices,
		gpmSeq:  make(map[nvml.GpmSample]int),
		events:  make(chan nvml.EventData, 16),
	}
	h.Interface = &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) {
			return "550.90.07", nvml.SUCCESS
		},
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		SystemGetNVMLVersionFunc: func() (string, nvml.Return) {
			return "12.550.90.07", nvml.SUCCESS
		},
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(h.devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(h.devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return h.devices[i], nvml.SUCCESS
		},
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			s := &mock.GpmSample{}
			s.FreeFunc = func() nvml.Return {
				h.gpmMu.Lock()
				h.freed++
				h.gpmMu.Unlock()
				return nvml.SUCCESS
			}
			return s, nvml.SUCCESS
		},
		GpmMetricsGetFunc: func(req *nvml.GpmMetricsGetType) nvml.Return {
			h.gpmMu.Lock()
			older, ok1 := h.gpmSeq[req.Sample1]
			newer, ok2 := h.gpmSeq[req.Sample2]
			h.gpmMu.Unlock()
			if !ok1 || !ok2 || older >= newer {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			for i := range req.NumMetrics {
				m := &req.Metrics[i]
				m.NvmlReturn = uint32(nvml.SUCCESS)
				m.Value = gpmPercent(nvml.GpmMetricId(m.MetricId))
			}
			return nvml.SUCCESS
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			set := &mock.EventSet{
				WaitFunc: func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
					select {
					case e := <-h.events:
						return e, nvml.SUCCESS
					case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
						return nvml.EventData{}, nvml.ERROR_TIMEOUT
					}
				},
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}
			return set, nvml.SUCCESS
		},
	}
	instrument(h.Interface, "Interface", h.log)
	return h
}

// gpmPercent is the fixture's answer for each GPM metric, in percent.
func gpmPercent(id nvml.GpmMetricId) float64 {
	switch id {
	case nvml.GPM_METRIC_SM_UTIL:
		return 80
	case nvml.GPM_METRIC_SM_OCCUPANCY:
		return 40
	case nvml.GPM_METRIC_ANY_TENSOR_UTIL:
		return 30
	case nvml.GPM_METRIC_DRAM_BW_UTIL:
		return 25
	case nvml.GPM_METRIC_FP16_UTIL:
		return 20
	case nvml.GPM_METRIC_FP32_UTIL:
		return 10
	case nvml.GPM_METRIC_FP64_UTIL:
		return 5
	case nvml.GPM_METRIC_GRAPHICS_UTIL:
		return 85
	case nvml.GPM_METRIC_PCIE_TX_PER_SEC: // MiB/s
		return 1024
	case nvml.GPM_METRIC_PCIE_RX_PER_SEC:
		return 2048
	case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
		return 512
	case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
		return 256
	}
	return 0
}

// takeSample records a GPM sample as taken now.
func (h *fakeHost) takeSample(s nvml.GpmSample) nvml.Return {
	h.gpmMu.Lock()
	defer h.gpmMu.Unlock()
	h.seq++
	h.gpmSeq[s] = h.seq
	return nvml.SUCCESS
}

const (
	gib = 1 << 30
	mib = 1 << 20
)

func fieldValueUint(id, scope uint32, v uint64) nvml.FieldValue {
	fv := nvml.FieldValue{FieldId: id, ScopeId: scope, ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)}
	for i := range 8 {
		fv.Value[i] = byte(v >> (8 * i))
	}
	return fv
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := range len(s) {
		b[i] = int8(s[i])
	}
	return b
}

// newFakeH100 is a Hopper data-centre GPU with every feature: NVLink (18
// links), ECC with remapped rows, GPM, no fans. mods change it before the
// call counting is wired in (a Func replaced afterwards is not counted).
func newFakeH100(h *fakeHost, index int, mods ...func(*mock.Device)) *mock.Device {
	d := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) {
			return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", index), nvml.SUCCESS
		},
		GetNameFunc:         func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetBrandFunc:        func() (nvml.BrandType, nvml.Return) { return nvml.BRAND_NVIDIA, nvml.SUCCESS },
		GetArchitectureFunc: func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_HOPPER, nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID(fmt.Sprintf("00000000:%02X:00.0", 0x18+index))}, nvml.SUCCESS
		},
		GetSerialFunc:                func() (string, nvml.Return) { return fmt.Sprintf("165012345678%d", index), nvml.SUCCESS },
		GetVbiosVersionFunc:          func() (string, nvml.Return) { return "96.00.74.00.01", nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) { return 9, 0, nvml.SUCCESS },
		GetPersistenceModeFunc:       func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS },
		GetComputeModeFunc:           func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS },
		GetMigModeFunc:               func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS },
		GetEccModeFunc: func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
		},

		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 75, Memory: 40}, nvml.SUCCESS
		},
		GetEncoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 0, 167000, nvml.SUCCESS },
		GetDecoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 5, 167000, nvml.SUCCESS },

		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 80 * gib, Reserved: 512 * mib, Used: 10 * gib, Free: 80*gib - 512*mib - 10*gib}, nvml.SUCCESS
		},
		GetBAR1MemoryInfoFunc: func() (nvml.BAR1Memory, nvml.Return) {
			return nvml.BAR1Memory{Bar1Total: 128 * gib, Bar1Used: 2 * mib, Bar1Free: 128*gib - 2*mib}, nvml.SUCCESS
		},

		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 45, nvml.SUCCESS },
		GetTemperatureThresholdFunc: func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
			switch t {
			case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
				return 90, nvml.SUCCESS
			case nvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
				return 92, nvml.SUCCESS
			case nvml.TEMPERATURE_THRESHOLD_MEM_MAX:
				return 95, nvml.SUCCESS
			}
			return 0, nvml.ERROR_NOT_SUPPORTED
		},
		GetNumFansFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },

		GetClockInfoFunc: func(t nvml.ClockType) (uint32, nvml.Return) {
			return [...]uint32{1755, 1755, 2619, 1545}[t], nvml.SUCCESS
		},
		GetMaxClockInfoFunc: func(t nvml.ClockType) (uint32, nvml.Return) {
			return [...]uint32{1980, 1980, 2619, 1755}[t], nvml.SUCCESS
		},
		GetPerformanceStateFunc: func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_0, nvml.SUCCESS },
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
		},

		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return 350125, nvml.SUCCESS },
		GetEnforcedPowerLimitFunc:     func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return 123456789, nvml.SUCCESS },

		GetFieldValuesFunc: func(values []nvml.FieldValue) nvml.Return {
			for i := range values {
				v := &values[i]
				switch v.FieldId {
				case nvml.FI_DEV_MEMORY_TEMP:
					*v = fieldValueUint(v.FieldId, v.ScopeId, 50)
				case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
					*v = fieldValueUint(v.FieldId, v.ScopeId, 1000)
				case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
					*v = fieldValueUint(v.FieldId, v.ScopeId, 2000)
				case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
					*v = fieldValueUint(v.FieldId, v.ScopeId, 10+uint64(v.ScopeId))
				case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
					*v = fieldValueUint(v.FieldId, v.ScopeId, 20+uint64(v.ScopeId))
				default:
					v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return nvml.SUCCESS
		},
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 5, nvml.SUCCESS },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return 5, nvml.SUCCESS },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		GetPcieReplayCounterFunc:      func() (int, nvml.Return) { return 3, nvml.SUCCESS },

		GetTotalEccErrorsFunc: func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
			return [2][2]uint64{{1, 7}, {0, 2}}[kind][counter], nvml.SUCCESS
		},
		GetRemappedRowsFunc: func() (int, int, bool, bool, nvml.Return) { return 2, 0, false, false, nvml.SUCCESS },

		GetNvLinkStateFunc: func(link int) (nvml.EnableState, nvml.Return) {
			switch {
			case link < 17:
				return nvml.FEATURE_ENABLED, nvml.SUCCESS
			case link == 17:
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			}
			return 0, nvml.ERROR_INVALID_ARGUMENT
		},
		GetNvLinkErrorCounterFunc: func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
			return uint64(link*10) + uint64(c), nvml.SUCCESS
		},

		GetSupportedEventTypesFunc: func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		},
		RegisterEventsFunc: func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },

		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
		},
		GpmSampleGetFunc: h.takeSample,
	}
	for _, mod := range mods {
		mod(d)
	}
	instrument(d, "Device", h.log)
	return d
}

// newFakeConsumer is a GeForce card: fans, no ECC, no NVLink, no GPM, no
// memory temperature, no BAR1.
func newFakeConsumer(h *fakeHost, index int) *mock.Device {
	d := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) {
			return fmt.Sprintf("GPU-11111111-0000-0000-0000-%012d", index), nvml.SUCCESS
		},
		GetNameFunc:                  func() (string, nvml.Return) { return "NVIDIA GeForce RTX 4090", nvml.SUCCESS },
		GetBrandFunc:                 func() (nvml.BrandType, nvml.Return) { return nvml.BRAND_GEFORCE_RTX, nvml.SUCCESS },
		GetArchitectureFunc:          func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_ADA, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) { return 8, 9, nvml.SUCCESS },
		GetNumFansFunc:               func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		GetFanSpeed_v2Func: func(fan int) (uint32, nvml.Return) {
			return [...]uint32{30, 50}[fan], nvml.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED // v1 stands in
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 24 * gib, Used: 1 * gib, Free: 23 * gib}, nvml.SUCCESS
		},
		GetFieldValuesFunc: func(values []nvml.FieldValue) nvml.Return {
			for i := range values {
				values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
			return nvml.SUCCESS
		},
		GetPowerUsageFunc: func() (uint32, nvml.Return) { return 95000, nvml.SUCCESS },
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS
		},
	}
	instrument(d, "Device", h.log)
	return d
}
