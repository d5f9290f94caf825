//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// readPCIe reads the PCIe link and traffic. Traffic comes from the byte
// counters in the batched field values, widened past their 32-bit wrap
// (see wrappingCounter); nvmlDeviceGetPcieThroughput is
// never called because it sleeps 20 ms inside the driver to sample.
func (d *deviceReader) readPCIe(p *snapshot.PCIe) {
	if v, ok := d.field(gPCIe, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0); ok {
		if n, ok := fieldUint(v); ok {
			p.TxBytes = snapshot.Some(d.st.pcieTx.widen(n))
		}
	}
	if v, ok := d.field(gPCIe, nvml.FI_DEV_PCIE_COUNT_RX_BYTES, 0); ok {
		if n, ok := fieldUint(v); ok {
			p.RxBytes = snapshot.Some(d.st.pcieRx.widen(n))
		}
	}
	if d.can(callGetCurrPcieLinkGeneration) {
		if n, ret := d.dev.GetCurrPcieLinkGeneration(); d.ok(gPCIe, "GetCurrPcieLinkGeneration", ret) {
			p.LinkGen = snapshot.Some(n)
		}
	}
	if d.can(callGetCurrPcieLinkWidth) {
		if n, ret := d.dev.GetCurrPcieLinkWidth(); d.ok(gPCIe, "GetCurrPcieLinkWidth", ret) {
			p.LinkWidth = snapshot.Some(n)
		}
	}
	if d.can(callGetMaxPcieLinkGeneration) {
		if n, ret := d.dev.GetMaxPcieLinkGeneration(); d.ok(gPCIe, "GetMaxPcieLinkGeneration", ret) {
			p.MaxLinkGen = snapshot.Some(n)
		}
	}
	if d.can(callGetMaxPcieLinkWidth) {
		if n, ret := d.dev.GetMaxPcieLinkWidth(); d.ok(gPCIe, "GetMaxPcieLinkWidth", ret) {
			p.MaxLinkWidth = snapshot.Some(n)
		}
	}
	if d.can(callGetPcieReplayCounter) {
		if n, ret := d.dev.GetPcieReplayCounter(); d.ok(gPCIe, "GetPcieReplayCounter", ret) && n >= 0 {
			p.ReplayCounter = snapshot.Some(uint64(n))
		}
	}
}
