//go:build cgo

package sim

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Retired pages as nvml.h's nvmlDeviceGetRetiredPages gives them: the
// caller offers an array of some capacity (0 queries the count), and the
// driver answers SUCCESS with the addresses when they fit, or
// ERROR_INSUFFICIENT_SIZE and the count it needs. go-nvml's
// GetRetiredPages hides that exchange behind a loop with no bound, so a
// driver whose count keeps growing (the retired_pages_size fault) crashes
// or spins a caller that goes through it. The NVML reader drives this
// form itself, with a bound, and the fake libnvidia-ml.so.1 implements
// nvmlDeviceGetRetiredPages (and _v2) with it, so both doors into the
// simulator answer alike.

// RetiredPagesSized answers one call of nvmlDeviceGetRetiredPages for
// cause: offered a buffer of capacity entries, the page addresses when
// they fit (count is their number), or ERROR_INSUFFICIENT_SIZE and in
// count the entries the driver asks for.
func (d *device) RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) (addresses []uint64, count uint32, ret nvml.Return) {
	pages, r := d.retiredPages(cause)
	if r != nvml.SUCCESS {
		return nil, 0, r
	}
	return fitList(pages, d.retiredPagesSize, capacity)
}

// retiredPages are the addresses of the pages retired for cause; the
// simulated cards that support page retirement have retired none.
func (d *device) retiredPages(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	_, r := d.begin(featRetiredPages)
	if r != nvml.SUCCESS {
		return nil, r
	}
	if cause >= nvml.PAGE_RETIREMENT_CAUSE_COUNT {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return []uint64{}, r
}

// GetRetiredPages lists the retired page addresses as go-nvml's method
// returns them: under the retired_pages_size fault no buffer is ever
// enough, and the answer is the one a bounded caller ends with.
func (d *device) GetRetiredPages(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	pages, r := d.retiredPages(cause)
	if r == nvml.SUCCESS && d.retiredPagesSize != "" {
		return nil, nvml.ERROR_INSUFFICIENT_SIZE
	}
	return pages, r
}

// sizedRetiredPages is a handle with RetiredPagesSized.
type sizedRetiredPages interface {
	RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return)
}

// RetiredPagesSized through the guard: the branch must export
// nvmlDeviceGetRetiredPages.
func (w *guardedDevice) RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return) {
	w.g.check("Device.GetRetiredPages")
	inner, ok := w.inner.(sizedRetiredPages)
	if !ok {
		return nil, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return inner.RetiredPagesSized(cause, capacity)
}
