package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The PCIe collector: traffic counters, link state and replays.
func init() {
	registerCollector(snapshot.GroupPCIe, collector{device: collectPCIe})
}

func collectPCIe(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	p := &d.PCIe
	devOpt(em, mPCIeTx, p.TxBytes)
	devOpt(em, mPCIeRx, p.RxBytes)
	devOpt(em, mPCIeGen, p.LinkGen)
	devOpt(em, mPCIeWidth, p.LinkWidth)
	devOpt(em, mPCIeMaxGen, p.MaxLinkGen)
	devOpt(em, mPCIeMaxWidth, p.MaxLinkWidth)
	devOpt(em, mPCIeReplays, p.ReplayCounter)
}
