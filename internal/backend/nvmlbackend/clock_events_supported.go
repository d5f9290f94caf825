//go:build cgo

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
		mask, ret := d.supportedClockEventReasons()
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
