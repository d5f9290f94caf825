package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The fan collector. Passively cooled data-centre GPUs have no fan and
// produce no series.
func init() {
	registerCollector(snapshot.GroupFan, collector{device: collectFan})
}

func collectFan(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	devOpt(em, mFan, d.FanSpeed)
}
