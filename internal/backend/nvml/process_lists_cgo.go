package nvmlbackend

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stdint.h>

// A process-list function of libnvidia-ml: nvmlReturn_t f(nvmlDevice_t,
// unsigned int *infoCount, nvmlProcessInfo_t *infos).
typedef int (*gw_process_list_fn)(void *device, unsigned int *count, void *infos);

// gw_nvml_symbol finds a function of the libnvidia-ml.so.1 that go-nvml
// loaded (RTLD_GLOBAL); NULL when the library lacks it.
static void *gw_nvml_symbol(const char *name) {
	return dlsym(RTLD_DEFAULT, name);
}

static int gw_call_process_list(void *fn, uintptr_t device, unsigned int *count, void *infos) {
	return ((gw_process_list_fn)fn)((void *)device, count, infos);
}
*/
import "C"

import (
	"reflect"
	"sync"
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

// processListFunction is a resolved C function; v1 says it fills the v1 struct.
type processListFunction struct {
	fn unsafe.Pointer
	v1 bool
}

var processListFunctions struct {
	mu    sync.Mutex
	found map[string]processListFunction
}

// lookupProcessListFunction resolves kind's function once it is found; a
// library without any is asked again next time (it may not be loaded yet).
func lookupProcessListFunction(kind string) (processListFunction, bool) {
	p := &processListFunctions
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.found[kind]; ok {
		return f, true
	}
	syms, ok := processListSymbols[kind]
	if !ok {
		return processListFunction{}, false
	}
	for i, sym := range syms {
		name := C.CString(sym)
		fn := C.gw_nvml_symbol(name)
		C.free(unsafe.Pointer(name))
		if fn != nil {
			f := processListFunction{fn: fn, v1: i == len(syms)-1}
			if p.found == nil {
				p.found = map[string]processListFunction{}
			}
			p.found[kind] = f
			return f, true
		}
	}
	return processListFunction{}, false
}

// goNVMLHandle is the C handle inside one of go-nvml's own device handles
// (an unexported struct whose one field, Handle, is the nvmlDevice_t), or
// false for any other nvml.Device.
func goNVMLHandle(dev nvml.Device) (uintptr, bool) {
	v := reflect.ValueOf(dev)
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return 0, false
	}
	t := v.Type()
	if t.PkgPath() != "github.com/NVIDIA/go-nvml/pkg/nvml" || t.Name() != "nvmlDevice" {
		return 0, false
	}
	h := v.FieldByName("Handle")
	if !h.IsValid() || h.Kind() != reflect.Pointer {
		return 0, false
	}
	return h.Pointer(), true
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
		f, found := lookupProcessListFunction(kind.name)
		if !found {
			return nil, 0, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		count := C.uint(capacity)
		if f.v1 {
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
