//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// readMemory reads framebuffer and BAR1 memory.
func (d *deviceReader) readMemory(m *snapshot.Memory) {
	m.Total, m.Used, m.Free, m.Reserved = d.readFramebuffer(gMemory, d.dev)
	// The accounting's reader (CountersOnly) reads the memory for the job
	// records, which use the framebuffer's size alone.
	if !d.r.countersOnly && d.can(callGetBAR1MemoryInfo) {
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
	fb, ret := d.framebuffer(dev)
	if fb.call == "" || !d.ok(g, fb.call, ret) {
		return
	}
	if fb.v2 {
		reserved = snapshot.Some(fb.Reserved)
	}
	return snapshot.Some(fb.Total), snapshot.Some(fb.Used), snapshot.Some(fb.Free), reserved
}

// framebufferRead is one framebuffer read: call names the call that
// answered (none: the library has neither), v2 whether it was the v2 one
// (Reserved is then known).
type framebufferRead struct {
	nvml.Memory_v2
	call string
	v2   bool
}

// framebuffer makes readFramebuffer's calls, v2 and, where the library or
// the GPU lacks it, v1, and files nothing: readFramebuffer files a failure,
// the accounting's reader (usedMemory) only needs to know it failed.
func (d *deviceReader) framebuffer(dev nvml.Device) (framebufferRead, nvml.Return) {
	if d.can(callGetMemoryInfoV2) {
		mem, ret := dev.GetMemoryInfo_v2()
		if ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_ARGUMENT_VERSION_MISMATCH {
			return framebufferRead{Memory_v2: mem, call: "GetMemoryInfo_v2", v2: true}, ret
		}
	}
	if !d.can(callGetMemoryInfo) {
		return framebufferRead{}, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	v1, ret := dev.GetMemoryInfo()
	return framebufferRead{Memory_v2: nvml.Memory_v2{Total: v1.Total, Used: v1.Used, Free: v1.Free}, call: "GetMemoryInfo"}, ret
}
