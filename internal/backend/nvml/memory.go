package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// readMemory reads framebuffer and BAR1 memory.
func (d *deviceReader) readMemory(m *snapshot.Memory) {
	m.Total, m.Used, m.Free, m.Reserved = d.readFramebuffer(gMemory, d.dev)
	if d.can(callGetBAR1MemoryInfo) {
		if bar1, ret := d.dev.GetBAR1MemoryInfo(); d.ok(gMemory, "GetBAR1MemoryInfo", ret) {
			m.BAR1Total = snapshot.Some(bar1.Bar1Total)
			m.BAR1Used = snapshot.Some(bar1.Bar1Used)
			m.BAR1Free = snapshot.Some(bar1.Bar1Free)
		}
	}
}

// readFramebuffer reads framebuffer memory of a device or MIG device with
// the v2 call, which also reports the driver-reserved memory (and, unlike
// v1, does not count it as used). go-nvml sets the struct version itself.
// Drivers before R510 lack v2: v1 stands in, and Reserved is absent.
func (d *deviceReader) readFramebuffer(g groupID, dev nvml.Device) (total, used, free, reserved snapshot.Opt[uint64]) {
	if !d.can(callGetMemoryInfoV2) {
		return d.readFramebufferV1(g, dev)
	}
	mem, ret := dev.GetMemoryInfo_v2()
	switch ret {
	case nvml.SUCCESS:
		return snapshot.Some(mem.Total), snapshot.Some(mem.Used), snapshot.Some(mem.Free), snapshot.Some(mem.Reserved)
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		return d.readFramebufferV1(g, dev)
	default:
		d.ok(g, "GetMemoryInfo_v2", ret)
		return
	}
}

func (d *deviceReader) readFramebufferV1(g groupID, dev nvml.Device) (total, used, free, reserved snapshot.Opt[uint64]) {
	if !d.can(callGetMemoryInfo) {
		return
	}
	if v1, ret := dev.GetMemoryInfo(); d.ok(g, "GetMemoryInfo", ret) {
		return snapshot.Some(v1.Total), snapshot.Some(v1.Used), snapshot.Some(v1.Free), reserved
	}
	return
}
