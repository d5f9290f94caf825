//go:build cgo

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
	// The traffic of every link, for the rate over all of them; complete
	// only when every link's two counters answered.
	var traffic uint64
	var newest uint64
	complete := true
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
		for _, f := range [...]struct {
			id  uint32
			dst *snapshot.Opt[uint64]
		}{{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, &l.TxBytes}, {nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, &l.RxBytes}} {
			v, ok := d.field(gNVLink, f.id, uint32(link))
			n, isUint := fieldUint(v)
			if !ok || !isUint {
				complete = false
				continue
			}
			*f.dst = snapshot.Some(n * 1024)
			traffic += n * 1024
			newest = max(newest, uint64(v.Timestamp))
		}
		d.nvlinkErrors(&l)
		out = append(out, l)
	}
	if complete && newest > 0 {
		d.out.device.NVLinkBytesPerSecond = d.st.nvlinkTraffic.rate(traffic, newest)
	} else {
		d.st.nvlinkTraffic = counterSample{}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// counterSample is one read of a byte counter, to turn the next into a rate.
type counterSample struct {
	bytes, micros uint64 // micros: NVML's timestamp of the read
	valid         bool
}

// rate records a new read and returns the bytes per second since the
// previous one; absent for the first read, when the timestamps do not move
// forward, and when the counter went down (a driver reload or a link
// reset), which starts over.
func (c *counterSample) rate(bytes, micros uint64) snapshot.Opt[float64] {
	prev := *c
	*c = counterSample{bytes: bytes, micros: micros, valid: true}
	if !prev.valid || micros <= prev.micros || bytes < prev.bytes {
		return snapshot.Opt[float64]{}
	}
	return snapshot.Some(float64(bytes-prev.bytes) / (float64(micros-prev.micros) / 1e6))
}
