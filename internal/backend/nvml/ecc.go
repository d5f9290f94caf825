package nvmlbackend

import (
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
		if pages, ret := d.dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS); d.ok(gECC, "GetRetiredPages", ret) {
			e.RetiredPagesSingleBit = snapshot.Some(uint64(len(pages)))
		}
	}
	if d.can(callGetRetiredPages) {
		if pages, ret := d.dev.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); d.ok(gECC, "GetRetiredPages", ret) {
			e.RetiredPagesDoubleBit = snapshot.Some(uint64(len(pages)))
		}
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

func (d *deviceReader) eccCount(kind nvml.MemoryErrorType, counter nvml.EccCounterType) snapshot.Opt[uint64] {
	if d.can(callGetTotalEccErrors) {
		if n, ret := d.dev.GetTotalEccErrors(kind, counter); d.ok(gECC, "GetTotalEccErrors", ret) {
			return snapshot.Some(n)
		}
	}
	return snapshot.Opt[uint64]{}
}
