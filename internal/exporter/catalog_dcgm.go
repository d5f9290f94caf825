package exporter

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// dcgm-exporter's names, units and labels (--compat=dcgm). Each entry keeps
// dcgm-exporter's TYPE and unit (percent, MiB, mJ, MHz) even where the native
// metric uses a base unit, because dashboards, alerts and Prometheus Adapter
// rules written for dcgm-exporter compare against those numbers. The source
// of each value is the same snapshot reading as its native twin; the
// differences are listed in docs/dcgm-compat.md.

// dcgmLabels is dcgm-exporter's label set: the device identity, the MIG
// GPU instance, and the workload that holds the GPU, as its Kubernetes pod
// mapping and its HPC job mapping add them. Like dcgm-exporter, a series
// carries the MIG and workload labels only when they have a value
// (dcgmOmitEmpty).
//
// The host's name goes in Hostname, as every dcgm-exporter release up to
// 4.5.3-4.8.2 names it, or in hostname (Options.HostnameLowerCase), as
// 4.8.3 and later do (upstream #655); the other of the two stays empty and
// is left out.
var dcgmLabels = []string{
	"gpu", "UUID", "pci_bus_id", "device", "modelName", DCGMHostnameLabel, DCGMHostnameLabelLower, "DCGM_FI_DRIVER_VERSION",
	"GPU_I_PROFILE", "GPU_I_ID",
	"container", "namespace", "pod", "hpc_job",
}

// The two names of the host label.
const (
	DCGMHostnameLabel      = "Hostname"
	DCGMHostnameLabelLower = "hostname"
)

// dcgmOmitEmpty are the labels dcgm-exporter writes only with a value.
var dcgmOmitEmpty = []string{DCGMHostnameLabel, DCGMHostnameLabelLower, "GPU_I_PROFILE", "GPU_I_ID", "container", "namespace", "pod", "hpc_job"}

// Positions in dcgmLabels that the collector fills per series.
const (
	dcgmLabelHostname      = 5
	dcgmLabelHostnameLower = 6
	dcgmLabelGIProfile     = 8
	dcgmLabelGIID          = 9
	dcgmLabelContainer     = 10
	dcgmLabelNamespace     = 11
	dcgmLabelPod           = 12
	dcgmLabelHPCJob        = 13
)

func dcgmDef(group, name, typ, unit, source, help string) *metricDef {
	return dcgmDefLabels(group, name, typ, unit, source, help, dcgmLabels)
}

// dcgmDefLabels is dcgmDef for a metric with labels after dcgmLabels.
func dcgmDefLabels(group, name, typ, unit, source, help string, labels []string) *metricDef {
	m := def(group, name, typ, unit, source, help, labels)
	m.Compat = compatDCGM
	return m.omitWhenEmpty(dcgmOmitEmpty...)
}

