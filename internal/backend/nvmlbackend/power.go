//go:build cgo

package nvmlbackend

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// readPower reads power draw, the enforced limit, the default limit and
// the range an administrator may set it in (NVML: milliwatts), and the
// energy counter (NVML: millijoules since the driver was loaded); with
// readMode.countersOnly, the energy counter alone.
func (d *deviceReader) readPower(p *snapshot.Power) {
	if !d.r.countersOnly {
		d.readPowerDraw(p)
	}
	if d.can(callGetTotalEnergyConsumption) {
		if mj, ret := d.dev.GetTotalEnergyConsumption(); d.ok(gPower, "GetTotalEnergyConsumption", ret) {
			p.Energy = snapshot.Some(float64(mj) / 1000)
		}
	}
}

// readPowerDraw reads the power draw and the limits.
func (d *deviceReader) readPowerDraw(p *snapshot.Power) {
	if d.can(callGetPowerUsage) {
		if mw, ret := d.dev.GetPowerUsage(); d.ok(gPower, "GetPowerUsage", ret) {
			p.Usage = snapshot.Some(float64(mw) / 1000)
		}
	}
	if d.can(callGetEnforcedPowerLimit) {
		if mw, ret := d.dev.GetEnforcedPowerLimit(); d.ok(gPower, "GetEnforcedPowerLimit", ret) {
			p.EnforcedLimit = snapshot.Some(float64(mw) / 1000)
		}
	}
	if d.can(callGetPowerManagementDefaultLimit) {
		if mw, ret := d.dev.GetPowerManagementDefaultLimit(); d.ok(gPower, "GetPowerManagementDefaultLimit", ret) {
			p.DefaultLimit = snapshot.Some(float64(mw) / 1000)
		}
	}
	if d.can(callGetPowerManagementLimitConstraints) {
		if minMW, maxMW, ret := d.dev.GetPowerManagementLimitConstraints(); d.ok(gPower, "GetPowerManagementLimitConstraints", ret) {
			p.MinLimit = snapshot.Some(float64(minMW) / 1000)
			p.MaxLimit = snapshot.Some(float64(maxMW) / 1000)
		}
	}
}
