package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Device readings: nvmlDeviceGetX(device, ..., out*) is the simulator's
// device.GetX(...). go-nvml's exported struct types are cgo's layout of
// nvml.h's structs, so they are stored as they are.

//export nvmlDeviceGetName
func nvmlDeviceGetName(device C.uintptr_t, name unsafe.Pointer, length C.uint) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetName(); return putString(name, length, v, r) })
}

//export nvmlDeviceGetUUID
func nvmlDeviceGetUUID(device C.uintptr_t, uuid unsafe.Pointer, length C.uint) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetUUID(); return putString(uuid, length, v, r) })
}

//export nvmlDeviceGetSerial
func nvmlDeviceGetSerial(device C.uintptr_t, serial unsafe.Pointer, length C.uint) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetSerial(); return putString(serial, length, v, r) })
}

//export nvmlDeviceGetVbiosVersion
func nvmlDeviceGetVbiosVersion(device C.uintptr_t, version unsafe.Pointer, length C.uint) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetVbiosVersion(); return putString(version, length, v, r) })
}

//export nvmlDeviceGetIndex
func nvmlDeviceGetIndex(device C.uintptr_t, index unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetIndex(); return put(index, uint32(v), r) })
}

//export nvmlDeviceGetMinorNumber
func nvmlDeviceGetMinorNumber(device C.uintptr_t, minor unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetMinorNumber(); return put(minor, uint32(v), r) })
}

//export nvmlDeviceGetBrand
func nvmlDeviceGetBrand(device C.uintptr_t, brand unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetBrand(); return put(brand, v, r) })
}

//export nvmlDeviceGetArchitecture
func nvmlDeviceGetArchitecture(device C.uintptr_t, arch unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetArchitecture(); return put(arch, v, r) })
}

//export nvmlDeviceGetCudaComputeCapability
func nvmlDeviceGetCudaComputeCapability(device C.uintptr_t, major, minor unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		a, b, r := d.GetCudaComputeCapability()
		return put2(major, int32(a), minor, int32(b), r)
	})
}

//export nvmlDeviceGetComputeMode
func nvmlDeviceGetComputeMode(device C.uintptr_t, mode unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetComputeMode(); return put(mode, v, r) })
}

//export nvmlDeviceGetVirtualizationMode
func nvmlDeviceGetVirtualizationMode(device C.uintptr_t, mode unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetVirtualizationMode(); return put(mode, v, r) })
}

//export nvmlDeviceGetPersistenceMode
func nvmlDeviceGetPersistenceMode(device C.uintptr_t, mode unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPersistenceMode(); return put(mode, v, r) })
}

//export nvmlDeviceGetPciInfo_v3
func nvmlDeviceGetPciInfo_v3(device C.uintptr_t, pci unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPciInfo(); return put(pci, v, r) })
}

//export nvmlDeviceGetMemoryInfo
func nvmlDeviceGetMemoryInfo(device C.uintptr_t, memory unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetMemoryInfo(); return put(memory, v, r) })
}

//export nvmlDeviceGetMemoryInfo_v2
func nvmlDeviceGetMemoryInfo_v2(device C.uintptr_t, memory unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if memory == nil {
			return invalidArgument
		}
		v, r := d.GetMemoryInfo_v2()
		v.Version = (*nvml.Memory_v2)(memory).Version // the caller's struct version stays
		return put(memory, v, r)
	})
}

//export nvmlDeviceGetBAR1MemoryInfo
func nvmlDeviceGetBAR1MemoryInfo(device C.uintptr_t, bar1 unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetBAR1MemoryInfo(); return put(bar1, v, r) })
}

//export nvmlDeviceGetTemperature
func nvmlDeviceGetTemperature(device C.uintptr_t, sensor C.uint, temp unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetTemperature(nvml.TemperatureSensors(sensor))
		return put(temp, v, r)
	})
}

//export nvmlDeviceGetTemperatureThreshold
func nvmlDeviceGetTemperatureThreshold(device C.uintptr_t, threshold C.uint, temp unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetTemperatureThreshold(nvml.TemperatureThresholds(threshold))
		return put(temp, v, r)
	})
}

//export nvmlDeviceGetPowerUsage
func nvmlDeviceGetPowerUsage(device C.uintptr_t, power unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPowerUsage(); return put(power, v, r) })
}

//export nvmlDeviceGetEnforcedPowerLimit
func nvmlDeviceGetEnforcedPowerLimit(device C.uintptr_t, limit unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetEnforcedPowerLimit(); return put(limit, v, r) })
}

//export nvmlDeviceGetPowerManagementLimit
func nvmlDeviceGetPowerManagementLimit(device C.uintptr_t, limit unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPowerManagementLimit(); return put(limit, v, r) })
}

//export nvmlDeviceGetPowerManagementDefaultLimit
func nvmlDeviceGetPowerManagementDefaultLimit(device C.uintptr_t, limit unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPowerManagementDefaultLimit(); return put(limit, v, r) })
}

