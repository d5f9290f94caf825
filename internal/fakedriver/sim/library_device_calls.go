//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Library spellings of the modelled device calls: lib.DeviceGetX(dev) is
// dev.GetX(), as in go-nvml. They were written out to skip the call
// recording of the go-nvml mock the simulator used to embed; the generated
// forwarders of unmodelledLibrary (safetynet_gen.go) now do the same.
// TestLibrarySpellingsAreDirect checks that every modelled device call is
// modelled in its library spelling too.

func (s *Sim) DeviceGetFieldValues(dev nvml.Device, values []nvml.FieldValue) nvml.Return {
	if dev == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetFieldValues(values)
}

func (s *Sim) DeviceGetIndex(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetIndex()
}

func (s *Sim) DeviceGetVirtualizationMode(dev nvml.Device) (nvml.GpuVirtualizationMode, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetVirtualizationMode()
}

func (s *Sim) DeviceGetMinorNumber(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMinorNumber()
}

func (s *Sim) DeviceGetUUID(dev nvml.Device) (string, nvml.Return) {
	if dev == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetUUID()
}

func (s *Sim) DeviceGetName(dev nvml.Device) (string, nvml.Return) {
	if dev == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetName()
}

func (s *Sim) DeviceGetBrand(dev nvml.Device) (nvml.BrandType, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetBrand()
}

func (s *Sim) DeviceGetArchitecture(dev nvml.Device) (nvml.DeviceArchitecture, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetArchitecture()
}

func (s *Sim) DeviceGetPciInfo(dev nvml.Device) (nvml.PciInfo, nvml.Return) {
	if dev == nil {
		return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPciInfo()
}

func (s *Sim) DeviceGetSerial(dev nvml.Device) (string, nvml.Return) {
	if dev == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetSerial()
}

func (s *Sim) DeviceGetVbiosVersion(dev nvml.Device) (string, nvml.Return) {
	if dev == nil {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetVbiosVersion()
}

func (s *Sim) DeviceGetCudaComputeCapability(dev nvml.Device) (int, int, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetCudaComputeCapability()
}

func (s *Sim) DeviceGetPersistenceMode(dev nvml.Device) (nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPersistenceMode()
}

func (s *Sim) DeviceGetComputeMode(dev nvml.Device) (nvml.ComputeMode, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetComputeMode()
}

func (s *Sim) DeviceGetMigMode(dev nvml.Device) (int, int, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMigMode()
}

func (s *Sim) DeviceIsMigDeviceHandle(dev nvml.Device) (bool, nvml.Return) {
	if dev == nil {
		return false, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.IsMigDeviceHandle()
}

func (s *Sim) DeviceGetSupportedEventTypes(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetSupportedEventTypes()
}

func (s *Sim) DeviceGetUtilizationRates(dev nvml.Device) (nvml.Utilization, nvml.Return) {
	if dev == nil {
		return nvml.Utilization{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetUtilizationRates()
}

func (s *Sim) DeviceGetEncoderUtilization(dev nvml.Device) (uint32, uint32, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetEncoderUtilization()
}

func (s *Sim) DeviceGetDecoderUtilization(dev nvml.Device) (uint32, uint32, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetDecoderUtilization()
}

func (s *Sim) DeviceGetMemoryInfo(dev nvml.Device) (nvml.Memory, nvml.Return) {
	if dev == nil {
		return nvml.Memory{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMemoryInfo()
}

func (s *Sim) DeviceGetMemoryInfo_v2(dev nvml.Device) (nvml.Memory_v2, nvml.Return) {
	if dev == nil {
		return nvml.Memory_v2{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMemoryInfo_v2()
}

func (s *Sim) DeviceGetBAR1MemoryInfo(dev nvml.Device) (nvml.BAR1Memory, nvml.Return) {
	if dev == nil {
		return nvml.BAR1Memory{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetBAR1MemoryInfo()
}

func (s *Sim) DeviceGetTemperature(dev nvml.Device, sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetTemperature(sensor)
}

func (s *Sim) DeviceGetTemperatureThreshold(dev nvml.Device, kind nvml.TemperatureThresholds) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetTemperatureThreshold(kind)
}

func (s *Sim) DeviceGetNumFans(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetNumFans()
}

func (s *Sim) DeviceGetFanSpeed(dev nvml.Device) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetFanSpeed()
}

func (s *Sim) DeviceGetFanSpeed_v2(dev nvml.Device, fan int) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetFanSpeed_v2(fan)
}

func (s *Sim) DeviceGetPerformanceState(dev nvml.Device) (nvml.Pstates, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPerformanceState()
}

func (s *Sim) DeviceGetPowerState(dev nvml.Device) (nvml.Pstates, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerState()
}

func (s *Sim) DeviceGetPowerUsage(dev nvml.Device) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerUsage()
}

func (s *Sim) DeviceGetEnforcedPowerLimit(dev nvml.Device) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetEnforcedPowerLimit()
}

func (s *Sim) DeviceGetPowerManagementLimit(dev nvml.Device) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerManagementLimit()
}

func (s *Sim) DeviceGetPowerManagementDefaultLimit(dev nvml.Device) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerManagementDefaultLimit()
}

func (s *Sim) DeviceGetPowerManagementLimitConstraints(dev nvml.Device) (uint32, uint32, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerManagementLimitConstraints()
}

func (s *Sim) DeviceGetPowerManagementMode(dev nvml.Device) (nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPowerManagementMode()
}

func (s *Sim) DeviceGetTotalEnergyConsumption(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetTotalEnergyConsumption()
}

func (s *Sim) DeviceGetClockInfo(dev nvml.Device, ct nvml.ClockType) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetClockInfo(ct)
}

func (s *Sim) DeviceGetClock(dev nvml.Device, ct nvml.ClockType, id nvml.ClockId) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetClock(ct, id)
}

func (s *Sim) DeviceGetMaxClockInfo(dev nvml.Device, ct nvml.ClockType) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMaxClockInfo(ct)
}

func (s *Sim) DeviceGetCurrentClocksEventReasons(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetCurrentClocksEventReasons()
}

func (s *Sim) DeviceGetCurrentClocksThrottleReasons(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetCurrentClocksThrottleReasons()
}

func (s *Sim) DeviceGetSupportedClocksEventReasons(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetSupportedClocksEventReasons()
}

func (s *Sim) DeviceGetSupportedClocksThrottleReasons(dev nvml.Device) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetSupportedClocksThrottleReasons()
}

