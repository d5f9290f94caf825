package sim

import (
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
// grow memory (moq mocks record every call they answer).
func TestNoGrowthOverManyScrapes(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute)})
	fields := scrapeFields()
	for range 200 {
		for i := range 8 {
			readDevice(handle(t, s, i), fields)
		}
	}
	if n := len(s.devices[0].Device.GetPowerUsageCalls()) + len(s.devices[0].Device.GetUtilizationRatesCalls()); n != 0 {
		t.Errorf("modelled calls were recorded by the mock (%d)", n)
	}
}
