//go:build cgo

package nvmlbackend

/*
#include <stdint.h>

// nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
// nvmlProcessUtilizationSample_t *utilization, unsigned int
// *processSamplesCount, unsigned long long lastSeenTimeStamp).
typedef int (*gw_process_utilization_fn)(void *device, void *utilization, unsigned int *count, unsigned long long lastSeen);

static int gw_call_process_utilization(void *fn, uintptr_t device, void *utilization, unsigned int *count, unsigned long long lastSeen) {
	return ((gw_process_utilization_fn)fn)((void *)device, utilization, count, lastSeen);
}
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// cProcessUtilization is the call of the C function on one of go-nvml's
// handles, into a buffer of the caller's (go-nvml's ProcessUtilizationSample
// is nvmlProcessUtilizationSample_t). ok is false for a handle that is not
// go-nvml's. A library without the function answers FUNCTION_NOT_FOUND.
func cProcessUtilization(dev nvml.Device) (utilizationCall, bool) {
	handle, ok := goNVMLHandle(dev)
	if !ok {
		return nil, false
	}
	return func(buf []nvml.ProcessUtilizationSample, lastSeen uint64) (uint32, nvml.Return) {
		f, found := lookupNVMLFunction("nvmlDeviceGetProcessUtilization")
		if !found {
			return 0, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		count := C.uint(len(buf))
		var p unsafe.Pointer
		if len(buf) > 0 {
			p = unsafe.Pointer(&buf[0])
		}
		ret := nvml.Return(C.gw_call_process_utilization(f.fn, C.uintptr_t(handle), p, &count, C.ulonglong(lastSeen)))
		return uint32(count), ret
	}, true
}
