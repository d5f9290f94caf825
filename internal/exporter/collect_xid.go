package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The XID collector: critical error events by code. The backend counts
// them in its own event goroutine; this only renders the counts. They stay
// on a GPU that is down: the XID that announced the loss (79, fallen off
// the bus) is the one an alert on increase(gpu_xid_events_total) must see,
// and the series vanishing with it would hide it.
func init() {
	registerCollector(snapshot.GroupXID, collector{device: collectXID, alsoDown: true})
}

func collectXID(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	devOpt(em, mXIDEvents, d.XIDEvents)
	devOpt(em, mXIDLast, d.XIDLastCode)
	for _, x := range d.XIDErrors {
		em.dev1(mXID, float64(x.Count), utoa(x.XID))
	}
}
