package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// collectDriver says which driver library gpuwatch loaded and which
// collector groups it cannot fully serve. Both are fixed at start; they are
// series (not only a log line) so that a fleet's old drivers can be found
// with one query: count by (branch) (gpuwatch_driver_info).
func collectDriver(em *emitter, d *snapshot.Driver) {
	if d.Version != "" || d.Library != "" {
		em.global(mDriverInfo, 1, d.Version, d.Branch, d.Library)
	}
	for _, l := range d.Limits {
		em.global(mDriverLimited, 1, l.Group, l.Reason)
	}
}
