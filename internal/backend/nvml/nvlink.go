package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// discoverNVLinks finds, once per device, which link numbers exist: NVML
// answers NOT_SUPPORTED or INVALID_ARGUMENT for links the device does not
// have. Probing all NVLINK_MAX_LINKS on every scrape would waste 36 calls on
// a PCIe card; a device with no links is remembered and never probed again.
// Discovery is repeated only if a probe failed for another reason.
func (d *deviceReader) discoverNVLinks() {
	if d.st.nvlinksKnown {
		return
	}
	if !d.can(callGetNvLinkState) {
		d.st.nvlinksKnown = true
		return
	}
	var links []int
	complete := true
	for link := range nvml.NVLINK_MAX_LINKS {
		_, ret := d.dev.GetNvLinkState(link)
		switch ret {
		case nvml.SUCCESS:
			links = append(links, link)
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
		default:
			complete = false
			if !d.ok(gNVLink, "GetNvLinkState", ret) && d.gone != "" {
				return
			}
		}
	}
	d.st.nvlinks = links
	d.st.nvlinksKnown = complete
}

// nvlinkErrors reads a link's error counters. A switch rather than a table
// of field pointers keeps the link struct on the stack.
func (d *deviceReader) nvlinkErrors(l *snapshot.NVLink) {
	if !d.can(callGetNvLinkErrorCounter) {
		return
	}
	for _, c := range [...]nvml.NvLinkErrorCounter{
		nvml.NVLINK_ERROR_DL_CRC_FLIT, nvml.NVLINK_ERROR_DL_CRC_DATA,
		nvml.NVLINK_ERROR_DL_REPLAY, nvml.NVLINK_ERROR_DL_RECOVERY,
	} {
		n, ret := d.dev.GetNvLinkErrorCounter(l.Link, c)
		if !d.ok(gNVLink, "GetNvLinkErrorCounter", ret) {
			continue
		}
		switch c {
		case nvml.NVLINK_ERROR_DL_CRC_FLIT:
			l.CRCFlitErrors = snapshot.Some(n)
		case nvml.NVLINK_ERROR_DL_CRC_DATA:
			l.CRCDataErrors = snapshot.Some(n)
		case nvml.NVLINK_ERROR_DL_REPLAY:
			l.ReplayErrors = snapshot.Some(n)
		case nvml.NVLINK_ERROR_DL_RECOVERY:
			l.RecoveryErrors = snapshot.Some(n)
		}
	}
}

// readNVLinks reads state, traffic and error counters of every link found
// by discovery; nil when the device has no NVLink.
func (d *deviceReader) readNVLinks() []snapshot.NVLink {
	if len(d.st.nvlinks) == 0 {
		return nil
	}
	out := make([]snapshot.NVLink, 0, len(d.st.nvlinks))
	for _, link := range d.st.nvlinks {
		l := snapshot.NVLink{Link: link}
		state, ret := d.dev.GetNvLinkState(link)
		if !d.ok(gNVLink, "GetNvLinkState", ret) {
			if d.gone != "" {
				return nil
			}
			continue
		}
		l.Active = state == nvml.FEATURE_ENABLED
		// Throughput fields count KiB.
		if v, ok := d.field(gNVLink, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, uint32(link)); ok {
			if n, ok := fieldUint(v); ok {
				l.TxBytes = snapshot.Some(n * 1024)
			}
		}
		if v, ok := d.field(gNVLink, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, uint32(link)); ok {
			if n, ok := fieldUint(v); ok {
				l.RxBytes = snapshot.Some(n * 1024)
			}
		}
		d.nvlinkErrors(&l)
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
