package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// sizedRetiredPages is the simulator's handle: its retired pages answer as
// nvmlDeviceGetRetiredPages does (sim.RetiredPagesSized), faults
// included, so a driver whose count keeps growing can be served.
type sizedRetiredPages interface {
	RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return)
}

// retiredPages answers nvmlDeviceGetRetiredPages (timestamps NULL) and
// _v2: *pageCount is the capacity of addresses (and of timestamps) on the
// way in, 0 querying the count; the count the driver has or asks for on
// the way out. nvml.h: a NULL pageCount is INVALID_ARGUMENT, and so is a
// NULL addresses, but for the count query.
func retiredPages(device C.uintptr_t, cause C.uint, pageCount, addresses, timestamps unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if pageCount == nil {
			return invalidArgument
		}
		count := (*C.uint)(pageCount)
		capacity := uint32(*count)
		if capacity > 0 && addresses == nil {
			return invalidArgument
		}
		pages, ok := d.(sizedRetiredPages)
		if !ok {
			return invalidArgument
		}
		list, n, r := pages.RetiredPagesSized(nvml.PageRetirementCause(cause), capacity)
		if r != nvml.SUCCESS && r != nvml.ERROR_INSUFFICIENT_SIZE {
			return C.int(r)
		}
		*count = C.uint(n)
		if r == nvml.SUCCESS && len(list) > 0 {
			copy(unsafe.Slice((*uint64)(addresses), len(list)), list)
			if timestamps != nil {
				// The simulated pages carry no retirement time.
				clear(unsafe.Slice((*uint64)(timestamps), len(list)))
			}
		}
		return C.int(r)
	})
}
