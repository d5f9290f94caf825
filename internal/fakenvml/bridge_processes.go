package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Process lists. _v2 and _v3 take nvmlProcessInfo_v2_t / nvmlProcessInfo_t
// ({pid, usedGpuMemory, gpuInstanceId, computeInstanceId}, go-nvml's
// ProcessInfo); the unversioned v1 takes nvmlProcessInfo_v1_t ({pid,
// usedGpuMemory}).

func processesV1(ps []nvml.ProcessInfo) []nvml.ProcessInfo_v1 {
	out := make([]nvml.ProcessInfo_v1, len(ps))
	for i, p := range ps {
		out[i] = nvml.ProcessInfo_v1{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory}
	}
	return out
}

//export nvmlDeviceGetComputeRunningProcesses_v3
func nvmlDeviceGetComputeRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetComputeRunningProcesses()
		return putList(infoCount, infos, ps, r)
	})
}

//export nvmlDeviceGetComputeRunningProcesses_v2
func nvmlDeviceGetComputeRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetComputeRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetComputeRunningProcesses
func nvmlDeviceGetComputeRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetComputeRunningProcesses()
		return putList(infoCount, infos, processesV1(ps), r)
	})
}

//export nvmlDeviceGetGraphicsRunningProcesses_v3
func nvmlDeviceGetGraphicsRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetGraphicsRunningProcesses()
		return putList(infoCount, infos, ps, r)
	})
}

//export nvmlDeviceGetGraphicsRunningProcesses_v2
func nvmlDeviceGetGraphicsRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetGraphicsRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetGraphicsRunningProcesses
func nvmlDeviceGetGraphicsRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetGraphicsRunningProcesses()
		return putList(infoCount, infos, processesV1(ps), r)
	})
}

//export nvmlDeviceGetMPSComputeRunningProcesses_v3
func nvmlDeviceGetMPSComputeRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetMPSComputeRunningProcesses()
		return putList(infoCount, infos, ps, r)
	})
}

//export nvmlDeviceGetMPSComputeRunningProcesses_v2
func nvmlDeviceGetMPSComputeRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetMPSComputeRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetMPSComputeRunningProcesses
func nvmlDeviceGetMPSComputeRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		ps, r := d.GetMPSComputeRunningProcesses()
		return putList(infoCount, infos, processesV1(ps), r)
	})
}

// nvmlDeviceGetProcessUtilization: with a NULL array it answers
// INSUFFICIENT_SIZE and the number of samples, as go-nvml expects.
//
//export nvmlDeviceGetProcessUtilization
func nvmlDeviceGetProcessUtilization(device C.uintptr_t, utilization, samplesCount unsafe.Pointer, lastSeen C.ulonglong) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		samples, r := d.GetProcessUtilization(uint64(lastSeen))
		if r == nvml.SUCCESS && len(samples) > 0 && utilization == nil && samplesCount != nil {
			*(*C.uint)(samplesCount) = C.uint(len(samples))
			return insufficient
		}
		return putList(samplesCount, utilization, samples, r)
	})
}
