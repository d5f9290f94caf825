//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// readTemperature reads GPU and memory temperature and the thresholds.
// Memory (HBM) temperature has no dedicated call; it comes from the batched
// field values.
func (d *deviceReader) readTemperature(t *snapshot.Temperature) {
	if d.can(callGetTemperature) {
		if c, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU); d.ok(gTemperature, "GetTemperature", ret) {
			t.GPU = snapshot.Some(float64(c))
		}
	}
	if v, ok := d.field(gTemperature, nvml.FI_DEV_MEMORY_TEMP, 0); ok {
		// NVML reports 0 for memory temperature on boards without a sensor
		// on some drivers; a real HBM die is never at 0 °C while running.
		if c, ok := fieldNumber(v); ok && c > 0 {
			t.Memory = snapshot.Some(c)
		}
	}
	t.SlowdownThreshold = d.threshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)
	t.ShutdownThreshold = d.threshold(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN)
	t.MemoryMaxThreshold = d.threshold(nvml.TEMPERATURE_THRESHOLD_MEM_MAX)
}

func (d *deviceReader) threshold(which nvml.TemperatureThresholds) snapshot.Opt[float64] {
	if d.can(callGetTemperatureThreshold) {
		if c, ret := d.dev.GetTemperatureThreshold(which); d.ok(gTemperature, "GetTemperatureThreshold", ret) {
			return snapshot.Some(float64(c))
		}
	}
	return snapshot.Opt[float64]{}
}

// readFanSpeed averages the speed of every fan, as a ratio of its maximum.
// Drivers before R460 lack the per-fan calls: the single GetFanSpeed
// stands in. Passively cooled boards (most data-centre GPUs) report no
// fans, and the reading stays absent.
func (d *deviceReader) readFanSpeed() snapshot.Opt[float64] {
	if !d.r.caps.perFanSpeeds() {
		return d.readSingleFanSpeed()
	}
	n, ret := d.dev.GetNumFans()
	if !d.ok(gFan, "GetNumFans", ret) || n <= 0 {
		if d.gone != "" || (ret == nvml.SUCCESS && n <= 0) {
			return snapshot.Opt[float64]{}
		}
		return d.readSingleFanSpeed()
	}
	var sum float64
	read := 0
	for fan := range n {
		if s, ret := d.dev.GetFanSpeed_v2(fan); d.ok(gFan, "GetFanSpeed_v2", ret) {
			sum += percent(s)
			read++
		}
	}
	if read == 0 {
		return snapshot.Opt[float64]{}
	}
	return snapshot.Some(sum / float64(read))
}

func (d *deviceReader) readSingleFanSpeed() snapshot.Opt[float64] {
	if !d.can(callGetFanSpeed) {
		return snapshot.Opt[float64]{}
	}
	if s, ret := d.dev.GetFanSpeed(); d.ok(gFan, "GetFanSpeed", ret) {
		return snapshot.Some(percent(s))
	}
	return snapshot.Opt[float64]{}
}
