package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// dcgm-exporter's names from its release 4.9 on (--compat=dcgm
// --compat.dcgm-version=4.9 or 4.10). 4.9 renames the fields of its
// default collectors to the names DCGM 4.7 gives them, eleven of them in a
// base unit (hertz, joules, a 0-1 ratio, bytes, bytes per second), renames
// the driver-version label on every series to DCGM_FI_SYSTEM_DRIVER_VERSION
// and adds DCGM_FI_DEV_FB_CAPACITY_BYTES; 4.10 renames the PCIe and NVLink
// profiling rates to *_BYTES_PER_SECOND. Fields outside the default
// collectors keep their earlier names and units, as dcgm-exporter's custom
// collectors still accept them. docs/dcgm-compat.md has each name's source.

// dcgmLabels49 is dcgmLabels with the driver-version label of 4.9 and
// later, at the same position.
var dcgmLabels49 = func() []string {
	l := append([]string(nil), dcgmLabels...)
	l[dcgmLabelDriver] = "DCGM_FI_SYSTEM_DRIVER_VERSION"
	return l
}()

// dcgmLabelDriver is the position of the driver-version label.
const dcgmLabelDriver = 7

// Which releases serve a metric of the 4.9 generation.
var (
	dcgmFrom49  = DCGM49.bit() | DCGM410.bit()
	dcgmOnly49  = DCGM49.bit()
	dcgmFrom410 = DCGM410.bit()
)

func dcgm49Def(versions uint8, group, name, typ, unit, source, help string) *metricDef {
	return dcgm49DefLabels(versions, group, name, typ, unit, source, help, dcgmLabels49)
}

func dcgm49DefLabels(versions uint8, group, name, typ, unit, source, help string, labels []string) *metricDef {
	m := def(group, name, typ, unit, source, help, labels)
	m.Compat = compatDCGM49
	m.dcgmVersions = versions
	for i, n := range DCGMVersionNames {
		if versions&DCGMVersion(i).bit() != 0 {
			m.DCGMVersions = append(m.DCGMVersions, n)
		}
	}
	return m.omitWhenEmpty(dcgmOmitEmpty...)
}

