package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The health verdicts: rendered from Snapshot.Health, which the health
// stage (internal/health) fills in; nothing when it does not run. A GPU
// whose verdict is unknown has no gpu_health_status series: absent is not
// 0, and 0 means failed.
func collectHealth(em *emitter, h *snapshot.Health, d *snapshot.Device, i int) {
	if h == nil || i >= len(h.GPUs) || h.GPUs[i].GPU != d.Index {
		return
	}
	g := &h.GPUs[i]
	if g.Status != snapshot.HealthUnknown {
		em.dev(mHealth, bool01(g.Status != snapshot.HealthFail))
		em.dev(mHealthWarn, bool01(g.Status == snapshot.HealthWarn))
	}
	for _, c := range g.Checks {
		em.dev1(mHealthCheck, bool01(c.Status != snapshot.HealthOK), c.Name)
	}
}

func collectHealthNode(em *emitter, h *snapshot.Health) {
	if h == nil {
		return
	}
	for _, c := range h.Node {
		em.global(mHealthNodeCheck, bool01(c.Status != snapshot.HealthOK), c.Name)
	}
}
