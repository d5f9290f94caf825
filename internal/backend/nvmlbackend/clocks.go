//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

var clockDomains = [...]struct {
	name string
	typ  nvml.ClockType
}{
	{"graphics", nvml.CLOCK_GRAPHICS},
	{"sm", nvml.CLOCK_SM},
	{"memory", nvml.CLOCK_MEM},
	{"video", nvml.CLOCK_VIDEO},
}

const hertzPerMHz = 1e6

// readClocks reads current and maximum clock of each domain, and the
// performance state.
func (d *deviceReader) readClocks() {
	dev := &d.out.device
	for _, domain := range clockDomains {
		c := snapshot.Clock{Type: domain.name}
		if d.can(callGetClockInfo) {
			if mhz, ret := d.dev.GetClockInfo(domain.typ); d.ok(gClocks, "GetClockInfo", ret) {
				c.Current = snapshot.Some(float64(mhz) * hertzPerMHz)
			}
		}
		if d.can(callGetMaxClockInfo) {
			if mhz, ret := d.dev.GetMaxClockInfo(domain.typ); d.ok(gClocks, "GetMaxClockInfo", ret) {
				c.Max = snapshot.Some(float64(mhz) * hertzPerMHz)
			}
		}
		if c.Current.Valid || c.Max.Valid {
			if dev.Clocks == nil {
				dev.Clocks = make([]snapshot.Clock, 0, len(clockDomains))
			}
			dev.Clocks = append(dev.Clocks, c)
		}
	}
	if d.can(callGetPerformanceState) {
		if p, ret := d.dev.GetPerformanceState(); d.ok(gClocks, "GetPerformanceState", ret) && p <= nvml.PSTATE_15 {
			dev.PState = snapshot.Some(int(p))
		}
	}
}

// clockEventReasons are the reasons NVML reports as a bitmask, in bit order.
// go-nvml names some of them ClocksThrottleReason* (the pre-535 name) and
// some ClocksEventReason*; the bits are the same.
var clockEventReasons = [...]struct {
	name string
	bit  uint64
}{
	{"gpu_idle", nvml.ClocksEventReasonGpuIdle},
	{"applications_clocks_setting", nvml.ClocksEventReasonApplicationsClocksSetting},
	{"sw_power_cap", nvml.ClocksEventReasonSwPowerCap},
	{"hw_slowdown", nvml.ClocksThrottleReasonHwSlowdown},
	{"sync_boost", nvml.ClocksEventReasonSyncBoost},
	{"sw_thermal_slowdown", nvml.ClocksEventReasonSwThermalSlowdown},
	{"hw_thermal_slowdown", nvml.ClocksThrottleReasonHwThermalSlowdown},
	{"hw_power_brake_slowdown", nvml.ClocksThrottleReasonHwPowerBrakeSlowdown},
	{"display_clock_setting", nvml.ClocksEventReasonDisplayClockSetting},
}

// readClockEvents reports every reason the device supports with whether it
// is active now; nil when the device cannot report reasons.
func (d *deviceReader) readClockEvents() []snapshot.ClockEvent {
	mask, ok := d.currentClockEventReasons()
	if !ok {
		return nil
	}
	events := make([]snapshot.ClockEvent, len(clockEventReasons))
	for i, reason := range clockEventReasons {
		events[i] = snapshot.ClockEvent{Reason: reason.name, Active: mask&reason.bit != 0}
	}
	return d.supportedClockEvents(events)
}