// The renamed default fields, and DCGM_FI_DEV_FB_CAPACITY_BYTES.
var (
	d49GPUTemp = dcgm49Def(dcgmFrom49, snapshot.GroupTemperature, "DCGM_FI_DEV_GPU_TEMP_CELSIUS", typeGauge, "celsius", "nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU)",
		"GPU temperature, in degrees Celsius.")
	d49MemoryTemp = dcgm49Def(dcgmFrom49, snapshot.GroupTemperature, "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", typeGauge, "celsius", fvPrefix+"(NVML_FI_DEV_MEMORY_TEMP)",
		"Memory temperature, in degrees Celsius.")
	d49PowerUsage = dcgm49Def(dcgmFrom49, snapshot.GroupPower, "DCGM_FI_DEV_BOARD_POWER_WATTS", typeGauge, "watts", "nvmlDeviceGetPowerUsage",
		"Board power draw, in watts.")
	d49Energy = dcgm49Def(dcgmFrom49, snapshot.GroupPower, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", typeCounter, "joules", "nvmlDeviceGetTotalEnergyConsumption",
		"Energy the GPU consumed since the driver was loaded, in joules.")
	d49SMClock = dcgm49Def(dcgmFrom49, snapshot.GroupClocks, "DCGM_FI_DEV_SM_CLOCK_HERTZ", typeGauge, "hertz", "nvmlDeviceGetClockInfo (SM)",
		"SM clock frequency, in hertz.")
	d49MemClock = dcgm49Def(dcgmFrom49, snapshot.GroupClocks, "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", typeGauge, "hertz", "nvmlDeviceGetClockInfo (MEM)",
		"Memory clock frequency, in hertz.")
	d49PCIeReplay = dcgm49Def(dcgmFrom49, snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_REPLAY_TOTAL", typeCounter, "", "nvmlDeviceGetPcieReplayCounter",
		"Total number of PCIe retries.")
	d49GPUUtil = dcgm49Def(dcgmFrom49, snapshot.GroupUtilization, "DCGM_FI_DEV_GPU_UTIL_RATIO", typeGauge, "ratio", "nvmlDeviceGetUtilizationRates (gpu)",
		"GPU utilization, as a ratio from 0 to 1.")
	d49MemCopyUtil = dcgm49Def(dcgmFrom49, snapshot.GroupUtilization, "DCGM_FI_DEV_MEMORY_UTIL_RATIO", typeGauge, "ratio", "nvmlDeviceGetUtilizationRates (memory)",
		"Memory (copy engine) utilization, as a ratio from 0 to 1.")
	d49EncUtil = dcgm49Def(dcgmFrom49, snapshot.GroupUtilization, "DCGM_FI_DEV_ENC_UTIL_RATIO", typeGauge, "ratio", "nvmlDeviceGetEncoderUtilization",
		"Encoder utilization, as a ratio from 0 to 1.")
	d49DecUtil = dcgm49Def(dcgmFrom49, snapshot.GroupUtilization, "DCGM_FI_DEV_DEC_UTIL_RATIO", typeGauge, "ratio", "nvmlDeviceGetDecoderUtilization",
		"Decoder utilization, as a ratio from 0 to 1.")
	d49XIDError = dcgm49DefLabels(dcgmFrom49, snapshot.GroupXID, "DCGM_FI_DEV_XID_ERROR", typeGauge, "", "nvmlEventSetWait (nvmlEventTypeXidCriticalError): the newest event's code",
		"Code of the last XID error (0 while there was none since gpuwatch started); err_code is the same code, err_msg its description.",
		withLabels(dcgmLabels49, "err_code", "err_msg"))
	d49FBCapacity = dcgm49Def(dcgmFrom49, snapshot.GroupMemory, "DCGM_FI_DEV_FB_CAPACITY_BYTES", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (total); MIG: per GPU instance",
		"Framebuffer memory total, in bytes.")
	d49FBFree = dcgm49Def(dcgmFrom49, snapshot.GroupMemory, "DCGM_FI_DEV_FB_FREE_BYTES", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (free); MIG: per GPU instance",
		"Framebuffer memory free, in bytes.")
	d49FBUsed = dcgm49Def(dcgmFrom49, snapshot.GroupMemory, "DCGM_FI_DEV_FB_USED_BYTES", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (used); MIG: per GPU instance",
		"Framebuffer memory used, in bytes.")
	d49FBReserved = dcgm49Def(dcgmFrom49, snapshot.GroupMemory, "DCGM_FI_DEV_FB_RESERVED_BYTES", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (reserved)",
		"Framebuffer memory reserved by the driver, in bytes.")
	d49NVLinkThroughput = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC + RX) where the GPU has GPM, else "+fvPrefix+"(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX + RX, every link) between two reads",
		"NVLink throughput over all links, transmit plus receive, in bytes per second.")
	d49VGPULicense = dcgm49Def(dcgmFrom49, snapshot.GroupInfo, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", typeGauge, "", "nvmlDeviceGetVirtualizationMode: 0 where the GPU is not a vGPU guest",
		"vGPU License status (0: no vGPU license, as on a GPU that is not a vGPU guest; absent on a vGPU guest, whose license gpuwatch does not read).")
	d49RemapUncorrectable = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", typeCounter, "", "nvmlDeviceGetRemappedRows (uncRows)",
		"Number of rows remapped for uncorrectable errors.")
	d49RemapCorrectable = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", typeCounter, "", "nvmlDeviceGetRemappedRows (corrRows)",
		"Number of rows remapped for correctable errors.")
	d49RemapFailed = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_FAILED", typeGauge, "", "nvmlDeviceGetRemappedRows (failureOccurred)",
		"Whether remapping of rows has failed (1) or not (0).")
	d49ProfGREngine = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_GRAPHICS_UTIL); MIG: per GPU instance",
		"Ratio of time the graphics or compute engine is active.")
	d49ProfTensor = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_TENSOR_UTIL_RATIO", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_ANY_TENSOR_UTIL); MIG: per GPU instance",
		"Ratio of cycles a tensor pipe is active.")
	d49ProfDRAM = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_DRAM_UTIL_RATIO", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_DRAM_BW_UTIL); MIG: per GPU instance",
		"Ratio of cycles the device memory interface is sending or receiving data.")
	d49ProfPCIeTx = dcgm49Def(dcgmOnly49, snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_TX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_TX_PER_SEC)",
		"The rate of data transmitted over the PCIe bus, including protocol headers, in bytes per second.")
	d49ProfPCIeRx = dcgm49Def(dcgmOnly49, snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_RX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_RX_PER_SEC)",
		"The rate of data received over the PCIe bus, including protocol headers, in bytes per second.")
	d410ProfPCIeTx = dcgm49Def(dcgmFrom410, snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_TX_PER_SEC)",
		"The rate of data transmitted over the PCIe bus, including protocol headers, in bytes per second.")
	d410ProfPCIeRx = dcgm49Def(dcgmFrom410, snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_RX_PER_SEC)",
		"The rate of data received over the PCIe bus, including protocol headers, in bytes per second.")
)

