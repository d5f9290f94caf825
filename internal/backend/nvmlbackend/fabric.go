//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// simFabricInfo is the simulator's handle: go-nvml's GetGpuFabricInfoV
// returns a handler bound to go-nvml's own device type, so the simulator
// answers the C function's call through a method of its own.
type simFabricInfo interface {
	GpuFabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return)
}

// readFabric reads the NVSwitch fabric's health (nvmlDeviceGetGpuFabricInfoV,
// R550 and later): version 3 of the struct, with the health summary, or
// version 2 where the driver does not know version 3. Absent on a GPU
// without fabric (NOT_SUPPORTED, or the state NOT_SUPPORTED), on a handle
// that is neither go-nvml's nor the simulator's (mocks), and for the
// accounting's reader.
func (d *deviceReader) readFabric() snapshot.Fabric {
	if d.r.countersOnly || !d.can(callGetGpuFabricInfoV) {
		return snapshot.Fabric{}
	}
	info, ret, ok := d.fabricInfo()
	if !ok || !d.ok(gNVLink, "GetGpuFabricInfoV", ret) || info.State == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		return snapshot.Fabric{}
	}
	f := snapshot.Fabric{HealthMask: snapshot.Some(uint64(info.HealthMask))}
	if info.HealthSummary != nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED {
		f.HealthSummary = snapshot.Some(uint64(info.HealthSummary))
	}
	return f
}

// fabricInfo calls nvmlDeviceGetGpuFabricInfoV the way the handle allows;
// ok is false for a handle that cannot be asked. A version 2 answer has
// HealthSummary 0, not supported.
func (d *deviceReader) fabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return, bool) {
	if h, ok := d.dev.(simFabricInfo); ok {
		info, ret := h.GpuFabricInfo()
		return info, ret, true
	}
	if _, ok := goNVMLHandle(d.dev); !ok {
		return nvml.GpuFabricInfo_v3{}, nvml.ERROR_NOT_SUPPORTED, false
	}
	handler := d.dev.GetGpuFabricInfoV()
	info, ret := handler.V3()
	if ret != nvml.ERROR_ARGUMENT_VERSION_MISMATCH {
		return info, ret, true
	}
	v2, ret := handler.V2()
	return nvml.GpuFabricInfo_v3{Version: v2.Version, ClusterUuid: v2.ClusterUuid, Status: v2.Status,
		CliqueId: v2.CliqueId, State: v2.State, HealthMask: v2.HealthMask}, ret, true
}
