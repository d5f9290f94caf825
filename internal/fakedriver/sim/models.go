//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// gpuModel holds the fixed facts of one real card, as its NVML reports them.
// Values come from nvidia-smi -q and the vendor data sheets of each card.
type gpuModel struct {
	name         string
	brand        nvml.BrandType
	arch         nvml.DeviceArchitecture
	ccMajor      int
	ccMinor      int
	vbios        string
	serialPrefix string // serials are prefix + digits; "" when the card has none

	memoryMiB   uint64 // framebuffer total as NVML reports it
	reservedMiB uint64 // driver/firmware reservation (Memory_v2.Reserved)
	bar1MiB     uint64

	powerLimitW   float64 // default = enforced limit
	powerMinW     float64 // lowest settable limit
	idlePowerW    float64
	loadPowerFrac float64 // power at 100 % utilization as a fraction of the limit

	tempIdleC, tempLoadC float64
	memTempOffsetC       float64 // HBM runs this much warmer than the die
	shutdownC, slowdownC uint32
	gpuMaxC, memMaxC     uint32 // 0: threshold not supported
	fans                 int    // 0: no fans (passively cooled SXM module)

	// Clocks in MHz: maximum per domain, and the idle graphics/video/memory clocks.
	maxGraphics, maxSM, maxMem, maxVideo uint32
	idleGraphics, idleMem, idleVideo     uint32
	idlePState, busyPState               nvml.Pstates

	pciDeviceID, pciSubsystemID uint32 // NVML layout: device<<16 | vendor 0x10DE
	pcieGen, pcieWidth          int
	idlePcieGen                 int // link trains down when idle on consumer cards

	nvlinks      int    // NVLink links on the card
	nvlinkVer    uint32 // NVLink version (4 on Hopper, 3 on Ampere)
	persistence  bool
	hasEncoder   bool // NVENC present
	eventTypes   uint64
	supportedCER uint64 // clock-event reasons the card can report
	features     featureSet
	mig          migTable // MIG profiles; nil on cards without MIG
}

// Datacenter cards report ECC, XID, pstate and clock events; consumer cards
// lack the ECC events.
const (
	datacenterEvents = nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError |
		nvml.EventTypePState | nvml.EventTypeXidCriticalError | nvml.EventTypeClock
	consumerEvents = nvml.EventTypePState | nvml.EventTypeXidCriticalError | nvml.EventTypeClock
)

// h100SXM is the NVIDIA H100 80GB HBM3 (SXM5) of an HGX/DGX H100 board.
var h100SXM = &gpuModel{
	name: "NVIDIA H100 80GB HBM3", brand: nvml.BRAND_NVIDIA, arch: nvml.DEVICE_ARCH_HOPPER,
	ccMajor: 9, ccMinor: 0, vbios: "96.00.99.00.01", serialPrefix: "16549",
	memoryMiB: 81559, reservedMiB: 591, bar1MiB: 131072,
	powerLimitW: 700, powerMinW: 200, idlePowerW: 72, loadPowerFrac: 0.985,
	tempIdleC: 31, tempLoadC: 71, memTempOffsetC: 6,
	shutdownC: 92, slowdownC: 89, gpuMaxC: 87, memMaxC: 95,
	maxGraphics: 1980, maxSM: 1980, maxMem: 2619, maxVideo: 1545,
	idleGraphics: 345, idleMem: 2619, idleVideo: 765,
	idlePState: nvml.PSTATE_0, busyPState: nvml.PSTATE_0,
	pciDeviceID: 0x233010DE, pciSubsystemID: 0x16C110DE, pcieGen: 5, pcieWidth: 16, idlePcieGen: 5,
	nvlinks: 18, nvlinkVer: 4, persistence: true, hasEncoder: false,
	eventTypes: datacenterEvents, supportedCER: nvml.ClocksEventReasonAll &^ nvml.ClocksEventReasonDisplayClockSetting,
	// SXM modules have no fans; Hopper replaced page retirement with row remapping.
	features: allFeatures &^ setOf(featFanSpeed, featRetiredPages),
	mig:      h100MIG80Table,
}

