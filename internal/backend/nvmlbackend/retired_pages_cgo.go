//go:build cgo

package nvmlbackend

/*
#include <stdint.h>

// nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
// nvmlPageRetirementCause_t cause, unsigned int *pageCount,
// unsigned long long *addresses).
typedef int (*gw_retired_pages_fn)(void *device, int cause, unsigned int *count, unsigned long long *addresses);

static int gw_call_retired_pages(void *fn, uintptr_t device, int cause, unsigned int *count, unsigned long long *addresses) {
	return ((gw_retired_pages_fn)fn)((void *)device, cause, count, addresses);
}
*/
import "C"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// retiredPagesSymbol is the C function: the unversioned one, in every
// driver branch; _v2 adds only the timestamps, which gpuwatch does not use.
const retiredPagesSymbol = "nvmlDeviceGetRetiredPages"

// cRetiredPages is the sized call of nvmlDeviceGetRetiredPages on one of
// go-nvml's handles. ok is false for a handle that is not go-nvml's. A
// library that lacks the function answers FUNCTION_NOT_FOUND, never a
// call into nothing.
func cRetiredPages(dev nvml.Device, cause nvml.PageRetirementCause) (retiredPagesCall, bool) {
	handle, ok := goNVMLHandle(dev)
	if !ok {
		return nil, false
	}
	return func(capacity uint32) ([]uint64, uint32, nvml.Return) {
		f, found := lookupNVMLFunction(retiredPagesSymbol)
		if !found {
			return nil, 0, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		// nvml.h lists a NULL addresses as INVALID_ARGUMENT, so even the
		// query (capacity 0) passes a buffer, one the driver may not write.
		buf := make([]C.ulonglong, max(capacity, 1))
		count := C.uint(capacity)
		ret := nvml.Return(C.gw_call_retired_pages(f.fn, C.uintptr_t(handle), C.int(cause), &count, &buf[0]))
		if ret != nvml.SUCCESS {
			return nil, uint32(count), ret
		}
		pages := make([]uint64, min(uint32(count), capacity))
		for i := range pages {
			pages[i] = uint64(buf[i])
		}
		return pages, uint32(count), ret
	}, true
}
