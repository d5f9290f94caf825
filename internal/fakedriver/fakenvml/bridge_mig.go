package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIG: modes, MIG device handles, GPU and compute instances.

//export nvmlDeviceGetMigMode
func nvmlDeviceGetMigMode(device C.uintptr_t, current, pending unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		c, p, r := d.GetMigMode()
		return put2(current, uint32(c), pending, uint32(p), r)
	})
}

//export nvmlDeviceGetMaxMigDeviceCount
func nvmlDeviceGetMaxMigDeviceCount(device C.uintptr_t, count unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetMaxMigDeviceCount(); return put(count, uint32(v), r) })
}

//export nvmlDeviceGetMigDeviceHandleByIndex
func nvmlDeviceGetMigDeviceHandleByIndex(device C.uintptr_t, index C.uint, migDevice unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		m, r := d.GetMigDeviceHandleByIndex(int(index))
		return putHandle(migDevice, m, r)
	})
}

//export nvmlDeviceIsMigDeviceHandle
func nvmlDeviceIsMigDeviceHandle(device C.uintptr_t, isMig unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.IsMigDeviceHandle(); return put(isMig, boolUint(v), r) })
}

//export nvmlDeviceGetDeviceHandleFromMigDeviceHandle
func nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice C.uintptr_t, device unsafe.Pointer) C.int {
	return onDevice(migDevice, func(m nvml.Device) C.int {
		d, r := m.GetDeviceHandleFromMigDeviceHandle()
		return putHandle(device, d, r)
	})
}

//export nvmlDeviceGetGpuInstanceId
func nvmlDeviceGetGpuInstanceId(device C.uintptr_t, id unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetGpuInstanceId(); return put(id, uint32(v), r) })
}

//export nvmlDeviceGetComputeInstanceId
func nvmlDeviceGetComputeInstanceId(device C.uintptr_t, id unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetComputeInstanceId(); return put(id, uint32(v), r) })
}

//export nvmlDeviceGetAttributes_v2
func nvmlDeviceGetAttributes_v2(device C.uintptr_t, attributes unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetAttributes(); return put(attributes, v, r) })
}

//export nvmlDeviceGetGpuInstanceProfileInfo
func nvmlDeviceGetGpuInstanceProfileInfo(device C.uintptr_t, profile C.uint, info unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetGpuInstanceProfileInfo(int(profile))
		return put(info, v, r)
	})
}

//export nvmlDeviceGetGpuInstances
func nvmlDeviceGetGpuInstances(device C.uintptr_t, profileID C.uint, gpuInstances, count unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		gis, r := d.GetGpuInstances(&nvml.GpuInstanceProfileInfo{Id: uint32(profileID)})
		return putHandles(count, gpuInstances, gis, r)
	})
}

//export nvmlDeviceGetGpuInstanceById
func nvmlDeviceGetGpuInstanceById(device C.uintptr_t, id C.uint, gpuInstance unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		gi, r := d.GetGpuInstanceById(int(id))
		return putHandle(gpuInstance, gi, r)
	})
}

// cGpuInstanceInfo is nvmlGpuInstanceInfo_t.
type cGpuInstanceInfo struct {
	Device    uintptr
	ID        uint32
	ProfileID uint32
	Placement nvml.GpuInstancePlacement
}

//export nvmlGpuInstanceGetInfo
func nvmlGpuInstanceGetInfo(gpuInstance C.uintptr_t, info unsafe.Pointer) C.int {
	return onHandle(gpuInstance, func(gi nvml.GpuInstance) C.int {
		v, r := gi.GetInfo()
		return put(info, cGpuInstanceInfo{
			Device: uintptr(handles.handle(v.Device)), ID: v.Id, ProfileID: v.ProfileId, Placement: v.Placement,
		}, r)
	})
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfo
func nvmlGpuInstanceGetComputeInstanceProfileInfo(gpuInstance C.uintptr_t, profile, engProfile C.uint, info unsafe.Pointer) C.int {
	return onHandle(gpuInstance, func(gi nvml.GpuInstance) C.int {
		v, r := gi.GetComputeInstanceProfileInfo(int(profile), int(engProfile))
		return put(info, v, r)
	})
}

//export nvmlGpuInstanceGetComputeInstances
func nvmlGpuInstanceGetComputeInstances(gpuInstance C.uintptr_t, profileID C.uint, computeInstances, count unsafe.Pointer) C.int {
	return onHandle(gpuInstance, func(gi nvml.GpuInstance) C.int {
		cis, r := gi.GetComputeInstances(&nvml.ComputeInstanceProfileInfo{Id: uint32(profileID)})
		return putHandles(count, computeInstances, cis, r)
	})
}

//export nvmlGpuInstanceGetComputeInstanceById
func nvmlGpuInstanceGetComputeInstanceById(gpuInstance C.uintptr_t, id C.uint, computeInstance unsafe.Pointer) C.int {
	return onHandle(gpuInstance, func(gi nvml.GpuInstance) C.int {
		ci, r := gi.GetComputeInstanceById(int(id))
		return putHandle(computeInstance, ci, r)
	})
}

// cComputeInstanceInfo is nvmlComputeInstanceInfo_t.
type cComputeInstanceInfo struct {
	Device      uintptr
	GpuInstance uintptr
	ID          uint32
	ProfileID   uint32
	Placement   nvml.ComputeInstancePlacement
}

//export nvmlComputeInstanceGetInfo_v2
func nvmlComputeInstanceGetInfo_v2(computeInstance C.uintptr_t, info unsafe.Pointer) C.int {
	return onHandle(computeInstance, func(ci nvml.ComputeInstance) C.int {
		v, r := ci.GetInfo()
		return put(info, cComputeInstanceInfo{
			Device: uintptr(handles.handle(v.Device)), GpuInstance: uintptr(handles.handle(v.GpuInstance)),
			ID: v.Id, ProfileID: v.ProfileId, Placement: v.Placement,
		}, r)
	})
}

//export nvmlComputeInstanceGetInfo
func nvmlComputeInstanceGetInfo(computeInstance C.uintptr_t, info unsafe.Pointer) C.int {
	return nvmlComputeInstanceGetInfo_v2(computeInstance, info)
}