// a100SXM80 is the NVIDIA A100-SXM4-80GB of a DGX A100.
var a100SXM80 = &gpuModel{
	name: "NVIDIA A100-SXM4-80GB", brand: nvml.BRAND_NVIDIA, arch: nvml.DEVICE_ARCH_AMPERE,
	ccMajor: 8, ccMinor: 0, vbios: "92.00.45.00.03", serialPrefix: "14234",
	memoryMiB: 81920, reservedMiB: 557, bar1MiB: 131072,
	powerLimitW: 400, powerMinW: 100, idlePowerW: 61, loadPowerFrac: 0.98,
	tempIdleC: 29, tempLoadC: 66, memTempOffsetC: 5,
	shutdownC: 92, slowdownC: 89, gpuMaxC: 85, memMaxC: 95,
	maxGraphics: 1410, maxSM: 1410, maxMem: 1593, maxVideo: 1290,
	idleGraphics: 210, idleMem: 1593, idleVideo: 585,
	idlePState: nvml.PSTATE_0, busyPState: nvml.PSTATE_0,
	pciDeviceID: 0x20B210DE, pciSubsystemID: 0x147F10DE, pcieGen: 4, pcieWidth: 16, idlePcieGen: 4,
	nvlinks: 12, nvlinkVer: 3, persistence: true, hasEncoder: false,
	eventTypes: datacenterEvents, supportedCER: nvml.ClocksEventReasonAll &^ nvml.ClocksEventReasonDisplayClockSetting,
	// No GPM before Hopper; Ampere uses row remapping, not page retirement.
	features: allFeatures &^ setOf(featFanSpeed, featRetiredPages, featGPM),
	mig:      a100MIG80Table,
}

// rtx4090 is the NVIDIA GeForce RTX 4090 (Ada), a consumer card: no ECC,
// NVLink, GPM, MIG, memory temperature, serial number or row remapping.
var rtx4090 = &gpuModel{
	name: "NVIDIA GeForce RTX 4090", brand: nvml.BRAND_GEFORCE, arch: nvml.DEVICE_ARCH_ADA,
	ccMajor: 8, ccMinor: 9, vbios: "95.02.18.80.5F",
	memoryMiB: 24564, reservedMiB: 364, bar1MiB: 256,
	powerLimitW: 450, powerMinW: 150, idlePowerW: 21, loadPowerFrac: 0.97,
	tempIdleC: 34, tempLoadC: 68,
	shutdownC: 98, slowdownC: 95, gpuMaxC: 90, memMaxC: 0,
	fans:        2,
	maxGraphics: 3120, maxSM: 3120, maxMem: 10501, maxVideo: 2415,
	idleGraphics: 210, idleMem: 405, idleVideo: 1185,
	idlePState: nvml.PSTATE_8, busyPState: nvml.PSTATE_2,
	pciDeviceID: 0x268410DE, pciSubsystemID: 0x167010DE, pcieGen: 4, pcieWidth: 16, idlePcieGen: 1,
	nvlinks: 0, persistence: false, hasEncoder: true,
	eventTypes: consumerEvents, supportedCER: nvml.ClocksEventReasonAll,
	features: allFeatures &^ setOf(featECC, featNVLink, featGPM, featRetiredPages,
		featRemappedRows, featMIG, featMemoryTemperature, featSerial),
}

// v100SXM2 is the Tesla V100-SXM2-32GB (Volta) of a DGX-1/DGX-2: the last
// generation with page retirement instead of row remapping; no MIG, no GPM.
var v100SXM2 = &gpuModel{
	name: "Tesla V100-SXM2-32GB", brand: nvml.BRAND_TESLA, arch: nvml.DEVICE_ARCH_VOLTA,
	ccMajor: 7, ccMinor: 0, vbios: "88.00.80.00.01", serialPrefix: "03231",
	memoryMiB: 32768, reservedMiB: 0, bar1MiB: 32768,
	powerLimitW: 300, powerMinW: 150, idlePowerW: 42, loadPowerFrac: 0.97,
	tempIdleC: 33, tempLoadC: 70, memTempOffsetC: 3,
	shutdownC: 90, slowdownC: 87, gpuMaxC: 83, memMaxC: 85,
	maxGraphics: 1530, maxSM: 1530, maxMem: 877, maxVideo: 1372,
	idleGraphics: 135, idleMem: 877, idleVideo: 555,
	idlePState: nvml.PSTATE_0, busyPState: nvml.PSTATE_0,
	pciDeviceID: 0x1DB510DE, pciSubsystemID: 0x124910DE, pcieGen: 3, pcieWidth: 16, idlePcieGen: 3,
	nvlinks: 6, nvlinkVer: 2, persistence: true, hasEncoder: true,
	eventTypes: datacenterEvents, supportedCER: nvml.ClocksEventReasonAll &^ nvml.ClocksEventReasonDisplayClockSetting,
	features: allFeatures &^ setOf(featFanSpeed, featRemappedRows, featGPM, featMIG),
}