var (
	dGPUTemp = dcgmDef(snapshot.GroupTemperature, "DCGM_FI_DEV_GPU_TEMP", typeGauge, "celsius", "nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU)",
		"GPU temperature (in C).")
	dMemoryTemp = dcgmDef(snapshot.GroupTemperature, "DCGM_FI_DEV_MEMORY_TEMP", typeGauge, "celsius", fvPrefix+"(NVML_FI_DEV_MEMORY_TEMP)",
		"Memory temperature (in C).")
	dSlowdownTemp = dcgmDef(snapshot.GroupTemperature, "DCGM_FI_DEV_SLOWDOWN_TEMP", typeGauge, "celsius", "nvmlDeviceGetTemperatureThreshold (SLOWDOWN)",
		"Slowdown temperature threshold (in C).")
	dShutdownTemp = dcgmDef(snapshot.GroupTemperature, "DCGM_FI_DEV_SHUTDOWN_TEMP", typeGauge, "celsius", "nvmlDeviceGetTemperatureThreshold (SHUTDOWN)",
		"Shutdown temperature threshold (in C).")

	dPowerUsage = dcgmDef(snapshot.GroupPower, "DCGM_FI_DEV_POWER_USAGE", typeGauge, "watts", "nvmlDeviceGetPowerUsage",
		"Power draw (in W).")
	dPowerLimit = dcgmDef(snapshot.GroupPower, "DCGM_FI_DEV_POWER_MGMT_LIMIT", typeGauge, "watts", "nvmlDeviceGetEnforcedPowerLimit",
		"Power limit in effect (in W).")
	dEnergy = dcgmDef(snapshot.GroupPower, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", typeCounter, "millijoules", "nvmlDeviceGetTotalEnergyConsumption",
		"Total energy consumption since the driver was loaded (in mJ).")

	dSMClock = dcgmDef(snapshot.GroupClocks, "DCGM_FI_DEV_SM_CLOCK", typeGauge, "megahertz", "nvmlDeviceGetClockInfo (SM)",
		"SM clock frequency (in MHz).")
	dMemClock = dcgmDef(snapshot.GroupClocks, "DCGM_FI_DEV_MEM_CLOCK", typeGauge, "megahertz", "nvmlDeviceGetClockInfo (MEM)",
		"Memory clock frequency (in MHz).")
	dThrottleReasons = dcgmDef(snapshot.GroupClockEvents, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", typeGauge, "", "nvmlDeviceGetCurrentClocksEventReasons",
		"Current clock throttle reasons, as NVML's bitmask (1 idle, 2 application clocks, 4 SW power cap, 8 HW slowdown, 16 sync boost, 32 SW thermal, 64 HW thermal, 128 HW power brake, 256 display clocks).")

	dGPUUtil = dcgmDef(snapshot.GroupUtilization, "DCGM_FI_DEV_GPU_UTIL", typeGauge, "percent", "nvmlDeviceGetUtilizationRates (gpu)",
		"GPU utilization (in %).")
	dMemCopyUtil = dcgmDef(snapshot.GroupUtilization, "DCGM_FI_DEV_MEM_COPY_UTIL", typeGauge, "percent", "nvmlDeviceGetUtilizationRates (memory)",
		"Memory utilization (in %).")
	dEncUtil = dcgmDef(snapshot.GroupUtilization, "DCGM_FI_DEV_ENC_UTIL", typeGauge, "percent", "nvmlDeviceGetEncoderUtilization",
		"Encoder utilization (in %).")
	dDecUtil = dcgmDef(snapshot.GroupUtilization, "DCGM_FI_DEV_DEC_UTIL", typeGauge, "percent", "nvmlDeviceGetDecoderUtilization",
		"Decoder utilization (in %).")

	dFBTotal = dcgmDef(snapshot.GroupMemory, "DCGM_FI_DEV_FB_TOTAL", typeGauge, "mebibytes", "nvmlDeviceGetMemoryInfo_v2 (total); MIG: per GPU instance",
		"Framebuffer memory total (in MiB).")
	dFBFree = dcgmDef(snapshot.GroupMemory, "DCGM_FI_DEV_FB_FREE", typeGauge, "mebibytes", "nvmlDeviceGetMemoryInfo_v2 (free); MIG: per GPU instance",
		"Framebuffer memory free (in MiB).")
	dFBUsed = dcgmDef(snapshot.GroupMemory, "DCGM_FI_DEV_FB_USED", typeGauge, "mebibytes", "nvmlDeviceGetMemoryInfo_v2 (used); MIG: per GPU instance",
		"Framebuffer memory used (in MiB).")
	dFBReserved = dcgmDef(snapshot.GroupMemory, "DCGM_FI_DEV_FB_RESERVED", typeGauge, "mebibytes", "nvmlDeviceGetMemoryInfo_v2 (reserved)",
		"Framebuffer memory reserved by the driver (in MiB).")

	dFanSpeed = dcgmDef(snapshot.GroupFan, "DCGM_FI_DEV_FAN_SPEED", typeGauge, "percent", "nvmlDeviceGetFanSpeed_v2 (mean over fans)",
		"Fan speed (in %).")

	dXIDErrors = dcgmDefLabels(snapshot.GroupXID, "DCGM_FI_DEV_XID_ERRORS", typeGauge, "", "nvmlEventSetWait (nvmlEventTypeXidCriticalError): the newest event's code",
		"Value of the last XID error encountered (0 while there was none since gpuwatch started); err_code is the same code, err_msg its description.",
		withLabels(dcgmLabels, "err_code", "err_msg"))

	dPCIeReplay = dcgmDef(snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", typeCounter, "", "nvmlDeviceGetPcieReplayCounter",
		"Total number of PCIe retries.")
	dPCIeLinkGen = dcgmDef(snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_LINK_GEN", typeGauge, "", "nvmlDeviceGetCurrPcieLinkGeneration",
		"PCIe current link generation.")
	dPCIeLinkWidth = dcgmDef(snapshot.GroupPCIe, "DCGM_FI_DEV_PCIE_LINK_WIDTH", typeGauge, "", "nvmlDeviceGetCurrPcieLinkWidth",
		"PCIe current link width.")

	dECCSBEVol = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", typeCounter, "", "nvmlDeviceGetTotalEccErrors (CORRECTED, VOLATILE_ECC)",
		"Total number of single-bit volatile ECC errors.")
	dECCDBEVol = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", typeCounter, "", "nvmlDeviceGetTotalEccErrors (UNCORRECTED, VOLATILE_ECC)",
		"Total number of double-bit volatile ECC errors.")
	dECCSBEAgg = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", typeCounter, "", "nvmlDeviceGetTotalEccErrors (CORRECTED, AGGREGATE_ECC)",
		"Total number of single-bit persistent ECC errors.")
	dECCDBEAgg = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", typeCounter, "", "nvmlDeviceGetTotalEccErrors (UNCORRECTED, AGGREGATE_ECC)",
		"Total number of double-bit persistent ECC errors.")
	dRetiredSBE = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_SBE", typeCounter, "", "nvmlDeviceGetRetiredPages (MULTIPLE_SINGLE_BIT_ECC_ERRORS)",
		"Total number of retired pages due to single-bit errors.")
	dRetiredDBE = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_DBE", typeCounter, "", "nvmlDeviceGetRetiredPages (DOUBLE_BIT_ECC_ERROR)",
		"Total number of retired pages due to double-bit errors.")
	dRetiredPending = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_RETIRED_PENDING", typeCounter, "", "nvmlDeviceGetRetiredPagesPendingStatus",
		"Total number of pages pending retirement.")
	dRemapCorrectable = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", typeCounter, "", "nvmlDeviceGetRemappedRows (corrRows)",
		"Number of remapped rows for correctable errors.")
	dRemapUncorrectable = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", typeCounter, "", "nvmlDeviceGetRemappedRows (uncRows)",
		"Number of remapped rows for uncorrectable errors.")
	dRemapFailure = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_FAILURE", typeGauge, "", "nvmlDeviceGetRemappedRows (failureOccurred)",
		"Whether remapping of rows has failed.")
	dRemapPending = dcgmDef(snapshot.GroupECC, "DCGM_FI_DEV_ROW_REMAP_PENDING", typeGauge, "", "nvmlDeviceGetRemappedRows (isPending)",
		"Whether remapping of rows is pending a GPU reset.")

	dVGPULicense = dcgmDef(snapshot.GroupInfo, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", typeGauge, "", "nvmlDeviceGetVirtualizationMode: 0 where the GPU is not a vGPU guest",
		"vGPU License status (0: no vGPU license, as on a GPU that is not a vGPU guest; absent on a vGPU guest, whose license gpuwatch does not read).")

	dNVLinkCRCFlit = dcgmDef(snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", typeCounter, "", "nvmlDeviceGetNvLinkErrorCounter (DL_CRC_FLIT), summed over links",
		"Total number of NVLink flow-control CRC errors.")
	dNVLinkCRCData = dcgmDef(snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", typeCounter, "", "nvmlDeviceGetNvLinkErrorCounter (DL_CRC_DATA), summed over links",
		"Total number of NVLink data CRC errors.")
	dNVLinkReplay = dcgmDef(snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", typeCounter, "", "nvmlDeviceGetNvLinkErrorCounter (DL_REPLAY), summed over links",
		"Total number of NVLink retries.")
	dNVLinkRecovery = dcgmDef(snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", typeCounter, "", "nvmlDeviceGetNvLinkErrorCounter (DL_RECOVERY), summed over links",
		"Total number of NVLink recovery errors.")

	dProfGREngine = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_GRAPHICS_UTIL); MIG: per GPU instance",
		"Ratio of time the graphics engine is active.")
	dProfSMActive = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_SM_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_SM_UTIL); MIG: per GPU instance",
		"The ratio of cycles an SM has at least 1 warp assigned.")
	dProfSMOccupancy = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_SM_OCCUPANCY", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_SM_OCCUPANCY); MIG: per GPU instance",
		"The ratio of number of warps resident on an SM.")
	dProfTensor = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_ANY_TENSOR_UTIL); MIG: per GPU instance",
		"Ratio of cycles the tensor (HMMA) pipe is active.")
	dProfDRAM = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_DRAM_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_DRAM_BW_UTIL); MIG: per GPU instance",
		"Ratio of cycles the device memory interface is active sending or receiving data.")
	dProfFP64 = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_FP64_UTIL); MIG: per GPU instance",
		"Ratio of cycles the fp64 pipes are active.")
	dProfFP32 = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_FP32_UTIL); MIG: per GPU instance",
		"Ratio of cycles the fp32 pipes are active.")
	dProfFP16 = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", typeGauge, "ratio", gpmCall+"(NVML_GPM_METRIC_FP16_UTIL); MIG: per GPU instance",
		"Ratio of cycles the fp16 pipes are active.")
	dProfPCIeTx = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_TX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_TX_PER_SEC)",
		"The rate of data transmitted over the PCIe bus, including protocol headers, in bytes per second.")
	dProfPCIeRx = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_PCIE_RX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_PCIE_RX_PER_SEC)",
		"The rate of data received over the PCIe bus, including protocol headers, in bytes per second.")
	dProfNVLinkTx = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_TX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC)",
		"The rate of data transmitted over NVLink, in bytes per second.")
	dProfNVLinkRx = dcgmDef(snapshot.GroupGPM, "DCGM_FI_PROF_NVLINK_RX_BYTES", typeGauge, "bytes_per_second", gpmCall+"(NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC)",
		"The rate of data received over NVLink, in bytes per second.")
	// DCGM reports this field as a rate in MiB/s although dcgm-exporter
	// declares it a counter; dashboards plot it directly, so it is kept so.
	// The unit's evidence is in docs/dcgm-compat.md.
	dNVLinkBandwidth = dcgmDef(snapshot.GroupNVLink, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", typeCounter, "mebibytes_per_second", gpmCall+"(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC + RX) where the GPU has GPM, else "+fvPrefix+"(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX + RX, every link) between two reads",
		"NVLink bandwidth over all links, transmit plus receive, in MiB/s (a rate, as DCGM reports it, despite the counter type).")
)
