//go:build cgo

package nvmlbackend

// pcieCounterWrap is where NVML's PCIe byte counters wrap.
// NVML_FI_DEV_PCIE_COUNT_TX_BYTES/RX_BYTES are documented only as "Value
// can be wrapped". Every value seen on real GPUs is below 2^32: an H100 on
// driver 580.159.04 read 4.19e9 (TX) and 3.88e9 (RX) about a minute after
// the driver loaded while idling at about 1 MB/s (bench/device/r580-h100),
// and an L40S 3.0e9 and 3.9e9 (NVIDIA/dcgm-exporter#721). The driver
// reports the low 32 bits of the byte count. At PCIe Gen5 x16 speeds that
// wraps every 70 ms or so.
const pcieCounterWrap = 1 << 32

// wrappingCounter widens a 32-bit hardware counter into a 64-bit one that
// only grows, by adding 2^32 each time a read is lower than the last. It
// is exact while at most one wrap happens between two reads, i.e. while
// less than 4 GiB pass per collection interval; more wraps than that
// cannot be seen and are lost (the counter undercounts). A counter that
// already exceeds 32 bits is passed through: it does not wrap at 2^32.
type wrappingCounter struct {
	last, wraps uint64
	seen        bool
}

func (c *wrappingCounter) widen(raw uint64) uint64 {
	if raw >= pcieCounterWrap || (c.seen && c.last >= pcieCounterWrap) {
		c.last, c.seen, c.wraps = raw, true, 0
		return raw
	}
	if c.seen && raw < c.last {
		c.wraps++
	}
	c.last, c.seen = raw, true
	return c.wraps*pcieCounterWrap + raw
}
