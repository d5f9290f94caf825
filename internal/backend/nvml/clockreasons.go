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
// with the same choice of call; ok is false when the driver cannot tell.
func (d *deviceReader) supportedClockEventReasons() (uint64, bool) {
	call, ok := d.r.caps.supportedClockEventReasonsCall()
	if !ok {
		return 0, false
	}
	var mask uint64
	var ret nvml.Return
	if call == callGetSupportedClocksEventReasons {
		mask, ret = d.dev.GetSupportedClocksEventReasons()
	} else {
		mask, ret = d.dev.GetSupportedClocksThrottleReasons()
	}
	return mask, d.ok(gClockEvents, call.method(), ret)
}
