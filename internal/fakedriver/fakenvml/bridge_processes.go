package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
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

// sizedLists is the simulator's handle: its process lists answer as the C
// functions do (sim.RunningProcessesSized), faults included, so a driver
// that keeps answering INSUFFICIENT_SIZE can be served.
type sizedLists interface {
	RunningProcessesSized(kind string, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return)
}

// processList answers one process-list call: *infoCount is the capacity
// of infos (NULL is none) on the way in, the count the driver has or asks
// for on the way out. v1 lists take the shorter nvmlProcessInfo_v1_t.
func processList(device C.uintptr_t, kind string, v1 bool, infoCount, infos unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if infoCount == nil {
			return invalidArgument
		}
		count := (*C.uint)(infoCount)
		capacity := uint32(*count)
		if infos == nil {
			capacity = 0
		}
		lists, ok := d.(sizedLists)
		if !ok {
			return invalidArgument
		}
		list, n, r := lists.RunningProcessesSized(kind, capacity)
		if r != nvml.SUCCESS && r != nvml.ERROR_INSUFFICIENT_SIZE {
			return C.int(r)
		}
		*count = C.uint(n)
		if r == nvml.SUCCESS && len(list) > 0 {
			if v1 {
				copy(unsafe.Slice((*nvml.ProcessInfo_v1)(infos), len(list)), processesV1(list))
			} else {
				copy(unsafe.Slice((*nvml.ProcessInfo)(infos), len(list)), list)
			}
		}
		return C.int(r)
	})
}

//export nvmlDeviceGetComputeRunningProcesses_v3
func nvmlDeviceGetComputeRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListCompute, false, infoCount, infos)
}

//export nvmlDeviceGetComputeRunningProcesses_v2
func nvmlDeviceGetComputeRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetComputeRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetComputeRunningProcesses
func nvmlDeviceGetComputeRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListCompute, true, infoCount, infos)
}

//export nvmlDeviceGetGraphicsRunningProcesses_v3
func nvmlDeviceGetGraphicsRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListGraphics, false, infoCount, infos)
}

//export nvmlDeviceGetGraphicsRunningProcesses_v2
func nvmlDeviceGetGraphicsRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetGraphicsRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetGraphicsRunningProcesses
func nvmlDeviceGetGraphicsRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListGraphics, true, infoCount, infos)
}

//export nvmlDeviceGetMPSComputeRunningProcesses_v3
func nvmlDeviceGetMPSComputeRunningProcesses_v3(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListMPS, false, infoCount, infos)
}

//export nvmlDeviceGetMPSComputeRunningProcesses_v2
func nvmlDeviceGetMPSComputeRunningProcesses_v2(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return nvmlDeviceGetMPSComputeRunningProcesses_v3(device, infoCount, infos)
}

//export nvmlDeviceGetMPSComputeRunningProcesses
func nvmlDeviceGetMPSComputeRunningProcesses(device C.uintptr_t, infoCount, infos unsafe.Pointer) C.int {
	return processList(device, sim.ProcessListMPS, true, infoCount, infos)
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
