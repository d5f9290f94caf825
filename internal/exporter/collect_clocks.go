package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The clocks collector: current and maximum clock per domain, and the
// performance state that selects them.
func init() {
	registerCollector(snapshot.GroupClocks, collector{device: collectClocks})
}

func collectClocks(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	devOpt(em, mPState, d.PState)
	for i := range d.Clocks {
		c := &d.Clocks[i]
		devOpt1(em, mClock, c.Current, c.Type)
		devOpt1(em, mClockMax, c.Max, c.Type)
	}
}
