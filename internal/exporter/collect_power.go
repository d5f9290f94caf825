package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The power collector: draw, the enforced, default, minimum and maximum
// limits, and the energy counter.
func init() {
	registerCollector(snapshot.GroupPower, collector{device: collectPower})
}

func collectPower(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	p := &d.Power
	devOpt(em, mPowerUsage, p.Usage)
	devOpt(em, mPowerLimit, p.EnforcedLimit)
	devOpt(em, mEnergy, p.Energy)
	devOpt(em, mPowerLimitDefault, p.DefaultLimit)
	devOpt(em, mPowerLimitMin, p.MinLimit)
	devOpt(em, mPowerLimitMax, p.MaxLimit)
}
