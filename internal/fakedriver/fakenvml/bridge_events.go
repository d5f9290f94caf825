package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// cEventData is nvmlEventData_t: the device is a handle of this library.
type cEventData struct {
	Device            uintptr
	EventType         uint64
	EventData         uint64
	GpuInstanceID     uint32
	ComputeInstanceID uint32
}

//export nvmlEventSetCreate
func nvmlEventSetCreate(set unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		es, r := l.EventSetCreate()
		return putHandle(set, es, r)
	})
}

//export nvmlEventSetFree
func nvmlEventSetFree(set C.uintptr_t) C.int {
	return onHandle(set, func(es nvml.EventSet) C.int { return C.int(es.Free()) })
}

//export nvmlDeviceGetSupportedEventTypes
func nvmlDeviceGetSupportedEventTypes(device C.uintptr_t, eventTypes unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetSupportedEventTypes(); return put(eventTypes, v, r) })
}

//export nvmlDeviceRegisterEvents
func nvmlDeviceRegisterEvents(device C.uintptr_t, eventTypes C.ulonglong, set C.uintptr_t) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		es, ok := lookup[nvml.EventSet](set)
		if !ok {
			return invalidArgument
		}
		return C.int(d.RegisterEvents(uint64(eventTypes), es))
	})
}

//export nvmlEventSetWait_v2
func nvmlEventSetWait_v2(set C.uintptr_t, data unsafe.Pointer, timeoutms C.uint) C.int {
	if lib() == nil {
		return uninitialized
	}
	es, ok := lookup[nvml.EventSet](set)
	if !ok || data == nil {
		return invalidArgument
	}
	ev, r := es.Wait(uint32(timeoutms))
	if r != nvml.SUCCESS {
		return C.int(r)
	}
	*(*cEventData)(data) = cEventData{
		Device:    uintptr(handles.handle(ev.Device)),
		EventType: ev.EventType, EventData: ev.EventData,
		GpuInstanceID: ev.GpuInstanceId, ComputeInstanceID: ev.ComputeInstanceId,
	}
	return success
}

//export nvmlEventSetWait
func nvmlEventSetWait(set C.uintptr_t, data unsafe.Pointer, timeoutms C.uint) C.int {
	return nvmlEventSetWait_v2(set, data, timeoutms)
}
