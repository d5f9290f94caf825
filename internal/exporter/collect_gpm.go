package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The GPM collector: Hopper-and-later profiling ratios of the whole GPU.
func init() {
	registerCollector(snapshot.GroupGPM, collector{device: collectGPM})
}

func collectGPM(em *emitter, _ *snapshot.Snapshot, d *snapshot.Device) {
	g := &d.GPM
	devOpt(em, mGPMSMActive, g.SMActive)
	devOpt(em, mGPMSMOccupancy, g.SMOccupancy)
	devOpt(em, mGPMTensor, g.TensorActive)
	devOpt(em, mGPMDRAM, g.DRAMActive)
	devOpt(em, mGPMFP16, g.FP16Active)
	devOpt(em, mGPMFP32, g.FP32Active)
	devOpt(em, mGPMFP64, g.FP64Active)
	devOpt(em, mGPMGraphics, g.GraphicsActive)
	devOpt(em, mGPMPCIeTx, g.PCIeTxBytesPerSecond)
	devOpt(em, mGPMPCIeRx, g.PCIeRxBytesPerSecond)
	devOpt(em, mGPMNVLinkTx, g.NVLinkTxBytesPerSecond)
	devOpt(em, mGPMNVLinkRx, g.NVLinkRxBytesPerSecond)
}
