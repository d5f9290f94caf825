package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The ECC collector: error counters and the memory repair state (page
// retirement before Ampere, row remapping from Ampere on).
func init() {
	registerCollector(snapshot.GroupECC, collector{device: collectECC})
}

func collectECC(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	e := &d.ECC
	devOpt2(em, mECCErrors, e.VolatileCorrected, "corrected", "volatile")
	devOpt2(em, mECCErrors, e.VolatileUncorrected, "uncorrected", "volatile")
	devOpt2(em, mECCErrors, e.AggregateCorrected, "corrected", "aggregate")
	devOpt2(em, mECCErrors, e.AggregateUncorrected, "uncorrected", "aggregate")
	devOpt1(em, mRetiredPages, e.RetiredPagesSingleBit, "multiple_single_bit")
	devOpt1(em, mRetiredPages, e.RetiredPagesDoubleBit, "double_bit")
	devOptBool(em, mRetiredPending, e.RetiredPagesPending)
	devOpt1(em, mRemappedRows, e.RemappedRowsCorrectable, "correctable")
	devOpt1(em, mRemappedRows, e.RemappedRowsUncorrectable, "uncorrectable")
	devOptBool(em, mRemapPending, e.RemappedRowsPending)
	devOptBool(em, mRemapFailure, e.RemappedRowsFailure)
}
