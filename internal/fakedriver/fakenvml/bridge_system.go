package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library-wide calls: init, versions, device handles, error strings.

//export nvmlInit_v2
func nvmlInit_v2() C.int {
	s, err := simulator()
	if err != nil {
		return C.int(nvml.ERROR_UNKNOWN)
	}
	return C.int(s.Init())
}

//export nvmlInit
func nvmlInit() C.int { return nvmlInit_v2() }

//export nvmlInitWithFlags
func nvmlInitWithFlags(flags C.uint) C.int { return nvmlInit_v2() }

//export nvmlShutdown
func nvmlShutdown() C.int {
	s := host.Load()
	if s == nil {
		return uninitialized
	}
	return C.int(s.Shutdown())
}

//export nvmlErrorString
func nvmlErrorString(result C.int) *C.char {
	r := nvml.Return(result)
	if v, ok := errorStrings.Load(r); ok {
		return v.(*C.char)
	}
	v, _ := errorStrings.LoadOrStore(r, C.CString(r.Error()))
	return v.(*C.char)
}

//export nvmlSystemGetDriverVersion
func nvmlSystemGetDriverVersion(version unsafe.Pointer, length C.uint) C.int {
	return onLib(func(l nvml.Interface) C.int {
		v, r := l.SystemGetDriverVersion()
		return putString(version, length, v, r)
	})
}

//export nvmlSystemGetNVMLVersion
func nvmlSystemGetNVMLVersion(version unsafe.Pointer, length C.uint) C.int {
	return onLib(func(l nvml.Interface) C.int {
		v, r := l.SystemGetNVMLVersion()
		return putString(version, length, v, r)
	})
}

//export nvmlSystemGetCudaDriverVersion
func nvmlSystemGetCudaDriverVersion(cudaDriverVersion unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		v, r := l.SystemGetCudaDriverVersion()
		return put(cudaDriverVersion, int32(v), r)
	})
}

//export nvmlSystemGetCudaDriverVersion_v2
func nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion unsafe.Pointer) C.int {
	return nvmlSystemGetCudaDriverVersion(cudaDriverVersion)
}

//export nvmlDeviceGetCount_v2
func nvmlDeviceGetCount_v2(deviceCount unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		n, r := l.DeviceGetCount()
		return put(deviceCount, uint32(n), r)
	})
}

//export nvmlDeviceGetCount
func nvmlDeviceGetCount(deviceCount unsafe.Pointer) C.int { return nvmlDeviceGetCount_v2(deviceCount) }

//export nvmlDeviceGetHandleByIndex_v2
func nvmlDeviceGetHandleByIndex_v2(index C.uint, device unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		d, r := l.DeviceGetHandleByIndex(int(index))
		return putHandle(device, d, r)
	})
}

//export nvmlDeviceGetHandleByIndex
func nvmlDeviceGetHandleByIndex(index C.uint, device unsafe.Pointer) C.int {
	return nvmlDeviceGetHandleByIndex_v2(index, device)
}

//export nvmlDeviceGetHandleByUUID
func nvmlDeviceGetHandleByUUID(uuid unsafe.Pointer, device unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		d, r := l.DeviceGetHandleByUUID(goString(uuid))
		return putHandle(device, d, r)
	})
}

//export nvmlDeviceGetHandleByPciBusId_v2
func nvmlDeviceGetHandleByPciBusId_v2(pciBusID unsafe.Pointer, device unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		d, r := l.DeviceGetHandleByPciBusId(goString(pciBusID))
		return putHandle(device, d, r)
	})
}

//export nvmlDeviceGetHandleByPciBusId
func nvmlDeviceGetHandleByPciBusId(pciBusID unsafe.Pointer, device unsafe.Pointer) C.int {
	return nvmlDeviceGetHandleByPciBusId_v2(pciBusID, device)
}

//export nvmlDeviceGetHandleBySerial
func nvmlDeviceGetHandleBySerial(serial unsafe.Pointer, device unsafe.Pointer) C.int {
	return onLib(func(l nvml.Interface) C.int {
		d, r := l.DeviceGetHandleBySerial(goString(serial))
		return putHandle(device, d, r)
	})
}
