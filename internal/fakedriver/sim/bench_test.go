//go:build cgo

package sim

import (
	"runtime"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// readDevice makes the calls an NVML reader makes on one device per scrape.
func readDevice(d nvml.Device, fields []nvml.FieldValue) {
	d.GetUtilizationRates()
	d.GetEncoderUtilization()
	d.GetDecoderUtilization()
	d.GetMemoryInfo_v2()
	d.GetBAR1MemoryInfo()
	d.GetTemperature(nvml.TEMPERATURE_GPU)
	d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
	d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
	d.GetNumFans()
	d.GetPerformanceState()
	d.GetPowerUsage()
	d.GetEnforcedPowerLimit()
	d.GetTotalEnergyConsumption()
	for c := range nvml.CLOCK_COUNT {
		d.GetClockInfo(c)
		d.GetMaxClockInfo(c)
	}
	d.GetCurrentClocksEventReasons()
	d.GetCurrPcieLinkGeneration()
	d.GetCurrPcieLinkWidth()
	d.GetPcieReplayCounter()
	d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	d.GetRemappedRows()
	for link := range 18 {
		d.GetNvLinkState(link)
		d.GetNvLinkErrorCounter(link, nvml.NVLINK_ERROR_DL_REPLAY)
	}
	d.GetFieldValues(fields)
	d.GetComputeRunningProcesses()
	d.GetProcessUtilization(0)
}

func scrapeFields() []nvml.FieldValue {
	fields := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_MEMORY_TEMP},
		{FieldId: nvml.FI_DEV_PCIE_COUNT_TX_BYTES},
		{FieldId: nvml.FI_DEV_PCIE_COUNT_RX_BYTES},
	}
	for link := range uint32(18) {
		fields = append(fields,
			nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: link},
			nvml.FieldValue{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: link})
	}
	return fields
}

// BenchmarkScrape measures the simulator's share of one scrape: every
// per-device read of a whole host.
func BenchmarkScrape(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		b.Run(profile, func(b *testing.B) {
			s := newSim(b, Config{Profile: profile})
			n, _ := s.DeviceGetCount()
			fields := scrapeFields()
			b.ReportAllocs()
			for b.Loop() {
				for i := range n {
					d, _ := s.DeviceGetHandleByIndex(i)
					readDevice(d, fields)
				}
			}
		})
	}
}

// The simulator keeps no per-call state: reading for a long time must not
// grow the live heap. (go-nvml's moq mocks, which the simulator used to
// embed, recorded every call they answered.)
func TestNoGrowthOverManyScrapes(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute)})
	fields := scrapeFields()
	scrape := func(rounds int) {
		for range rounds {
			for i := range 8 {
				d := handle(t, s, i)
				readDevice(d, fields)
				// An unmodelled call and the library spellings too.
				d.GetBoardPartNumber()
				s.DeviceGetPowerUsage(d)
				s.DeviceGetBoardPartNumber(d)
			}
		}
	}
	scrape(10) // warm up: first-use caches are not growth
	before := liveHeapBytes()
	const rounds = 1000
	scrape(rounds)
	after := liveHeapBytes()
	runtime.KeepAlive(s)
	// A scrape makes dozens of calls per GPU: keeping even one byte per
	// call would grow the heap past the bound over the rounds.
	if after > before && after-before > 64<<10 {
		t.Errorf("live heap grew by %d bytes over %d scrapes of 8 GPUs", after-before, rounds)
	}
}

// liveHeapBytes is the live heap after a full collection.
func liveHeapBytes() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
