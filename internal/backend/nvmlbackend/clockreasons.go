//go:build cgo

package nvmlbackend

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// currentClockEventReasons reads the active clock-event reasons with the
// call the driver has: GetCurrentClocksEventReasons (R535+) or, on older
// drivers, GetCurrentClocksThrottleReasons, which reports the same bits.
func (d *deviceReader) currentClockEventReasons() (uint64, bool) {
	call, ok := d.r.caps.clockEventReasonsCall()
	if !ok {
		return 0, false
	}
	var mask uint64
	var ret nvml.Return
	if call == callGetCurrentClocksEventReasons {
		mask, ret = d.dev.GetCurrentClocksEventReasons()
	} else {
		mask, ret = d.dev.GetCurrentClocksThrottleReasons()
	}
	return mask, d.ok(gClockEvents, call.method(), ret)
}

// supportedClockEventReasons reads which reasons the device can report,
// with the same choice of call. A driver with neither call answers as a
// device that cannot tell: ERROR_NOT_SUPPORTED.
func (d *deviceReader) supportedClockEventReasons() (uint64, nvml.Return) {
	call, ok := d.r.caps.supportedClockEventReasonsCall()
	switch {
	case !ok:
		return 0, nvml.ERROR_NOT_SUPPORTED
	case call == callGetSupportedClocksEventReasons:
		return d.dev.GetSupportedClocksEventReasons()
	default:
		return d.dev.GetSupportedClocksThrottleReasons()
	}
}
