package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// supportedClockEvents keeps only the reasons the device can report. A
// bit the device cannot raise reads 0 in the current mask, which would
// claim "not throttling for this reason" where the truth is "cannot tell"
// (a data-centre GPU has no display clock, for instance). The supported
// mask is fixed for a device, so it is read once. When the driver cannot
// say (NOT_SUPPORTED, or an older driver), every reason is kept.
func (d *deviceReader) supportedClockEvents(events []snapshot.ClockEvent) []snapshot.ClockEvent {
	st := d.st
	if !st.clockEventsSupportKnown {
		mask, ret := d.supportedClockEventMask()
		switch classify(ret) {
		case succeeded:
			st.clockEventsSupported, st.clockEventsSupportKnown = mask, true
		case absent:
			st.clockEventsSupported, st.clockEventsSupportKnown = nvml.ClocksEventReasonAll, true
		default:
			// Lost GPU or an unexpected error: keep every reason for now
			// and ask again on the next read.
			if !d.ok(gClockEvents, "GetSupportedClocksEventReasons", ret) {
				return events
			}
		}
	}
	out := events[:0]
	for i, e := range events {
		if st.clockEventsSupported&clockEventReasons[i].bit != 0 {
			out = append(out, e)
		}
	}
	return out
}

// supportedClockEventMask asks for the supported reasons by the name the
// loaded library has: nvmlDeviceGetSupportedClocksEventReasons since R535,
// ...ThrottleReasons before (the same bits). go-nvml binds lazily, and
// calling a function the library lacks ends the process, so the names are
// looked up first; without either the answer is NOT_SUPPORTED.
func (d *deviceReader) supportedClockEventMask() (uint64, nvml.Return) {
	switch {
	case d.r.hasSymbol("nvmlDeviceGetSupportedClocksEventReasons"):
		return d.dev.GetSupportedClocksEventReasons()
	case d.r.hasSymbol("nvmlDeviceGetSupportedClocksThrottleReasons"):
		return d.dev.GetSupportedClocksThrottleReasons()
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

// hasSymbol says whether the loaded library exports name. A binding
// without the lookup (a test double) is taken to have everything.
func (r *Reader) hasSymbol(name string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true
		}
	}()
	ext := r.lib.Extensions()
	return ext == nil || ext.LookupSymbol(name) == nil
}