//export nvmlDeviceGetPowerManagementLimitConstraints
func nvmlDeviceGetPowerManagementLimitConstraints(device C.uintptr_t, minLimit, maxLimit unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		lo, hi, r := d.GetPowerManagementLimitConstraints()
		return put2(minLimit, lo, maxLimit, hi, r)
	})
}

//export nvmlDeviceGetPowerManagementMode
func nvmlDeviceGetPowerManagementMode(device C.uintptr_t, mode unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPowerManagementMode(); return put(mode, v, r) })
}

//export nvmlDeviceGetPowerState
func nvmlDeviceGetPowerState(device C.uintptr_t, state unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPowerState(); return put(state, v, r) })
}

//export nvmlDeviceGetPerformanceState
func nvmlDeviceGetPerformanceState(device C.uintptr_t, state unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPerformanceState(); return put(state, v, r) })
}

//export nvmlDeviceGetTotalEnergyConsumption
func nvmlDeviceGetTotalEnergyConsumption(device C.uintptr_t, energy unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetTotalEnergyConsumption(); return put(energy, v, r) })
}

//export nvmlDeviceGetUtilizationRates
func nvmlDeviceGetUtilizationRates(device C.uintptr_t, utilization unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetUtilizationRates(); return put(utilization, v, r) })
}

//export nvmlDeviceGetEncoderUtilization
func nvmlDeviceGetEncoderUtilization(device C.uintptr_t, utilization, samplingPeriodUs unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		u, p, r := d.GetEncoderUtilization()
		return put2(utilization, u, samplingPeriodUs, p, r)
	})
}

//export nvmlDeviceGetDecoderUtilization
func nvmlDeviceGetDecoderUtilization(device C.uintptr_t, utilization, samplingPeriodUs unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		u, p, r := d.GetDecoderUtilization()
		return put2(utilization, u, samplingPeriodUs, p, r)
	})
}

//export nvmlDeviceGetClockInfo
func nvmlDeviceGetClockInfo(device C.uintptr_t, clockType C.uint, clock unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetClockInfo(nvml.ClockType(clockType)); return put(clock, v, r) })
}

//export nvmlDeviceGetMaxClockInfo
func nvmlDeviceGetMaxClockInfo(device C.uintptr_t, clockType C.uint, clock unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetMaxClockInfo(nvml.ClockType(clockType))
		return put(clock, v, r)
	})
}

//export nvmlDeviceGetClock
func nvmlDeviceGetClock(device C.uintptr_t, clockType, clockID C.uint, clockMHz unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetClock(nvml.ClockType(clockType), nvml.ClockId(clockID))
		return put(clockMHz, v, r)
	})
}

//export nvmlDeviceGetCurrentClocksEventReasons
func nvmlDeviceGetCurrentClocksEventReasons(device C.uintptr_t, reasons unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetCurrentClocksEventReasons(); return put(reasons, v, r) })
}

//export nvmlDeviceGetCurrentClocksThrottleReasons
func nvmlDeviceGetCurrentClocksThrottleReasons(device C.uintptr_t, reasons unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetCurrentClocksThrottleReasons(); return put(reasons, v, r) })
}

//export nvmlDeviceGetSupportedClocksEventReasons
func nvmlDeviceGetSupportedClocksEventReasons(device C.uintptr_t, reasons unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetSupportedClocksEventReasons(); return put(reasons, v, r) })
}

//export nvmlDeviceGetSupportedClocksThrottleReasons
func nvmlDeviceGetSupportedClocksThrottleReasons(device C.uintptr_t, reasons unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetSupportedClocksThrottleReasons(); return put(reasons, v, r) })
}

//export nvmlDeviceGetNumFans
func nvmlDeviceGetNumFans(device C.uintptr_t, numFans unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetNumFans(); return put(numFans, uint32(v), r) })
}

//export nvmlDeviceGetFanSpeed
func nvmlDeviceGetFanSpeed(device C.uintptr_t, speed unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetFanSpeed(); return put(speed, v, r) })
}

//export nvmlDeviceGetFanSpeed_v2
func nvmlDeviceGetFanSpeed_v2(device C.uintptr_t, fan C.uint, speed unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetFanSpeed_v2(int(fan)); return put(speed, v, r) })
}

//export nvmlDeviceGetCurrPcieLinkGeneration
func nvmlDeviceGetCurrPcieLinkGeneration(device C.uintptr_t, gen unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetCurrPcieLinkGeneration(); return put(gen, uint32(v), r) })
}

//export nvmlDeviceGetCurrPcieLinkWidth
func nvmlDeviceGetCurrPcieLinkWidth(device C.uintptr_t, width unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetCurrPcieLinkWidth(); return put(width, uint32(v), r) })
}

