package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The utilization collector: the driver's busy ratios over its sample period.
func init() {
	registerCollector(snapshot.GroupUtilization, collector{device: collectUtilization})
}

func collectUtilization(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	u := &d.Utilization
	devOpt(em, mUtilGPU, u.GPU)
	devOpt(em, mUtilMemory, u.Memory)
	devOpt(em, mUtilEncoder, u.Encoder)
	devOpt(em, mUtilDecoder, u.Decoder)
}
