package exporter

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Metric describes one metric gpuwatch can export: the single source of
// truth for the collectors, `gpuwatch metrics`, docs/metrics.md and the
// --metrics.config validation.
type Metric struct {
	Name string `json:"name"`
	// Type is "gauge", "counter" or "info" (an info metric is a gauge whose
	// value is always 1 and whose labels carry the facts).
	Type string `json:"type"`
	// Unit is the base unit named by the suffix ("bytes", "ratio", ...), or
	// "" for a count or a state.
	Unit   string   `json:"unit"`
	Labels []string `json:"labels"`
	// OptInLabels are appended to Labels only when Options.PIDLabels is on.
	OptInLabels []string `json:"opt_in_labels,omitempty"`
	Help        string   `json:"help"`
	// Source is the NVML call (or gpuwatch component) the value comes from.
	Source string `json:"source"`
	// Collector is the collector group (snapshot.Group*, or "exporter" for
	// series that are always produced) that emits the metric.
	Collector string `json:"collector"`
	// Default says whether the metric is on without a --metrics.config.
	Default bool `json:"default"`
	// Compat names the foreign naming scheme the metric belongs to ("dcgm"
	// for dcgm-exporter's names), or is empty for gpuwatch's own metrics.
	// Compat metrics are emitted only when Options.Compat selects their
	// scheme, and are listed by CompatCatalog rather than Catalog.
	Compat string `json:"compat,omitempty"`
	// DCGMVersions are the dcgm-exporter releases (--compat.dcgm-version)
	// that serve a metric of the "dcgm-4.9" scheme.
	DCGMVersions []string `json:"dcgm_versions,omitempty"`
}

// CollectorExporter is the pseudo-group of the series every scrape carries
// whatever collectors are enabled: gpu_up, the health verdicts (gpu_health_*)
// and the exporter's own gpuwatch_* metrics. It cannot be disabled with Options.Collectors, only per metric.
const CollectorExporter = "exporter"

// Metric types.
const (
	typeGauge   = "gauge"
	typeCounter = "counter"
	typeInfo    = "info"
)

// metricDef is a catalog entry plus everything precomputed once so that a
// scrape never builds a descriptor or a label prefix.
type metricDef struct {
	Metric
	id        int
	valueType prometheus.ValueType
	desc      *prometheus.Desc // Labels
	descOptIn *prometheus.Desc // Labels + OptInLabels; nil without OptInLabels
	text      textForm         // Labels
	textOptIn textForm         // Labels + OptInLabels
	// omitEmpty marks (bit i: Labels[i]) the labels written only with a
	// value, as dcgm-exporter writes its MIG and workload labels; see
	// sparse.go.
	omitEmpty uint32
	sparse    sparseDescs
	// dcgmVersions (bit DCGMVersion.bit()) are the dcgm-exporter
	// releases that serve a compatDCGM49 metric.
	dcgmVersions uint8
}

// catalog holds every metric in declaration order; metricDef.id indexes it.
var catalog []*metricDef

var (
	devLabels     = []string{"gpu", "uuid"}
	migLabels     = []string{"gpu", "uuid", "gpu_instance", "compute_instance", "mig_uuid"}
	ownerLabels   = []string{"gpu", "uuid", "user", "container", "compose_project", "compose_service", "pod", "namespace", "slurm_job"}
	pidOptLabels  = []string{"pid", "command"}
	infoLabels    = []string{"gpu", "uuid", "name", "brand", "architecture", "pci_bus_id", "serial", "vbios_version", "driver_version", "cuda_driver_version", "compute_capability", "persistence_mode", "compute_mode", "mig_mode", "ecc_mode"}
	migInfoLabels = []string{"gpu", "uuid", "gpu_instance", "compute_instance", "mig_uuid", "profile"}
	// The accounting counters: the owner labels plus the MIG instance
	// (empty for a whole GPU); no pid labels, even with them on.
	acctOwnerLabels = withLabels(ownerLabels, "mig_uuid")
	acctAllocLabels = []string{"gpu", "uuid", "mig_uuid", "namespace", "pod", "container", "slurm_job", "user"}
)

const acctSource = "gpuwatch accounting, every --accounting.interval"

func withLabels(base []string, extra ...string) []string {
	return append(append([]string(nil), base...), extra...)
}

// def adds a metric to the catalog. Every metric is on by default; see off.
func def(group, name, typ, unit, source, help string, labels []string) *metricDef {
	m := &metricDef{Metric: Metric{
		Name: name, Type: typ, Unit: unit, Labels: labels, Help: help,
		Source: source, Collector: group, Default: true,
	}}
	m.id = len(catalog)
	m.valueType = prometheus.GaugeValue
	if typ == typeCounter {
		m.valueType = prometheus.CounterValue
	}
	m.desc = prometheus.NewDesc(name, help, labels, nil)
	m.text = newTextForm(name, help, m.valueType, labels)
	catalog = append(catalog, m)
	return m
}

