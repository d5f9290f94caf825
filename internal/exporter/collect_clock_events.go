package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The clock-events collector: one 0/1 series per throttle reason, so that
// an alert can name the reason (power cap, thermal, ...).
func init() {
	registerCollector(snapshot.GroupClockEvents, collector{device: collectClockEvents})
}

func collectClockEvents(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	for _, ev := range d.ClockEvents {
		em.dev1(mClockEvent, bool01(ev.Active), ev.Reason)
	}
}
