//go:build cgo

package nvmlbackend

/*
#include <stdint.h>

// A process-list function of libnvidia-ml: nvmlReturn_t f(nvmlDevice_t,
// unsigned int *infoCount, nvmlProcessInfo_t *infos).
typedef int (*gw_process_list_fn)(void *device, unsigned int *count, void *infos);

static int gw_call_process_list(void *fn, uintptr_t device, unsigned int *count, void *infos) {
	return ((gw_process_list_fn)fn)((void *)device, count, infos);
}
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// processListSymbols are, per kind, the C functions in go-nvml's order of
// preference (it binds the newest the library exports): _v3 and _v2 fill
// nvmlProcessInfo_t (go-nvml's ProcessInfo: pid, usedGpuMemory,
// gpuInstanceId, computeInstanceId), the unversioned v1 the shorter
// nvmlProcessInfo_v1_t (pid, usedGpuMemory).
var processListSymbols = map[string][3]string{
	"compute":      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"},
	"graphics":     {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses"},
	processTypeMPS: {"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2", "nvmlDeviceGetMPSComputeRunningProcesses"},
}

// lookupProcessListFunction resolves kind's function; v1 says it fills
// the v1 struct.
func lookupProcessListFunction(kind string) (f nvmlFunction, v1, ok bool) {
	syms, ok := processListSymbols[kind]
	if !ok {
		return nvmlFunction{}, false, false
	}
	f, ok = lookupNVMLFunction(syms[:]...)
	return f, f.version == len(syms)-1, ok
}

// cProcessList is the sized call of kind's C function on one of go-nvml's
// handles. ok is false for a handle that is not go-nvml's. A library that
// lacks every version of the function answers FUNCTION_NOT_FOUND, never a
// call into nothing.
func cProcessList(dev nvml.Device, kind processKind) (sizedCall, bool) {
	handle, ok := goNVMLHandle(dev)
	if !ok {
		return nil, false
	}
	return func(capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
		f, v1, found := lookupProcessListFunction(kind.name)
		if !found {
			return nil, 0, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		count := C.uint(capacity)
		if v1 {
			buf := make([]nvml.ProcessInfo_v1, max(capacity, 1))
			ret := nvml.Return(C.gw_call_process_list(f.fn, C.uintptr_t(handle), &count, unsafe.Pointer(&buf[0])))
			if ret != nvml.SUCCESS {
				return nil, uint32(count), ret
			}
			list := make([]nvml.ProcessInfo, min(uint32(count), capacity))
			for i := range list {
				list[i] = nvml.ProcessInfo{Pid: buf[i].Pid, UsedGpuMemory: buf[i].UsedGpuMemory,
					GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
			}
			return list, uint32(count), ret
		}
		buf := make([]nvml.ProcessInfo, max(capacity, 1))
		ret := nvml.Return(C.gw_call_process_list(f.fn, C.uintptr_t(handle), &count, unsafe.Pointer(&buf[0])))
		if ret != nvml.SUCCESS {
			return nil, uint32(count), ret
		}
		return buf[:min(uint32(count), capacity)], uint32(count), ret
	}, true
}
