package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The temperature collector: die and memory temperatures and the
// thresholds they are compared against.
func init() {
	registerCollector(snapshot.GroupTemperature, collector{device: collectTemperature})
}

func collectTemperature(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	t := &d.Temperature
	devOpt(em, mTempGPU, t.GPU)
	devOpt(em, mTempMemory, t.Memory)
	devOpt1(em, mTempThreshold, t.SlowdownThreshold, "slowdown")
	devOpt1(em, mTempThreshold, t.ShutdownThreshold, "shutdown")
	devOpt1(em, mTempThreshold, t.MemoryMaxThreshold, "memory_max")
}
