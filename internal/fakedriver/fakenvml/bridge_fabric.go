package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fabricInfo is the simulator's handle: its fabric answers as
// nvmlDeviceGetGpuFabricInfoV does (sim's GpuFabricInfo).
type fabricInfo interface {
	GpuFabricInfo() (nvml.GpuFabricInfo_v3, nvml.Return)
}

// Versions of nvmlGpuFabricInfo_t the bridge answers (nvml.h's
// nvmlGpuFabricInfo_v2 and _v3: the version in the top byte, the struct's
// size below it). Version 3 adds healthSummary after version 2's fields,
// so a version 2 caller gets the same fields at the same offsets.
var (
	fabricInfoV2 = uint32(unsafe.Sizeof(nvml.GpuFabricInfo_v2{})) | 2<<24
	fabricInfoV3 = uint32(unsafe.Sizeof(nvml.GpuFabricInfo_v3{})) | 3<<24
)

//export nvmlDeviceGetGpuFabricInfoV
func nvmlDeviceGetGpuFabricInfoV(device C.uintptr_t, info unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if info == nil {
			return invalidArgument
		}
		version := *(*uint32)(info)
		if version != fabricInfoV2 && version != fabricInfoV3 {
			return C.int(nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
		}
		f, ok := d.(fabricInfo)
		if !ok {
			return C.int(nvml.ERROR_NOT_SUPPORTED)
		}
		v, r := f.GpuFabricInfo()
		if r != nvml.SUCCESS {
			return C.int(r)
		}
		v.Version = version // the caller's struct version stays
		if version == fabricInfoV2 {
			v2 := nvml.GpuFabricInfo_v2{Version: v.Version, ClusterUuid: v.ClusterUuid, Status: v.Status,
				CliqueId: v.CliqueId, State: v.State, HealthMask: v.HealthMask}
			return put(info, v2, r)
		}
		return put(info, v, r)
	})
}
