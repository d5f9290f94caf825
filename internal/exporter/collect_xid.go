package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The XID collector: critical error events by code. The backend counts
// them in its own event goroutine; this only renders the counts.
func init() {
	registerCollector(snapshot.GroupXID, collector{device: collectXID, whileDown: true})
}

func collectXID(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	devOpt(em, mXIDEvents, d.XIDEvents)
	devOpt(em, mXIDLast, d.XIDLastCode)
	for _, x := range d.XIDErrors {
		em.dev1(mXID, float64(x.Count), utoa(x.XID))
	}
}