// off makes a metric opt-in; the help text says why.
func (m *metricDef) off() *metricDef {
	m.Default = false
	return m
}

// optIn declares labels added only with Options.PIDLabels.
func (m *metricDef) optIn(labels []string) *metricDef {
	m.OptInLabels = labels
	all := withLabels(m.Labels, labels...)
	m.descOptIn = prometheus.NewDesc(m.Name, m.Help, all, nil)
	m.textOptIn = newTextForm(m.Name, m.Help, m.valueType, all)
	return m
}

const (
	fvPrefix = "nvmlDeviceGetFieldValues"
	gpmCall  = "nvmlGpmMetricsGet"
)

// The catalog. Order here is the order of `gpuwatch metrics` and of the docs.
var (
	// --- always produced ---
	mUp = def(CollectorExporter, "gpu_up", typeGauge, "", "nvmlDeviceGetHandleByIndex + every read (GPU_IS_LOST, GPU_NOT_FOUND)",
		"1 if the GPU answered during the last collection, 0 if it is lost or unreachable.", devLabels)
	mReadingAge = def(CollectorExporter, "gpu_reading_age_seconds", typeGauge, "seconds", "gpuwatch (when the read of the GPU that produced these readings began)",
		"How old the GPU's readings are: the time its read took, or, when a slow driver's read outlasts --collection.timeout, the age of the last reading that completed, served until the next one does. Only for GPUs that are up.", devLabels)

	mHealth = def(CollectorExporter, "gpu_health_status", typeGauge, "", "gpuwatch health policy (docs/health.md)",
		"The GPU's health verdict under the health policy: 1 fit for work (ok, or warn: see gpu_health_warning), 0 failed. Absent while the verdict is unknown (the GPU did not answer in time). Why: gpu_health_check_failing, /api/v1/health.", devLabels)
	mHealthWarn = def(CollectorExporter, "gpu_health_warning", typeGauge, "", "gpuwatch health policy (docs/health.md)",
		"1 if the GPU's health verdict is warn (fit for work, worth a look), 0 if ok or failed. Absent while the verdict is unknown.", devLabels)
	mHealthCheck = def(CollectorExporter, "gpu_health_check_failing", typeGauge, "", "gpuwatch health policy (docs/health.md)",
		"1 if the health check's condition holds on the GPU (at the level the policy gives it), 0 if not. A check whose reading the GPU lacks has no series.", withLabels(devLabels, "check"))
	mHealthNodeCheck = def(CollectorExporter, "gpuwatch_health_node_check_failing", typeGauge, "", "gpuwatch health policy (docs/health.md)",
		"1 if the node-wide health check's condition holds (gpu_count: fewer GPUs than expected), 0 if not.", []string{"check"})

	// --- info ---
	mInfo = def(snapshot.GroupInfo, "gpu_info", typeInfo, "", "nvmlDeviceGetName, GetBrand, GetArchitecture, GetPciInfo, GetSerial, GetVbiosVersion, GetCudaComputeCapability, GetPersistenceMode, GetComputeMode, GetMigMode, GetEccMode; nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion (v1, which answers without libcuda.so.1 in the container; _v2 does not)",
		"Descriptive facts about the GPU; always 1. Join on gpu and uuid in PromQL.", infoLabels)

	// --- utilization ---
	mUtilGPU = def(snapshot.GroupUtilization, "gpu_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetUtilizationRates (gpu)",
		"Fraction of the last sample period during which one or more kernels ran on the GPU.", devLabels)
	mUtilMemory = def(snapshot.GroupUtilization, "gpu_memory_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetUtilizationRates (memory)",
		"Fraction of the last sample period during which device memory was read or written.", devLabels)
	mUtilEncoder = def(snapshot.GroupUtilization, "gpu_encoder_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetEncoderUtilization",
		"Video encoder utilization over the last sample period.", devLabels)
	mUtilDecoder = def(snapshot.GroupUtilization, "gpu_decoder_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetDecoderUtilization",
		"Video decoder utilization over the last sample period.", devLabels)

	// --- memory ---
	mMemTotal = def(snapshot.GroupMemory, "gpu_memory_total_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (total); nvmlDeviceGetMemoryInfo (v1) before R510",
		"Total framebuffer memory.", devLabels)
	mMemUsed = def(snapshot.GroupMemory, "gpu_memory_used_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (used); nvmlDeviceGetMemoryInfo (v1) before R510",
		"Framebuffer memory allocated by processes. Drivers before R510 have only the v1 call, whose used memory includes the driver's reservation.", devLabels)
	mMemFree = def(snapshot.GroupMemory, "gpu_memory_free_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (free); nvmlDeviceGetMemoryInfo (v1) before R510",
		"Framebuffer memory not allocated.", devLabels)
	mMemReserved = def(snapshot.GroupMemory, "gpu_memory_reserved_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (reserved); absent with v1, before R510",
		"Framebuffer memory reserved by the driver and firmware.", devLabels)
	mBAR1Total = def(snapshot.GroupMemory, "gpu_bar1_memory_total_bytes", typeGauge, "bytes", "nvmlDeviceGetBAR1MemoryInfo (bar1Total)",
		"Total BAR1 memory (the window through which the host and peers map GPU memory). Off by default: rarely actionable outside GPUDirect debugging.", devLabels).off()
	mBAR1Used = def(snapshot.GroupMemory, "gpu_bar1_memory_used_bytes", typeGauge, "bytes", "nvmlDeviceGetBAR1MemoryInfo (bar1Used)",
		"Used BAR1 memory. Off by default: rarely actionable outside GPUDirect debugging.", devLabels).off()
	mBAR1Free = def(snapshot.GroupMemory, "gpu_bar1_memory_free_bytes", typeGauge, "bytes", "nvmlDeviceGetBAR1MemoryInfo (bar1Free)",
		"Free BAR1 memory. Off by default: rarely actionable outside GPUDirect debugging.", devLabels).off()

	// --- temperature ---
	mTempGPU = def(snapshot.GroupTemperature, "gpu_temperature_celsius", typeGauge, "celsius", "nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU)",
		"GPU die temperature.", devLabels)
	mTempMemory = def(snapshot.GroupTemperature, "gpu_memory_temperature_celsius", typeGauge, "celsius", fvPrefix+"(NVML_FI_DEV_MEMORY_TEMP)",
		"Device memory (HBM) temperature.", devLabels)
	mTempThreshold = def(snapshot.GroupTemperature, "gpu_temperature_threshold_celsius", typeGauge, "celsius", "nvmlDeviceGetTemperatureThreshold (SLOWDOWN, SHUTDOWN, MEM_MAX)",
		"Temperature at which the GPU slows down (slowdown), shuts down (shutdown), or the memory's maximum operating temperature (memory_max).", withLabels(devLabels, "threshold"))

	// --- fan ---
	mFan = def(snapshot.GroupFan, "gpu_fan_speed_ratio", typeGauge, "ratio", "nvmlDeviceGetNumFans + nvmlDeviceGetFanSpeed_v2 (mean over fans)",
		"Intended fan speed as a fraction of its maximum, averaged over the GPU's fans.", devLabels)

	// --- clocks ---
	mPState = def(snapshot.GroupClocks, "gpu_performance_state", typeGauge, "", "nvmlDeviceGetPerformanceState",
		"Performance state P0 (maximum performance) to P15 (minimum), as its number.", devLabels)
	mClock = def(snapshot.GroupClocks, "gpu_clock_hertz", typeGauge, "hertz", "nvmlDeviceGetClockInfo",
		"Current clock frequency per clock domain (graphics, sm, memory, video).", withLabels(devLabels, "clock"))
	mClockMax = def(snapshot.GroupClocks, "gpu_clock_max_hertz", typeGauge, "hertz", "nvmlDeviceGetMaxClockInfo",
		"Maximum clock frequency per clock domain.", withLabels(devLabels, "clock"))

	// --- clock events ---
	mClockEvent = def(snapshot.GroupClockEvents, "gpu_clock_event_active", typeGauge, "", "nvmlDeviceGetCurrentClocksEventReasons",
		"1 while the clock-event (throttle) reason holds clocks down, else 0; one series per reason the driver knows.", withLabels(devLabels, "reason"))

	// --- power ---
	mPowerUsage = def(snapshot.GroupPower, "gpu_power_usage_watts", typeGauge, "watts", "nvmlDeviceGetPowerUsage",
		"Power drawn by the GPU and its memory. On Ampere (except GA100) and later GPUs NVML reports the average over the last second, on older ones an instantaneous reading.", devLabels)
	mPowerLimit = def(snapshot.GroupPower, "gpu_power_limit_watts", typeGauge, "watts", "nvmlDeviceGetEnforcedPowerLimit",
		"Power limit the driver enforces (the lowest of all limits in effect).", devLabels)
	mPowerLimitDefault = def(snapshot.GroupPower, "gpu_power_limit_default_watts", typeGauge, "watts", "nvmlDeviceGetPowerManagementDefaultLimit",
		"Power limit the board ships with (what gpu_power_limit_watts returns to after a reset).", devLabels)
	mPowerLimitMin = def(snapshot.GroupPower, "gpu_power_limit_min_watts", typeGauge, "watts", "nvmlDeviceGetPowerManagementLimitConstraints (minLimit)",
		"Lowest power limit an administrator may set (nvidia-smi -pl).", devLabels)
	mPowerLimitMax = def(snapshot.GroupPower, "gpu_power_limit_max_watts", typeGauge, "watts", "nvmlDeviceGetPowerManagementLimitConstraints (maxLimit)",
		"Highest power limit an administrator may set (nvidia-smi -pl).", devLabels)
	mEnergy = def(snapshot.GroupPower, "gpu_energy_joules_total", typeCounter, "joules", "nvmlDeviceGetTotalEnergyConsumption",
		"Energy consumed since the driver was loaded; resets when the driver reloads.", devLabels)

	// --- PCIe ---
	mPCIeTx = def(snapshot.GroupPCIe, "gpu_pcie_transmit_bytes_total", typeCounter, "bytes", fvPrefix+"(NVML_FI_DEV_PCIE_COUNT_TX_BYTES)",
		"Bytes the GPU transmitted over PCIe. NVML's counter is 32 bits wide and wraps (every 70 ms or so at Gen5 x16 speed); gpuwatch widens it across the wraps it sees, one per collection, so rate() is right below 4 GiB per collection interval and too low above. Prefer gpu_gpm_pcie_transmit_bytes_per_second on Hopper and later.", devLabels)
	mPCIeRx = def(snapshot.GroupPCIe, "gpu_pcie_receive_bytes_total", typeCounter, "bytes", fvPrefix+"(NVML_FI_DEV_PCIE_COUNT_RX_BYTES)",
		"Bytes the GPU received over PCIe; 32-bit counter widened across wraps, see gpu_pcie_transmit_bytes_total. Prefer gpu_gpm_pcie_receive_bytes_per_second on Hopper and later.", devLabels)
	mPCIeGen = def(snapshot.GroupPCIe, "gpu_pcie_link_generation", typeGauge, "", "nvmlDeviceGetCurrPcieLinkGeneration",
		"Current PCIe link generation (drops at idle to save power).", devLabels)
	mPCIeWidth = def(snapshot.GroupPCIe, "gpu_pcie_link_width", typeGauge, "", "nvmlDeviceGetCurrPcieLinkWidth",
		"Current PCIe link width in lanes.", devLabels)
	mPCIeMaxGen = def(snapshot.GroupPCIe, "gpu_pcie_link_max_generation", typeGauge, "", "nvmlDeviceGetMaxPcieLinkGeneration",
		"Maximum PCIe link generation of the GPU and the slot.", devLabels)
	mPCIeMaxWidth = def(snapshot.GroupPCIe, "gpu_pcie_link_max_width", typeGauge, "", "nvmlDeviceGetMaxPcieLinkWidth",
		"Maximum PCIe link width in lanes.", devLabels)
	mPCIeReplays = def(snapshot.GroupPCIe, "gpu_pcie_replays_total", typeCounter, "", "nvmlDeviceGetPcieReplayCounter",
		"PCIe replays (retransmissions after link errors) since the driver was loaded.", devLabels)

	// --- ECC and memory repair ---
	mECCErrors = def(snapshot.GroupECC, "gpu_ecc_errors_total", typeCounter, "", "nvmlDeviceGetTotalEccErrors (CORRECTED|UNCORRECTED × VOLATILE_ECC|AGGREGATE_ECC)",
		"ECC errors in device memory. counter=\"volatile\" counts since the driver was loaded and resets on reboot or driver reload; counter=\"aggregate\" is kept in the InfoROM for the life of the GPU.", withLabels(devLabels, "type", "counter"))
	mRetiredPages = def(snapshot.GroupECC, "gpu_retired_pages", typeGauge, "", "nvmlDeviceGetRetiredPages (MULTIPLE_SINGLE_BIT_ECC_ERRORS, DOUBLE_BIT_ECC_ERROR)",
		"Memory pages retired (pre-Ampere GPUs), by cause: multiple_single_bit or double_bit ECC errors.", withLabels(devLabels, "cause"))
	mRetiredPending = def(snapshot.GroupECC, "gpu_retired_pages_pending", typeGauge, "", "nvmlDeviceGetRetiredPagesPendingStatus",
		"1 if a page is waiting to be retired at the next driver reload, else 0.", devLabels)
	mRemappedRows = def(snapshot.GroupECC, "gpu_remapped_rows", typeGauge, "", "nvmlDeviceGetRemappedRows (corrRows, uncRows)",
		"Memory rows remapped (Ampere and later), by the kind of error that caused it: correctable or uncorrectable.", withLabels(devLabels, "type"))
	mRemapPending = def(snapshot.GroupECC, "gpu_remapped_rows_pending", typeGauge, "", "nvmlDeviceGetRemappedRows (isPending)",
		"1 if a row remapping waits for a GPU reset, else 0.", devLabels)
	mRemapFailure = def(snapshot.GroupECC, "gpu_remapped_rows_failure", typeGauge, "", "nvmlDeviceGetRemappedRows (failureOccurred)",
		"1 if a row remapping failed (the GPU needs service), else 0.", devLabels)

	// --- NVLink ---
	mNVLinkUp = def(snapshot.GroupNVLink, "gpu_nvlink_up", typeGauge, "", "nvmlDeviceGetNvLinkState",
		"1 if the NVLink link is active, else 0.", withLabels(devLabels, "link"))
	mNVLinkTx = def(snapshot.GroupNVLink, "gpu_nvlink_transmit_bytes_total", typeCounter, "bytes", fvPrefix+"(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, scopeId=link)",
		"Data bytes transmitted on the NVLink link.", withLabels(devLabels, "link"))
	mNVLinkRx = def(snapshot.GroupNVLink, "gpu_nvlink_receive_bytes_total", typeCounter, "bytes", fvPrefix+"(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, scopeId=link)",
		"Data bytes received on the NVLink link.", withLabels(devLabels, "link"))
	mNVLinkErrors = def(snapshot.GroupNVLink, "gpu_nvlink_errors_total", typeCounter, "", "nvmlDeviceGetNvLinkErrorCounter (DL_CRC_FLIT, DL_CRC_DATA, DL_REPLAY, DL_RECOVERY)",
		"NVLink data-link errors by type: crc_flit, crc_data, replay, recovery.", withLabels(devLabels, "link", "type"))

	// --- XID ---
	mXID = def(snapshot.GroupXID, "gpu_xid_errors_total", typeCounter, "", "nvmlEventSetWait (nvmlEventTypeXidCriticalError)",
		"XID error events by XID code, counted since the exporter started. A code's series appears with its first event; alert on gpu_xid_events_total, which exists from start.", withLabels(devLabels, "xid"))
	mXIDEvents = def(snapshot.GroupXID, "gpu_xid_events_total", typeCounter, "", "nvmlEventSetWait (nvmlEventTypeXidCriticalError)",
		"XID error events of every code, counted since the exporter started; present from start at 0, so increase() sees the first XID.", devLabels)
	mXIDLast = def(snapshot.GroupXID, "gpu_xid_last_code", typeGauge, "", "nvmlEventSetWait (nvmlEventTypeXidCriticalError)",
		"Code of the last XID error event since the exporter started, 0 while there was none (DCGM_FI_DEV_XID_ERRORS semantics).", devLabels)

	// --- GPM (Hopper and later) ---
	mGPMSMActive    = gpmDef(snapshot.GroupGPM, "gpu_gpm_sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL", "Fraction of time at least one warp was resident on an SM, averaged over SMs.", devLabels)
	mGPMSMOccupancy = gpmDef(snapshot.GroupGPM, "gpu_gpm_sm_occupancy_ratio", "NVML_GPM_METRIC_SM_OCCUPANCY", "Resident warps as a fraction of the maximum, averaged over SMs.", devLabels)
	mGPMTensor      = gpmDef(snapshot.GroupGPM, "gpu_gpm_tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", "Fraction of cycles any tensor pipe was active.", devLabels)
	mGPMDRAM        = gpmDef(snapshot.GroupGPM, "gpu_gpm_dram_active_ratio", "NVML_GPM_METRIC_DRAM_BW_UTIL", "Device memory bandwidth used as a fraction of the peak.", devLabels)
	mGPMFP16        = gpmDef(snapshot.GroupGPM, "gpu_gpm_fp16_active_ratio", "NVML_GPM_METRIC_FP16_UTIL", "Fraction of cycles the FP16 pipe was active.", devLabels)
	mGPMFP32        = gpmDef(snapshot.GroupGPM, "gpu_gpm_fp32_active_ratio", "NVML_GPM_METRIC_FP32_UTIL", "Fraction of cycles the FP32 pipe was active.", devLabels)
	mGPMFP64        = gpmDef(snapshot.GroupGPM, "gpu_gpm_fp64_active_ratio", "NVML_GPM_METRIC_FP64_UTIL", "Fraction of cycles the FP64 pipe was active.", devLabels)
	mGPMGraphics    = gpmDef(snapshot.GroupGPM, "gpu_gpm_graphics_active_ratio", "NVML_GPM_METRIC_GRAPHICS_UTIL", "Fraction of time any compute or graphics engine was active (DCGM's GR_ENGINE_ACTIVE).", devLabels)
	mGPMPCIeTx      = gpmRateDef("gpu_gpm_pcie_transmit_bytes_per_second", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", "PCIe traffic from the GPU, averaged over the GPM window (at least a second). Unlike gpu_pcie_transmit_bytes_total it cannot miss a counter wrap.")
	mGPMPCIeRx      = gpmRateDef("gpu_gpm_pcie_receive_bytes_per_second", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", "PCIe traffic to the GPU, averaged over the GPM window (at least a second).")
	mGPMNVLinkTx    = gpmRateDef("gpu_gpm_nvlink_transmit_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "NVLink write bandwidth over all links, averaged over the GPM window.")
	mGPMNVLinkRx    = gpmRateDef("gpu_gpm_nvlink_receive_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "NVLink read bandwidth over all links, averaged over the GPM window.")

	// --- MIG ---
	mMIGInfo = def(snapshot.GroupMIG, "gpu_mig_info", typeInfo, "", "nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId, GetUUID; profile from the MIG device's GetName (\"... MIG 1g.10gb\")",
		"One series per MIG compute instance; always 1. Join on mig_uuid.", migInfoLabels)
	mMIGModePending = def(snapshot.GroupMIG, "gpu_mig_mode_pending", typeGauge, "", "nvmlDeviceGetMigMode (pendingMode != currentMode)",
		"1 while a MIG mode change (nvidia-smi -mig) waits for a GPU reset, else 0; absent on GPUs without MIG.", devLabels)
	mMIGMemTotal = def(snapshot.GroupMIG, "gpu_mig_memory_total_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (v1 before R510) on the MIG device handle (total)",
		"Memory of the MIG GPU instance. Memory belongs to the GPU instance: it is reported once, on its compute instance with the lowest ID, so sum() does not count it per compute instance.", migLabels)
	mMIGMemUsed = def(snapshot.GroupMIG, "gpu_mig_memory_used_bytes", typeGauge, "bytes", "nvmlDeviceGetMemoryInfo_v2 (v1 before R510) on the MIG device handle (used)",
		"Memory used in the MIG GPU instance, reported once, on its compute instance with the lowest ID.", migLabels)
	mMIGGPMSMActive    = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL via nvmlGpmMigSampleGet", "SM active ratio of the MIG instance.", migLabels)
	mMIGGPMSMOccupancy = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_sm_occupancy_ratio", "NVML_GPM_METRIC_SM_OCCUPANCY via nvmlGpmMigSampleGet", "SM occupancy ratio of the MIG instance.", migLabels)
	mMIGGPMTensor      = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL via nvmlGpmMigSampleGet", "Tensor pipe active ratio of the MIG instance.", migLabels)
	mMIGGPMDRAM        = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_dram_active_ratio", "NVML_GPM_METRIC_DRAM_BW_UTIL via nvmlGpmMigSampleGet", "Memory bandwidth ratio of the MIG instance.", migLabels)
	mMIGGPMFP16        = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_fp16_active_ratio", "NVML_GPM_METRIC_FP16_UTIL via nvmlGpmMigSampleGet", "FP16 pipe active ratio of the MIG instance.", migLabels)
	mMIGGPMFP32        = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_fp32_active_ratio", "NVML_GPM_METRIC_FP32_UTIL via nvmlGpmMigSampleGet", "FP32 pipe active ratio of the MIG instance.", migLabels)
	mMIGGPMFP64        = gpmDef(snapshot.GroupMIG, "gpu_mig_gpm_fp64_active_ratio", "NVML_GPM_METRIC_FP64_UTIL via nvmlGpmMigSampleGet", "FP64 pipe active ratio of the MIG instance.", migLabels)

	// --- processes ---
	mProcesses = def(snapshot.GroupProcesses, "gpu_processes", typeGauge, "", "nvmlDeviceGetComputeRunningProcesses_v3 + nvmlDeviceGetGraphicsRunningProcesses_v3",
		"Number of processes holding a context on the GPU.", devLabels)
	mProcMemory = def(snapshot.GroupProcesses, "gpu_process_memory_used_bytes", typeGauge, "bytes", "nvmlDeviceGetComputeRunningProcesses_v3 (usedGpuMemory) + attribution",
		"GPU memory used by the owner's processes on the GPU (summed per owner; per process with pid labels).", ownerLabels).optIn(pidOptLabels)
	mProcSM = def(snapshot.GroupProcesses, "gpu_process_sm_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetProcessUtilization (smUtil) + attribution",
		"Share of the GPU's SM time used by the owner's processes (summed per owner).", ownerLabels).optIn(pidOptLabels)
	mProcMemUtil = def(snapshot.GroupProcesses, "gpu_process_memory_utilization_ratio", typeGauge, "ratio", "nvmlDeviceGetProcessUtilization (memUtil) + attribution",
		"Share of the GPU's memory-controller time used by the owner's processes (summed per owner).", ownerLabels).optIn(pidOptLabels)

	mKubernetesAllocation = def(snapshot.GroupProcesses, "gpu_kubernetes_allocation_info", typeInfo, "", "kubelet pod-resources List: device plugins (nvidia.com/gpu, nvidia.com/mig-*) and DRA claims (gpu.nvidia.com)",
		"The Kubernetes pod container the kubelet allocated this GPU (or MIG instance, mig_uuid) to, whether or not its processes run; always 1. Join on gpu, uuid.",
		[]string{"gpu", "uuid", "mig_uuid", "namespace", "pod", "container"})
	mSlurmJobAllocation = def(snapshot.GroupProcesses, "gpu_slurm_job_info", typeInfo, "", "Slurm GRES index of running jobs (scontrol show job -d) + attribution",
		"The Slurm job that holds this GPU, whether or not its processes are busy; always 1. Join on gpu, uuid.",
		[]string{"gpu", "uuid", "job_id", "user", "account", "partition"})

	// Accounting: running totals per owner, integrated between scrapes on
	// the accounting's own ticker (internal/accounting, docs/accounting.md).
	mAcctSMSeconds = def(snapshot.GroupProcesses, "gpu_process_sm_seconds_total", typeCounter, "seconds", acctSource+" (per-process samples; GPM on MIG)",
		"SM time used by the owner's processes: SM utilization (of the GPU, or of the MIG instance mig_uuid) times time. Absent where nothing measures it (MIG without GPM).", acctOwnerLabels)
	mAcctSeconds = def(snapshot.GroupProcesses, "gpu_process_seconds_total", typeCounter, "seconds", acctSource+" (process lists)",
		"Time with at least one of the owner's processes on the GPU (or MIG instance mig_uuid).", acctOwnerLabels)
	mAcctMemory = def(snapshot.GroupProcesses, "gpu_process_memory_used_byte_seconds_total", typeCounter, "byte_seconds", acctSource+" (usedGpuMemory)",
		"GPU memory held by the owner's processes over time; divide by 3600*2^30 for GiB-hours.", acctOwnerLabels)
	mAcctEnergy = def(snapshot.GroupProcesses, "gpu_process_energy_joules_total", typeCounter, "joules", acctSource+" (nvmlDeviceGetTotalEnergyConsumption split by SM time; MIG by instance size)",
		"The owner's share of the GPU's energy (see docs/accounting.md for the split); with gpu_idle_energy_joules_total it adds up to the GPU's energy counter's increase.", acctOwnerLabels)
	mAcctIdleEnergy = def(snapshot.GroupProcesses, "gpu_idle_energy_joules_total", typeCounter, "joules", acctSource+" (nvmlDeviceGetTotalEnergyConsumption)",
		"Energy of the GPU (or of its MIG instances) in the intervals nobody held it.", devLabels)
	mAcctAllocSeconds = def(snapshot.GroupProcesses, "gpu_allocation_seconds_total", typeCounter, "seconds", acctSource+" (kubelet pod-resources, Slurm GRES)",
		"Time the Kubernetes pod container or Slurm job held the GPU (or MIG instance mig_uuid), busy or not.", acctAllocLabels)
	mAcctAllocIdle = def(snapshot.GroupProcesses, "gpu_allocation_idle_seconds_total", typeCounter, "seconds", acctSource+" (allocation + its processes' SM time)",
		"Held time in which the allocation's own processes used less SM time than --accounting.idle-threshold (none running counts as idle).", acctAllocLabels)

	// --- the exporter's own ---
	mCollectorDuration = def(CollectorExporter, "gpuwatch_collector_duration_seconds", typeGauge, "seconds", "gpuwatch (time spent reading the group from NVML)",
		"Time the collector group took to read every GPU in the last collection.", []string{"collector"})
	mCollectorSuccess = def(CollectorExporter, "gpuwatch_collector_success", typeGauge, "", "gpuwatch",
		"1 if the collector group read without unexpected errors, else 0.", []string{"collector"})
	mAttributionErrors = def(CollectorExporter, "gpuwatch_attribution_errors_total", typeCounter, "", "gpuwatch attribution",
		"Owner lookups that failed since start, by source (procfs, docker, cri, kubelet, slurm).", []string{"source"})
	mReadingsDropped = def(CollectorExporter, "gpuwatch_readings_dropped_total", typeCounter, "", "gpuwatch validation of every NVML reading",
		"Readings dropped since start, by field (temperature, power, energy, utilization, memory, clock, performance_state, fan_speed, process_memory), because no GPU can produce them: the driver's \"unavailable\" sentinels (0xFFFFFFFF) or impossible values (over 200 °C, power over twice the maximum limit, a ratio over 1, memory used over total, a clock over twice its maximum). The reading is then absent. Rising: the driver is in trouble.", []string{"field"})
	mDriverInfo = def(CollectorExporter, "gpuwatch_driver_info", typeInfo, "", "nvmlSystemGetDriverVersion; the path libnvidia-ml was loaded from (/proc/self/maps)",
		"The NVIDIA driver library gpuwatch loaded: its version, its branch (R550) and where it was loaded from (\"simulator\" for --backend=sim); always 1.", []string{"version", "branch", "library"})
	mDriverLimited = def(CollectorExporter, "gpuwatch_driver_limited_group", typeGauge, "", "dlsym of every NVML function gpuwatch calls, once at start",
		"One series per enabled collector group that the loaded driver library cannot fully serve, because it lacks NVML functions or field IDs (an older driver branch); always 1. reason says \"unavailable: no ...\" (the group is off) or \"partial: no ...\" and which readings are missing. The README has the table of groups by driver branch.", []string{"group", "reason"})
	mAcctTicks = def(CollectorExporter, "gpuwatch_accounting_ticks_total", typeCounter, "", acctSource,
		"Ticks of the accounting since start, one every --accounting.interval, each reading every GPU; for the whole process. Absent when accounting is off.", nil)
	mAcctCPU = def(CollectorExporter, "gpuwatch_accounting_cpu_seconds_total", typeCounter, "seconds", acctSource+" (the tick thread's CPU clock)",
		"CPU time (user and system) the accounting's ticks took on their own thread, summed over every tick and every GPU: reading the GPUs, attributing their processes, integrating the counters (and feeding the job journal where it runs). What --accounting costs, to compare with process_cpu_seconds_total; the runtime's work for the ticks on other threads (garbage collection, waking the process) is not in it. Absent when accounting is off.", nil)
	mSnapshotDuration = def(CollectorExporter, "gpuwatch_snapshot_duration_seconds", typeGauge, "seconds", "gpuwatch",
		"Time the collection this scrape reports took: reading every GPU and attributing its processes. Scrapes that arrive while a collection runs share it.", nil)
)

func gpmDef(group, name, metric, help string, labels []string) *metricDef {
	return def(group, name, typeGauge, "ratio", gpmCall+"("+metric+")", help, labels)
}

// gpmRateDef declares a whole-GPU GPM bandwidth (NVML: MiB/s).
func gpmRateDef(name, metric, help string) *metricDef {
	return def(snapshot.GroupGPM, name, typeGauge, "bytes_per_second", gpmCall+"("+metric+", MiB/s)", help, devLabels)
}

// Catalog returns every metric gpuwatch exports under its own names, in
// catalog order.
func Catalog() []Metric { return catalogOf("") }

// CompatCatalog returns the metrics of a foreign naming scheme ("dcgm"), in
// catalog order.
func CompatCatalog(scheme string) []Metric { return catalogOf(scheme) }

func catalogOf(compat string) []Metric {
	var out []Metric
	for _, m := range catalog {
		if m.Compat != compat {
			continue
		}
		c := m.Metric
		c.Labels = append([]string(nil), m.Labels...)
		c.OptInLabels = append([]string(nil), m.OptInLabels...)
		out = append(out, c)
	}
	return out
}

// catalogByName returns the catalog sorted by name: the family order of the
// text exposition, the same as a prometheus.Registry's Gather.
// It is built in init, which runs after every def above.
var catalogByName []*metricDef

func init() {
	catalogByName = append([]*metricDef(nil), catalog...)
	sort.SliceStable(catalogByName, func(i, j int) bool { return catalogByName[i].Name < catalogByName[j].Name })
}

func lookupMetric(name string) *metricDef {
	for _, m := range catalog {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// allLabels is Labels plus OptInLabels, for display.
func (m *Metric) allLabels(sep string) string {
	s := strings.Join(m.Labels, sep)
	if len(m.OptInLabels) > 0 {
		s += " [+" + strings.Join(m.OptInLabels, sep) + "]"
	}
	return s
}