// The optional fields, under the names and units they had before 4.9,
// with the 4.9 label set, and the fabric health fields 4.8.4 added as
// opt-in (DCGM field IDs 174 and 175; dcgm_fields.h names the mask's
// fields after nvml.h's).
var (
	d49SlowdownTemp  = dcgm49Def(dcgmFrom49, snapshot.GroupTemperature, "DCGM_FI_DEV_SLOWDOWN_TEMP", typeGauge, "celsius", dSlowdownTemp.Source, dSlowdownTemp.Help)
	d49ShutdownTemp  = dcgm49Def(dcgmFrom49, snapshot.GroupTemperature, "DCGM_FI_DEV_SHUTDOWN_TEMP", typeGauge, "celsius", dShutdownTemp.Source, dShutdownTemp.Help)
	d49PowerLimit    = dcgm49Def(dcgmFrom49, snapshot.GroupPower, "DCGM_FI_DEV_POWER_MGMT_LIMIT", typeGauge, "watts", dPowerLimit.Source, dPowerLimit.Help)
	d49EnforcedLimit = dcgm49Def(dcgmFrom49, snapshot.GroupPower, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", typeGauge, "watts", "nvmlDeviceGetEnforcedPowerLimit",
		"Effective power limit the driver enforces (in W).")
	d49FabricHealthMask = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_FABRIC_HEALTH_MASK", typeGauge, "", "nvmlDeviceGetGpuFabricInfoV (healthMask); NVSwitch-connected Hopper and later",
		"GPU fabric health mask: nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* fields, each at its shift.")
	d49FabricHealthSummary = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", typeGauge, "", "nvmlDeviceGetGpuFabricInfoV (healthSummary, struct version 3); NVSwitch-connected Hopper and later",
		"GPU fabric health summary: 1 healthy, 2 unhealthy, 3 limited capacity (NVML_GPU_FABRIC_HEALTH_SUMMARY_*).")
	d49ThrottleReasons = dcgm49Def(dcgmFrom49, snapshot.GroupClockEvents, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", typeGauge, "", dThrottleReasons.Source, dThrottleReasons.Help)
	d49FanSpeed        = dcgm49Def(dcgmFrom49, snapshot.GroupFan, "DCGM_FI_DEV_FAN_SPEED", typeGauge, "percent", dFanSpeed.Source, dFanSpeed.Help)
	d49PCIeLinkGen     = dcgm49Def(dcgmFrom49, snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_LINK_GEN", typeGauge, "", dPCIeLinkGen.Source, dPCIeLinkGen.Help)
	d49PCIeLinkWidth   = dcgm49Def(dcgmFrom49, snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_LINK_WIDTH", typeGauge, "", dPCIeLinkWidth.Source, dPCIeLinkWidth.Help)
	d49ECCSBEVol       = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", typeCounter, "", dECCSBEVol.Source, dECCSBEVol.Help)
	d49ECCDBEVol       = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", typeCounter, "", dECCDBEVol.Source, dECCDBEVol.Help)
	d49ECCSBEAgg       = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", typeCounter, "", dECCSBEAgg.Source, dECCSBEAgg.Help)
	d49ECCDBEAgg       = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", typeCounter, "", dECCDBEAgg.Source, dECCDBEAgg.Help)
	d49RetiredSBE      = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_SBE", typeCounter, "", dRetiredSBE.Source, dRetiredSBE.Help)
	d49RetiredDBE      = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_DBE", typeCounter, "", dRetiredDBE.Source, dRetiredDBE.Help)
	d49RetiredPending  = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_PENDING", typeCounter, "", dRetiredPending.Source, dRetiredPending.Help)
	d49RemapPending    = dcgm49Def(dcgmFrom49, snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_PENDING", typeGauge, "", dRemapPending.Source, dRemapPending.Help)
	d49NVLinkCRCFlit   = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", typeCounter, "", dNVLinkCRCFlit.Source, dNVLinkCRCFlit.Help)
	d49NVLinkCRCData   = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", typeCounter, "", dNVLinkCRCData.Source, dNVLinkCRCData.Help)
	d49NVLinkReplay    = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", typeCounter, "", dNVLinkReplay.Source, dNVLinkReplay.Help)
	d49NVLinkRecovery  = dcgm49Def(dcgmFrom49, snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", typeCounter, "", dNVLinkRecovery.Source, dNVLinkRecovery.Help)
	d49ProfSMActive    = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_SM_ACTIVE", typeGauge, "ratio", dProfSMActive.Source, dProfSMActive.Help)
	d49ProfSMOccupancy = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_SM_OCCUPANCY", typeGauge, "ratio", dProfSMOccupancy.Source, dProfSMOccupancy.Help)
	d49ProfFP64        = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", typeGauge, "ratio", dProfFP64.Source, dProfFP64.Help)
	d49ProfFP32        = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", typeGauge, "ratio", dProfFP32.Source, dProfFP32.Help)
	d49ProfFP16        = dcgm49Def(dcgmFrom49, snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", typeGauge, "ratio", dProfFP16.Source, dProfFP16.Help)
	d49ProfNVLinkTx    = dcgm49Def(dcgmOnly49, snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_TX_BYTES", typeGauge, "bytes_per_second", dProfNVLinkTx.Source, dProfNVLinkTx.Help)
	d49ProfNVLinkRx    = dcgm49Def(dcgmOnly49, snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_RX_BYTES", typeGauge, "bytes_per_second", dProfNVLinkRx.Source, dProfNVLinkRx.Help)
	d410ProfNVLinkTx   = dcgm49Def(dcgmFrom410, snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", typeGauge, "bytes_per_second", dProfNVLinkTx.Source, dProfNVLinkTx.Help)
	d410ProfNVLinkRx   = dcgm49Def(dcgmFrom410, snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", typeGauge, "bytes_per_second", dProfNVLinkRx.Source, dProfNVLinkRx.Help)
)

// dcgmGen is one dcgm-exporter generation: the metric each reading goes
// to (nil: not served by that generation) and the factors from the
// snapshot's base units to the generation's units.
type dcgmGen struct {
	gpuTemp, memoryTemp, slowdownTemp, shutdownTemp    *metricDef
	powerUsage, powerLimit, enforcedLimit, energy      *metricDef
	smClock, memClock, throttleReasons                 *metricDef
	gpuUtil, memCopyUtil, encUtil, decUtil, fanSpeed   *metricDef
	fbTotal, fbFree, fbUsed, fbReserved                *metricDef
	xid, vgpuLicense                                   *metricDef
	pcieReplay, pcieLinkGen, pcieLinkWidth             *metricDef
	eccSBEVol, eccDBEVol, eccSBEAgg, eccDBEAgg         *metricDef
	retiredSBE, retiredDBE, retiredPending             *metricDef
	remapCorrectable, remapUncorrectable               *metricDef
	remapFailure, remapPending                         *metricDef
	nvlinkCRCFlit, nvlinkCRCData, nvlinkReplay         *metricDef
	nvlinkRecovery, nvlinkBandwidth                    *metricDef
	fabricHealthMask, fabricHealthSummary              *metricDef
	profGREngine, profSMActive, profSMOccupancy        *metricDef
	profTensor, profDRAM, profFP64, profFP32, profFP16 *metricDef
	profPCIeTx, profPCIeRx, profNVLinkTx, profNVLinkRx *metricDef

	// Factors from joules, hertz, a 0-1 ratio, bytes and bytes per
	// second (NVLink bandwidth) to the generation's units.
	energyScale, clockScale, utilScale, memoryScale, nvlinkScale float64
}

// dcgmGen48 is every release up to 4.8: mJ, MHz, percent, MiB and, for
// NVLink bandwidth, MiB/s.
var dcgmGen48 = dcgmGen{
	gpuTemp: dGPUTemp, memoryTemp: dMemoryTemp, slowdownTemp: dSlowdownTemp, shutdownTemp: dShutdownTemp,
	powerUsage: dPowerUsage, powerLimit: dPowerLimit, energy: dEnergy,
	smClock: dSMClock, memClock: dMemClock, throttleReasons: dThrottleReasons,
	gpuUtil: dGPUUtil, memCopyUtil: dMemCopyUtil, encUtil: dEncUtil, decUtil: dDecUtil, fanSpeed: dFanSpeed,
	fbTotal: dFBTotal, fbFree: dFBFree, fbUsed: dFBUsed, fbReserved: dFBReserved,
	xid: dXIDErrors, vgpuLicense: dVGPULicense,
	pcieReplay: dPCIeReplay, pcieLinkGen: dPCIeLinkGen, pcieLinkWidth: dPCIeLinkWidth,
	eccSBEVol: dECCSBEVol, eccDBEVol: dECCDBEVol, eccSBEAgg: dECCSBEAgg, eccDBEAgg: dECCDBEAgg,
	retiredSBE: dRetiredSBE, retiredDBE: dRetiredDBE, retiredPending: dRetiredPending,
	remapCorrectable: dRemapCorrectable, remapUncorrectable: dRemapUncorrectable,
	remapFailure: dRemapFailure, remapPending: dRemapPending,
	nvlinkCRCFlit: dNVLinkCRCFlit, nvlinkCRCData: dNVLinkCRCData, nvlinkReplay: dNVLinkReplay,
	nvlinkRecovery: dNVLinkRecovery, nvlinkBandwidth: dNVLinkBandwidth,
	profGREngine: dProfGREngine, profSMActive: dProfSMActive, profSMOccupancy: dProfSMOccupancy,
	profTensor: dProfTensor, profDRAM: dProfDRAM, profFP64: dProfFP64, profFP32: dProfFP32, profFP16: dProfFP16,
	profPCIeTx: dProfPCIeTx, profPCIeRx: dProfPCIeRx, profNVLinkTx: dProfNVLinkTx, profNVLinkRx: dProfNVLinkRx,
	energyScale: mJPerJoule, clockScale: 1 / hertzPerMHz, utilScale: percent, memoryScale: 1.0 / mib, nvlinkScale: 1.0 / mib,
}

// dcgmGen49 is release 4.9: the renamed default fields in base units, the
// optional ones as before. Fan speed stays in percent (an optional field).
var dcgmGen49 = dcgmGen{
	gpuTemp: d49GPUTemp, memoryTemp: d49MemoryTemp, slowdownTemp: d49SlowdownTemp, shutdownTemp: d49ShutdownTemp,
	powerUsage: d49PowerUsage, powerLimit: d49PowerLimit, enforcedLimit: d49EnforcedLimit, energy: d49Energy,
	smClock: d49SMClock, memClock: d49MemClock, throttleReasons: d49ThrottleReasons,
	gpuUtil: d49GPUUtil, memCopyUtil: d49MemCopyUtil, encUtil: d49EncUtil, decUtil: d49DecUtil, fanSpeed: d49FanSpeed,
	fbTotal: d49FBCapacity, fbFree: d49FBFree, fbUsed: d49FBUsed, fbReserved: d49FBReserved,
	xid: d49XIDError, vgpuLicense: d49VGPULicense,
	pcieReplay: d49PCIeReplay, pcieLinkGen: d49PCIeLinkGen, pcieLinkWidth: d49PCIeLinkWidth,
	eccSBEVol: d49ECCSBEVol, eccDBEVol: d49ECCDBEVol, eccSBEAgg: d49ECCSBEAgg, eccDBEAgg: d49ECCDBEAgg,
	retiredSBE: d49RetiredSBE, retiredDBE: d49RetiredDBE, retiredPending: d49RetiredPending,
	remapCorrectable: d49RemapCorrectable, remapUncorrectable: d49RemapUncorrectable,
	remapFailure: d49RemapFailed, remapPending: d49RemapPending,
	nvlinkCRCFlit: d49NVLinkCRCFlit, nvlinkCRCData: d49NVLinkCRCData, nvlinkReplay: d49NVLinkReplay,
	nvlinkRecovery: d49NVLinkRecovery, nvlinkBandwidth: d49NVLinkThroughput,
	fabricHealthMask: d49FabricHealthMask, fabricHealthSummary: d49FabricHealthSummary,
	profGREngine: d49ProfGREngine, profSMActive: d49ProfSMActive, profSMOccupancy: d49ProfSMOccupancy,
	profTensor: d49ProfTensor, profDRAM: d49ProfDRAM, profFP64: d49ProfFP64, profFP32: d49ProfFP32, profFP16: d49ProfFP16,
	profPCIeTx: d49ProfPCIeTx, profPCIeRx: d49ProfPCIeRx, profNVLinkTx: d49ProfNVLinkTx, profNVLinkRx: d49ProfNVLinkRx,
	energyScale: 1, clockScale: 1, utilScale: 1, memoryScale: 1, nvlinkScale: 1,
}

// dcgmGen410 is release 4.10: 4.9 with the PCIe and NVLink profiling
// rates renamed to *_BYTES_PER_SECOND.
var dcgmGen410 = func() dcgmGen {
	g := dcgmGen49
	g.profPCIeTx, g.profPCIeRx = d410ProfPCIeTx, d410ProfPCIeRx
	g.profNVLinkTx, g.profNVLinkRx = d410ProfNVLinkTx, d410ProfNVLinkRx
	return g
}()

// dcgmGenOf is the generation a --compat.dcgm-version serves.
func dcgmGenOf(v DCGMVersion) *dcgmGen {
	switch v {
	case DCGM49:
		return &dcgmGen49
	case DCGM410:
		return &dcgmGen410
	default:
		return &dcgmGen48
	}
}
