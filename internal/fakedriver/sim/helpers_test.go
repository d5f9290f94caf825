//go:build cgo

package sim

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// newSim builds and initialises a simulator, failing the test on error.
func newSim(t testing.TB, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	if r := s.Init(); r != nvml.SUCCESS {
		t.Fatalf("Init: %v", r)
	}
	return s
}

func pinAt(d time.Duration) *Duration { v := Duration(d); return &v }

func handle(t testing.TB, s *Sim, i int) nvml.Device {
	t.Helper()
	d, r := s.DeviceGetHandleByIndex(i)
	if r != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex(%d): %v", i, r)
	}
	return d
}

// fieldULL reads one unsigned field value, checking NVML's encoding.
func fieldULL(t testing.TB, d nvml.Device, id, scope uint32) (uint64, nvml.Return) {
	t.Helper()
	v := []nvml.FieldValue{{FieldId: id, ScopeId: scope}}
	if r := d.GetFieldValues(v); r != nvml.SUCCESS {
		return 0, r
	}
	if r := nvml.Return(v[0].NvmlReturn); r != nvml.SUCCESS {
		return 0, r
	}
	switch nvml.ValueType(v[0].ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(v[0].Value[:4])), nvml.SUCCESS
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return binary.LittleEndian.Uint64(v[0].Value[:]), nvml.SUCCESS
	}
	t.Fatalf("field %d: unexpected value type %d", id, v[0].ValueType)
	return 0, nvml.ERROR_UNKNOWN
}

// dump reads every modelled value of every device through nvml.Interface
// and renders it as text: the same calls an NVML reader makes.
func dump(t testing.TB, s nvml.Interface) string {
	t.Helper()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	n, r := s.DeviceGetCount()
	w("count %d %v", n, r)
	for i := range n {
		d, _ := s.DeviceGetHandleByIndex(i)
		w("== gpu %d", i)
		w("uuid %v", pair(d.GetUUID()))
		w("name %v", pair(d.GetName()))
		w("serial %v", pair(d.GetSerial()))
		w("vbios %v", pair(d.GetVbiosVersion()))
		pci, r := d.GetPciInfo()
		w("pci %s %#x %v", cString(pci.BusId[:]), pci.PciDeviceId, r)
		w("util %v", pair(d.GetUtilizationRates()))
		mem, r := d.GetMemoryInfo_v2()
		w("mem %d %d %d %d %v", mem.Total, mem.Reserved, mem.Used, mem.Free, r)
		w("temp %v", pair(d.GetTemperature(nvml.TEMPERATURE_GPU)))
		w("fan %v", pair(d.GetFanSpeed()))
		w("pstate %v", pair(d.GetPerformanceState()))
		w("power %v", pair(d.GetPowerUsage()))
		w("energy %v", pair(d.GetTotalEnergyConsumption()))
		for _, c := range []nvml.ClockType{nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM, nvml.CLOCK_MEM, nvml.CLOCK_VIDEO} {
			w("clock %d %v max %v", c, pair(d.GetClockInfo(c)), pair(d.GetMaxClockInfo(c)))
		}
		w("reasons %v", pair(d.GetCurrentClocksEventReasons()))
		w("pcie gen %v width %v replay %v", pair(d.GetCurrPcieLinkGeneration()), pair(d.GetCurrPcieLinkWidth()), pair(d.GetPcieReplayCounter()))
		w("ecc %v", pair(d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)))
		for _, f := range []uint32{nvml.FI_DEV_MEMORY_TEMP, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, nvml.FI_DEV_PCIE_COUNT_RX_BYTES, nvml.FI_DEV_NVLINK_LINK_COUNT} {
			v, r := fieldULL(t, d, f, 0)
			w("field %d %d %v", f, v, r)
		}
		v, r := fieldULL(t, d, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 3)
		w("nvlink3 tx %d %v", v, r)
		procs, r := d.GetComputeRunningProcesses()
		w("procs %+v %v", procs, r)
	}
	return b.String()
}

// pair renders a (value, Return) result.
func pair[T any](v T, r nvml.Return) string { return fmt.Sprintf("%v/%v", v, r) }

func cString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
