//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The GPU fabric (nvmlDeviceGetGpuFabricInfoV): what the fabric manager
// made of an NVSwitch-connected GPU. nvml.h documents it for Hopper and
// later GPUs whose NVLinks go through NVSwitches; on every other GPU, and
// on a MIG device, the call answers NOT_SUPPORTED, so a reader has nothing
// to report and reports nothing.
//
// go-nvml's GetGpuFabricInfoV returns a handler bound to its own device
// type, which the simulator cannot stand behind: GpuFabricInfo is the
// simulator's form of the C function, which the fake libnvidia-ml.so.1
// answers with and the NVML reader calls on a simulator's handle.

// fabricHealthyMask is the health mask of a GPU whose fabric is healthy:
// bandwidth not degraded, no route recovery in progress, routes healthy,
// no access-timeout recovery, no incorrect configuration (nvml.h's
// NVML_GPU_FABRIC_HEALTH_MASK_* fields at their shifts).
const fabricHealthyMask = nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
	nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION

// fabricDegradedMask is fabricHealthyMask with the bandwidth degraded:
// what a GPU reports when some of its NVLinks to the switches are down.
const fabricDegradedMask = fabricHealthyMask&^(nvml.GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW) |
	nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW

// fabricCliqueID is the clique every simulated GPU of a host's fabric
// belongs to: one NVSwitch domain per host.
const fabricCliqueID = 1

// hasFabric says whether the device is an NVSwitch-connected Hopper (or
// later) GPU: its NVLinks are active and it is not a pre-Hopper part.
func (d *device) hasFabric() bool {
	return d.nvlinkUp && d.model.arch >= nvml.DEVICE_ARCH_HOPPER
}

// GpuFabricInfo answers one call of nvmlDeviceGetGpuFabricInfoV with a
// version 3 struct (a version 2 caller reads its prefix): registration
// completed, the host's cluster and clique, the health mask and summary.
// A GPU with the fabric_degraded fault reports degraded bandwidth and
// limited capacity.
func (d *device) GpuFabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return) {
	if _, r := d.begin(featNVLink); r != nvml.SUCCESS {
		return nvml.GpuFabricInfo_v3{}, r
	}
	if !d.hasFabric() {
		return nvml.GpuFabricInfo_v3{}, nvml.ERROR_NOT_SUPPORTED
	}
	info := nvml.GpuFabricInfo_v3{
		Status:        uint32(nvml.SUCCESS),
		CliqueId:      fabricCliqueID,
		State:         nvml.GPU_FABRIC_STATE_COMPLETED,
		HealthMask:    fabricHealthyMask,
		HealthSummary: nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
	}
	if d.fabricDegraded {
		info.HealthMask = fabricDegradedMask
		info.HealthSummary = nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
	}
	return info, nvml.SUCCESS
}

// fabricInfoSymbol is the C function GpuFabricInfo stands for.
const fabricInfoSymbol = "nvmlDeviceGetGpuFabricInfoV"

// fabricInfo is a handle with GpuFabricInfo.
type fabricInfo interface {
	GpuFabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return)
}

// GpuFabricInfo through the guard: the branch must export
// nvmlDeviceGetGpuFabricInfoV (R550 and later), or the process dies as it
// would on a real driver.
func (w *guardedDevice) GpuFabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return) {
	const method = "Device.GetGpuFabricInfoV"
	if !w.g.branch.HasFunction(fabricInfoSymbol) {
		w.g.sim.recordMissing(method, fabricInfoSymbol)
		panic(&MissingFunctionError{Branch: w.g.branch.Name, Driver: w.g.branch.DriverVersion, Method: method, Symbol: fabricInfoSymbol})
	}
	inner, ok := w.inner.(fabricInfo)
	if !ok {
		return nvml.GpuFabricInfo_v3{}, nvml.ERROR_NOT_SUPPORTED
	}
	return inner.GpuFabricInfo()
}