func (s *Sim) DeviceGetCurrPcieLinkGeneration(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetCurrPcieLinkGeneration()
}

func (s *Sim) DeviceGetCurrPcieLinkWidth(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetCurrPcieLinkWidth()
}

func (s *Sim) DeviceGetMaxPcieLinkGeneration(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMaxPcieLinkGeneration()
}

func (s *Sim) DeviceGetGpuMaxPcieLinkGeneration(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGpuMaxPcieLinkGeneration()
}

func (s *Sim) DeviceGetMaxPcieLinkWidth(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMaxPcieLinkWidth()
}

func (s *Sim) DeviceGetPcieReplayCounter(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetPcieReplayCounter()
}

func (s *Sim) DeviceGetEccMode(dev nvml.Device) (nvml.EnableState, nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetEccMode()
}

func (s *Sim) DeviceGetDefaultEccMode(dev nvml.Device) (nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetDefaultEccMode()
}

func (s *Sim) DeviceGetTotalEccErrors(dev nvml.Device, kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetTotalEccErrors(kind, counter)
}

func (s *Sim) DeviceGetMemoryErrorCounter(dev nvml.Device, kind nvml.MemoryErrorType, counter nvml.EccCounterType, loc nvml.MemoryLocation) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMemoryErrorCounter(kind, counter, loc)
}

func (s *Sim) DeviceGetRetiredPages(dev nvml.Device, cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetRetiredPages(cause)
}

func (s *Sim) DeviceGetRetiredPages_v2(dev nvml.Device, cause nvml.PageRetirementCause) ([]uint64, []uint64, nvml.Return) {
	if dev == nil {
		return nil, nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetRetiredPages_v2(cause)
}

func (s *Sim) DeviceGetRetiredPagesPendingStatus(dev nvml.Device) (nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetRetiredPagesPendingStatus()
}

func (s *Sim) DeviceGetRemappedRows(dev nvml.Device) (int, int, bool, bool, nvml.Return) {
	if dev == nil {
		return 0, 0, false, false, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetRemappedRows()
}

func (s *Sim) DeviceGetNvLinkState(dev nvml.Device, link int) (nvml.EnableState, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetNvLinkState(link)
}

func (s *Sim) DeviceGetNvLinkVersion(dev nvml.Device, link int) (uint32, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetNvLinkVersion(link)
}

func (s *Sim) DeviceGetNvLinkErrorCounter(dev nvml.Device, link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetNvLinkErrorCounter(link, c)
}

func (s *Sim) DeviceGetMaxMigDeviceCount(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMaxMigDeviceCount()
}

func (s *Sim) DeviceGetMigDeviceHandleByIndex(dev nvml.Device, index int) (nvml.Device, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMigDeviceHandleByIndex(index)
}

func (s *Sim) DeviceGetDeviceHandleFromMigDeviceHandle(dev nvml.Device) (nvml.Device, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetDeviceHandleFromMigDeviceHandle()
}

func (s *Sim) DeviceGetGpuInstanceId(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGpuInstanceId()
}

func (s *Sim) DeviceGetComputeInstanceId(dev nvml.Device) (int, nvml.Return) {
	if dev == nil {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetComputeInstanceId()
}

func (s *Sim) DeviceGetGpuInstanceProfileInfo(dev nvml.Device, profileID int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if dev == nil {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGpuInstanceProfileInfo(profileID)
}

func (s *Sim) DeviceGetGpuInstances(dev nvml.Device, info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGpuInstances(info)
}

func (s *Sim) DeviceGetGpuInstanceById(dev nvml.Device, id int) (nvml.GpuInstance, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGpuInstanceById(id)
}

func (s *Sim) DeviceRegisterEvents(dev nvml.Device, types uint64, set nvml.EventSet) nvml.Return {
	if dev == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.RegisterEvents(types, set)
}

func (s *Sim) DeviceGetComputeRunningProcesses(dev nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetComputeRunningProcesses()
}

func (s *Sim) DeviceGetGraphicsRunningProcesses(dev nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetGraphicsRunningProcesses()
}

func (s *Sim) DeviceGetMPSComputeRunningProcesses(dev nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetMPSComputeRunningProcesses()
}

func (s *Sim) DeviceGetProcessUtilization(dev nvml.Device, lastSeenTimestamp uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	if dev == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return dev.GetProcessUtilization(lastSeenTimestamp)
}