//export nvmlDeviceGetMaxPcieLinkGeneration
func nvmlDeviceGetMaxPcieLinkGeneration(device C.uintptr_t, gen unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetMaxPcieLinkGeneration(); return put(gen, uint32(v), r) })
}

//export nvmlDeviceGetMaxPcieLinkWidth
func nvmlDeviceGetMaxPcieLinkWidth(device C.uintptr_t, width unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetMaxPcieLinkWidth(); return put(width, uint32(v), r) })
}

//export nvmlDeviceGetGpuMaxPcieLinkGeneration
func nvmlDeviceGetGpuMaxPcieLinkGeneration(device C.uintptr_t, gen unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetGpuMaxPcieLinkGeneration(); return put(gen, uint32(v), r) })
}

//export nvmlDeviceGetPcieReplayCounter
func nvmlDeviceGetPcieReplayCounter(device C.uintptr_t, value unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetPcieReplayCounter(); return put(value, uint32(v), r) })
}

//export nvmlDeviceGetEccMode
func nvmlDeviceGetEccMode(device C.uintptr_t, current, pending unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { c, p, r := d.GetEccMode(); return put2(current, c, pending, p, r) })
}

//export nvmlDeviceGetDefaultEccMode
func nvmlDeviceGetDefaultEccMode(device C.uintptr_t, mode unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetDefaultEccMode(); return put(mode, v, r) })
}

//export nvmlDeviceGetTotalEccErrors
func nvmlDeviceGetTotalEccErrors(device C.uintptr_t, errorType, counterType C.uint, count unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetTotalEccErrors(nvml.MemoryErrorType(errorType), nvml.EccCounterType(counterType))
		return put(count, v, r)
	})
}

//export nvmlDeviceGetMemoryErrorCounter
func nvmlDeviceGetMemoryErrorCounter(device C.uintptr_t, errorType, counterType, location C.uint, count unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetMemoryErrorCounter(nvml.MemoryErrorType(errorType), nvml.EccCounterType(counterType), nvml.MemoryLocation(location))
		return put(count, v, r)
	})
}

//export nvmlDeviceGetRetiredPages
func nvmlDeviceGetRetiredPages(device C.uintptr_t, cause C.uint, pageCount, addresses unsafe.Pointer) C.int {
	return retiredPages(device, cause, pageCount, addresses, nil)
}

//export nvmlDeviceGetRetiredPages_v2
func nvmlDeviceGetRetiredPages_v2(device C.uintptr_t, cause C.uint, pageCount, addresses, timestamps unsafe.Pointer) C.int {
	return retiredPages(device, cause, pageCount, addresses, timestamps)
}

//export nvmlDeviceGetRetiredPagesPendingStatus
func nvmlDeviceGetRetiredPagesPendingStatus(device C.uintptr_t, pending unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetRetiredPagesPendingStatus(); return put(pending, v, r) })
}

//export nvmlDeviceGetRemappedRows
func nvmlDeviceGetRemappedRows(device C.uintptr_t, corrRows, uncRows, isPending, failureOccurred unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		c, u, p, f, r := d.GetRemappedRows()
		if r != nvml.SUCCESS {
			return C.int(r)
		}
		if corrRows == nil || uncRows == nil || isPending == nil || failureOccurred == nil {
			return invalidArgument
		}
		*(*uint32)(corrRows), *(*uint32)(uncRows) = uint32(c), uint32(u)
		*(*uint32)(isPending), *(*uint32)(failureOccurred) = boolUint(p), boolUint(f)
		return success
	})
}

func boolUint(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

//export nvmlDeviceGetNvLinkState
func nvmlDeviceGetNvLinkState(device C.uintptr_t, link C.uint, isActive unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetNvLinkState(int(link)); return put(isActive, v, r) })
}

//export nvmlDeviceGetNvLinkVersion
func nvmlDeviceGetNvLinkVersion(device C.uintptr_t, link C.uint, version unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int { v, r := d.GetNvLinkVersion(int(link)); return put(version, v, r) })
}

//export nvmlDeviceGetNvLinkErrorCounter
func nvmlDeviceGetNvLinkErrorCounter(device C.uintptr_t, link, counter C.uint, value unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		v, r := d.GetNvLinkErrorCounter(int(link), nvml.NvLinkErrorCounter(counter))
		return put(value, v, r)
	})
}

//export nvmlDeviceGetFieldValues
func nvmlDeviceGetFieldValues(device C.uintptr_t, valuesCount C.int, values unsafe.Pointer) C.int {
	return onDevice(device, func(d nvml.Device) C.int {
		if values == nil || valuesCount < 0 {
			return invalidArgument
		}
		// nvml.FieldValue is cgo's layout of nvmlFieldValue_t: the
		// simulator fills the caller's array in place.
		return C.int(d.GetFieldValues(unsafe.Slice((*nvml.FieldValue)(values), int(valuesCount))))
	})
}
