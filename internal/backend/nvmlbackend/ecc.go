//go:build cgo

package nvmlbackend

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// readECC reads ECC error counters, retired pages (before Ampere) and
// remapped rows (Ampere and later). Each is absent where the device does
// not support it, and all are absent when ECC is off.
func (d *deviceReader) readECC(e *snapshot.ECC) {
	e.VolatileCorrected = d.eccCount(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	e.VolatileUncorrected = d.eccCount(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	e.AggregateCorrected = d.eccCount(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)
	e.AggregateUncorrected = d.eccCount(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)

	if d.can(callGetRetiredPages) {
		e.RetiredPagesSingleBit = d.retiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
		e.RetiredPagesDoubleBit = d.retiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	}
	if d.can(callGetRetiredPagesPendingStatus) {
		if pending, ret := d.dev.GetRetiredPagesPendingStatus(); d.ok(gECC, "GetRetiredPagesPendingStatus", ret) {
			e.RetiredPagesPending = snapshot.Some(pending == nvml.FEATURE_ENABLED)
		}
	}

	if d.can(callGetRemappedRows) {
		if correctable, uncorrectable, pending, failure, ret := d.dev.GetRemappedRows(); d.ok(gECC, "GetRemappedRows", ret) {
			e.RemappedRowsCorrectable = snapshot.Some(uint64(max(correctable, 0)))
			e.RemappedRowsUncorrectable = snapshot.Some(uint64(max(uncorrectable, 0)))
			e.RemappedRowsPending = snapshot.Some(pending)
			e.RemappedRowsFailure = snapshot.Some(failure)
		}
	}
}

// retiredPages counts the pages retired for cause (retired_pages.go); a
// count the driver never let fit is an ecc group error for this GPU, and
// the count is absent.
func (d *deviceReader) retiredPages(cause nvml.PageRetirementCause) snapshot.Opt[uint64] {
	n, ret, tooLong := countRetiredPages(d.dev, cause)
	if tooLong != nil {
		d.out.stats.fail(gECC, fmt.Errorf("gpu %d: GetRetiredPages(%s): %w to all of %d calls (the driver last asked for %d pages; at most %d are offered): its retired pages are unknown",
			d.index, retirementCauseName(cause), nvmlErr(ret), tooLong.tries, tooLong.asked, maxRetiredPages))
		return snapshot.Opt[uint64]{}
	}
	if !d.ok(gECC, "GetRetiredPages", ret) {
		return snapshot.Opt[uint64]{}
	}
	return snapshot.Some(n)
}

// retirementCauseName names a cause as gpu_retired_pages' cause label does.
func retirementCauseName(cause nvml.PageRetirementCause) string {
	switch cause {
	case nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
		return "multiple_single_bit"
	case nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
		return "double_bit"
	}
	return fmt.Sprint(int(cause))
}

func (d *deviceReader) eccCount(kind nvml.MemoryErrorType, counter nvml.EccCounterType) snapshot.Opt[uint64] {
	if d.can(callGetTotalEccErrors) {
		if n, ret := d.dev.GetTotalEccErrors(kind, counter); d.ok(gECC, "GetTotalEccErrors", ret) {
			return snapshot.Some(n)
		}
	}
	return snapshot.Opt[uint64]{}
}
