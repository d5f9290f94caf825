//go:build cgo

package sim

import (
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Readings of one physical device, in NVML's units: percent, MiB→bytes,
// milliwatts, millijoules, MHz, degrees Celsius.

const mib = 1 << 20

func pct(ratio float64) uint32 { return uint32(math.Round(100 * ratio)) }

// GetUtilizationRates is NOT_SUPPORTED in MIG mode, as on real GPUs.
func (d *device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	e, r := d.begin(featUtilization)
	if r != nvml.SUCCESS {
		return nvml.Utilization{}, r
	}
	if d.migEnabled {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	t := seconds(e)
	if d.sick.isBogus(bogusUtilization) {
		return nvml.Utilization{Gpu: 255, Memory: 255}, r
	}
	return nvml.Utilization{Gpu: pct(d.act.util(t)), Memory: pct(d.act.memUtil(t))}, r
}

// samplingPeriodUs is the driver's utilization sampling period reported
// with encoder/decoder utilization.
const samplingPeriodUs = 167000

func (d *device) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	e, r := d.begin(featEncoder)
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	// Cards without NVENC (H100, A100) still answer, with 0 %.
	if !d.model.hasEncoder || !d.act.busy() {
		return 0, samplingPeriodUs, r
	}
	return pct(0.08 * d.act.wave(seconds(e))), samplingPeriodUs, r
}

func (d *device) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	e, r := d.begin(featDecoder)
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	if !d.act.busy() {
		return 0, samplingPeriodUs, r
	}
	return pct(0.05 * d.act.wave(seconds(e))), samplingPeriodUs, r
}

// allocatedBytes is the framebuffer memory held by the device's processes
// alive at elapsed time e.
func (d *device) allocatedBytes(e time.Duration) uint64 {
	if u := d.usedThroughout(e); u != nil {
		return u.device
	}
	var sum uint64
	for _, p := range d.procs() {
		if p.alive(e) {
			sum += p.usedMemory
		}
	}
	return sum
}

// usedMemory is what processes that never start nor end hold.
type usedMemory struct {
	device uint64
	gi     map[*gpuInstance]uint64
}

// usedThroughout is procs' memory when each of them lives from the
// start and never ends, else nil.
func usedThroughout(procs []simProcess) *usedMemory {
	u := &usedMemory{gi: map[*gpuInstance]uint64{}}
	for i := range procs {
		p := &procs[i]
		if p.start > 0 || p.end >= 0 {
			return nil
		}
		u.device += p.usedMemory
		if p.mig != nil {
			u.gi[p.mig.gi] += p.usedMemory
		}
	}
	return u
}

// usedThroughout is the memory summed at placement when it holds at
// elapsed time e: every process lives throughout, and no other
// (processes_from's) is on the device.
func (d *device) usedThroughout(e time.Duration) *usedMemory {
	if d.processesUsed == nil || e < 0 || d.sim.live != nil {
		return nil
	}
	return d.processesUsed
}

// allocatedBytes is the memory of every process in procs, alive or not:
// what must fit when processes are placed, whatever their lives.
func allocatedBytes(procs []simProcess) uint64 {
	var sum uint64
	for _, p := range procs {
		sum += p.usedMemory
	}
	return sum
}

// GetMemoryInfo is the v1 API: Used includes the driver's reservation.
func (d *device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	e, r := d.begin(featMemory)
	if r != nvml.SUCCESS {
		return nvml.Memory{}, r
	}
	total := d.model.memoryMiB * mib
	used := d.model.reservedMiB*mib + d.allocatedBytes(e)
	if d.sick.isBogus(bogusMemory) {
		used = total + 1024*mib // and free wraps
	}
	return nvml.Memory{Total: total, Used: used, Free: total - used}, r
}

// GetMemoryInfo_v2 reports the reservation separately: Used is allocations only.
func (d *device) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	e, r := d.begin(featMemory)
	if r != nvml.SUCCESS {
		return nvml.Memory_v2{}, r
	}
	total := d.model.memoryMiB * mib
	reserved := d.model.reservedMiB * mib
	used := d.allocatedBytes(e)
	if d.sick.isBogus(bogusMemory) {
		used = total + 1024*mib // and free wraps
	}
	return nvml.Memory_v2{
		Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2),
		Total:   total, Reserved: reserved, Used: used, Free: total - reserved - used,
	}, r
}

func (d *device) GetBAR1MemoryInfo() (nvml.BAR1Memory, nvml.Return) {
	_, r := d.begin(featBAR1)
	if r != nvml.SUCCESS {
		return nvml.BAR1Memory{}, r
	}
	total := d.model.bar1MiB * mib
	used := uint64(2+3*len(d.procs())) * mib
	return nvml.BAR1Memory{Bar1Total: total, Bar1Used: used, Bar1Free: total - used}, r
}

// temperature is the die temperature in °C at elapsed seconds t.
func (d *device) temperature(t float64) uint32 {
	m := d.model
	c := m.tempIdleC + (m.tempLoadC-m.tempIdleC)*d.act.util(t) + float64(d.index%4)*0.8
	return uint32(math.Round(c))
}

func (d *device) GetTemperature(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
	e, r := d.begin(featTemperature)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if sensor != nvml.TEMPERATURE_GPU {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	if d.sick.isBogus(bogusTemperature) {
		return sentinel32, r
	}
	return d.temperature(seconds(e)), r
}

// memoryTemperature is the HBM temperature; ok is false on cards without a
// memory sensor.
func (d *device) memoryTemperature(t float64) (uint32, bool) {
	if !d.features.has(featMemoryTemperature) {
		return 0, false
	}
	return d.temperature(t) + uint32(d.model.memTempOffsetC), true
}

func (d *device) GetTemperatureThreshold(kind nvml.TemperatureThresholds) (uint32, nvml.Return) {
	_, r := d.begin(featTemperatureThresholds)
	if r != nvml.SUCCESS {
		return 0, r
	}
	var v uint32
	switch kind {
	case nvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
		v = d.model.shutdownC
	case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
		v = d.model.slowdownC
	case nvml.TEMPERATURE_THRESHOLD_MEM_MAX:
		v = d.model.memMaxC
	case nvml.TEMPERATURE_THRESHOLD_GPU_MAX:
		v = d.model.gpuMaxC
	default:
		if kind >= nvml.TEMPERATURE_THRESHOLD_COUNT {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
	}
	if v == 0 {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return v, r
}

// fanSpeed is the intended fan speed in percent.
func (d *device) fanSpeed(t float64, fan int) uint32 {
	if d.sick.isBogus(bogusFanSpeed) {
		return sentinel32
	}
	return pct(0.30+0.55*d.act.util(t)) + uint32(fan)
}

// beginFans folds the model's fan count into the feature check: passively
// cooled modules answer NOT_SUPPORTED, as NVML documents.
func (d *device) beginFans() (time.Duration, nvml.Return) {
	e, r := d.begin(featFanSpeed)
	if r == nvml.SUCCESS && d.model.fans == 0 {
		r = nvml.ERROR_NOT_SUPPORTED
	}
	return e, r
}

func (d *device) GetNumFans() (int, nvml.Return) {
	_, r := d.beginFans()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.fans, r
}

func (d *device) GetFanSpeed() (uint32, nvml.Return) {
	e, r := d.beginFans()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.fanSpeed(seconds(e), 0), r
}

func (d *device) GetFanSpeed_v2(fan int) (uint32, nvml.Return) {
	e, r := d.beginFans()
	if r != nvml.SUCCESS {
		return 0, r
	}
	if fan < 0 || fan >= d.model.fans {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.fanSpeed(seconds(e), fan), r
}

func (d *device) GetPerformanceState() (nvml.Pstates, nvml.Return) {
	_, r := d.begin(featPState)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if d.sick.isBogus(bogusPState) {
		return -1, r
	}
	if d.act.busy() {
		return d.model.busyPState, r
	}
	return d.model.idlePState, r
}

// GetPowerState is the older name of GetPerformanceState.
func (d *device) GetPowerState() (nvml.Pstates, nvml.Return) { return d.GetPerformanceState() }

// --- power and energy ---

// powerW is the board power draw in watts: idle power plus a share of the
// headroom proportional to utilization.
func (d *device) powerW(t float64) float64 {
	m := d.model
	return m.idlePowerW + (m.powerLimitW*m.loadPowerFrac-m.idlePowerW)*d.act.util(t)
}

// energyJ is the energy since driver load in joules: the closed-form
// integral of powerW, plus the idle energy of the uptime before the start.
func (d *device) energyJ(t float64) float64 {
	return d.sick.energySinceReload(t, d.energySinceLoad)
}

// energySinceLoad is energyJ without a driver reload (energy_reset_at).
func (d *device) energySinceLoad(t float64) float64 {
	m := d.model
	before := uptimeBeforeStart.Seconds()
	return m.idlePowerW*(before+t) + (m.powerLimitW*m.loadPowerFrac-m.idlePowerW)*d.act.utilIntegral(t)
}

func (d *device) GetPowerUsage() (uint32, nvml.Return) {
	e, r := d.begin(featPower)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if d.sick.isBogus(bogusPower) {
		return sentinel32, r
	}
	return uint32(math.Round(d.powerW(seconds(e)) * 1000)), r
}

func (d *device) limitMilliwatts() uint32 { return uint32(d.model.powerLimitW * 1000) }

func (d *device) GetEnforcedPowerLimit() (uint32, nvml.Return) {
	_, r := d.begin(featPowerLimit)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.limitMilliwatts(), r
}

func (d *device) GetPowerManagementLimit() (uint32, nvml.Return) { return d.GetEnforcedPowerLimit() }

func (d *device) GetPowerManagementDefaultLimit() (uint32, nvml.Return) {
	return d.GetEnforcedPowerLimit()
}

func (d *device) GetPowerManagementLimitConstraints() (uint32, uint32, nvml.Return) {
	_, r := d.begin(featPowerLimit)
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	return uint32(d.model.powerMinW * 1000), d.limitMilliwatts(), r
}

func (d *device) GetPowerManagementMode() (nvml.EnableState, nvml.Return) {
	_, r := d.begin(featPowerLimit)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.FEATURE_ENABLED, r
}

// GetTotalEnergyConsumption is in millijoules since the driver was loaded.
func (d *device) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	e, r := d.begin(featEnergy)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return uint64(d.energyJ(seconds(e)) * 1000), r
}

// --- clocks ---

// powerCapFraction is the share of its power limit above which a busy
// GPU's driver caps clocks (SW power cap).
const powerCapFraction = 0.95

// powerCapped says whether the draw is close enough to the limit for the
// driver to cap clocks (SW power cap).
func (d *device) powerCapped(t float64) bool {
	return d.act.busy() && d.powerW(t) > powerCapFraction*d.model.powerLimitW
}

// clockMHz is the current clock of one domain.
func (d *device) clockMHz(t float64, ct nvml.ClockType) uint32 {
	m := d.model
	busy := d.act.busy()
	switch ct {
	case nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM:
		if !busy {
			return m.idleGraphics
		}
		f := min(1, 0.8+0.25*d.act.util(t))
		if d.powerCapped(t) {
			f = 0.9
		}
		mhz := float64(m.maxGraphics) * f
		return uint32(mhz/15) * 15 // the driver moves in 15 MHz bins
	case nvml.CLOCK_MEM:
		if !busy {
			return m.idleMem
		}
		return m.maxMem
	case nvml.CLOCK_VIDEO:
		if !busy {
			return m.idleVideo
		}
		return m.maxVideo
	}
	return 0
}

func (d *device) GetClockInfo(ct nvml.ClockType) (uint32, nvml.Return) {
	e, r := d.begin(featClocks)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if ct >= nvml.CLOCK_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	if d.sick.isBogus(bogusClocks) {
		return sentinel32, r
	}
	return d.clockMHz(seconds(e), ct), r
}

func (d *device) GetClock(ct nvml.ClockType, id nvml.ClockId) (uint32, nvml.Return) {
	if id != nvml.CLOCK_ID_CURRENT {
		return d.GetMaxClockInfo(ct)
	}
	return d.GetClockInfo(ct)
}

func (d *device) GetMaxClockInfo(ct nvml.ClockType) (uint32, nvml.Return) {
	_, r := d.begin(featClocks)
	if r != nvml.SUCCESS {
		return 0, r
	}
	m := d.model
	switch ct {
	case nvml.CLOCK_GRAPHICS:
		return m.maxGraphics, r
	case nvml.CLOCK_SM:
		return m.maxSM, r
	case nvml.CLOCK_MEM:
		return m.maxMem, r
	case nvml.CLOCK_VIDEO:
		return m.maxVideo, r
	}
	return 0, nvml.ERROR_INVALID_ARGUMENT
}

// clockEventReasons is the bit mask of why clocks are below maximum now.
func (d *device) clockEventReasons(t float64) uint64 {
	var reasons uint64
	if !d.act.busy() {
		reasons |= nvml.ClocksEventReasonGpuIdle
	}
	if d.powerCapped(t) {
		reasons |= nvml.ClocksEventReasonSwPowerCap
	}
	if d.temperature(t) >= d.model.gpuMaxC && d.model.gpuMaxC > 0 {
		reasons |= nvml.ClocksEventReasonSwThermalSlowdown
	}
	return reasons
}

func (d *device) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	e, r := d.begin(featClockEvents)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.clockEventReasons(seconds(e)), r
}

// GetCurrentClocksThrottleReasons is the pre-R535 name of GetCurrentClocksEventReasons.
func (d *device) GetCurrentClocksThrottleReasons() (uint64, nvml.Return) {
	return d.GetCurrentClocksEventReasons()
}

func (d *device) GetSupportedClocksEventReasons() (uint64, nvml.Return) {
	_, r := d.begin(featClockEvents)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.supportedCER, r
}

func (d *device) GetSupportedClocksThrottleReasons() (uint64, nvml.Return) {
	return d.GetSupportedClocksEventReasons()
}

// --- PCIe ---

func (d *device) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	_, r := d.begin(featPCIe)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if !d.act.busy() {
		return d.model.idlePcieGen, r
	}
	return d.model.pcieGen, r
}

func (d *device) GetCurrPcieLinkWidth() (int, nvml.Return) {
	_, r := d.begin(featPCIe)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.pcieWidth, r
}

func (d *device) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	_, r := d.begin(featPCIe)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.pcieGen, r
}

func (d *device) GetGpuMaxPcieLinkGeneration() (int, nvml.Return) {
	return d.GetMaxPcieLinkGeneration()
}

func (d *device) GetMaxPcieLinkWidth() (int, nvml.Return) {
	_, r := d.begin(featPCIe)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.pcieWidth, r
}

// pcieTotal is the PCIe traffic since driver load, in bytes; tx is
// device-to-host. Rates scale with the link generation (gen5 doubles gen4).
func (d *device) pcieTotal(t float64, tx bool) float64 {
	scale := math.Pow(2, float64(d.model.pcieGen-4))
	idleRate, busyRate := 0.15e9, 6e9 // host→device (rx): inputs
	if tx {
		idleRate, busyRate = 0.1e9, 3e9 // device→host (tx): results, checkpoints
	}
	before := uptimeBeforeStart.Seconds()
	return scale * (idleRate*(before+t) + busyRate*d.act.utilIntegral(t))
}

// pcieCounterWrap is where the PCIe byte counters wrap. nvml.h says of
// NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES only "Value can be wrapped"; every
// value seen on real GPUs (an H100 on 580.159.04 at 4.2e9 a minute after
// the driver loaded, an L40S at 3.0e9 and 3.9e9) is below 2^32, and an
// H100 idling at 1 MB/s cannot have sent 4 GB in that minute: the driver
// reports the low 32 bits. The simulator does the same.
const pcieCounterWrap = 1 << 32

// pcieBytes is the counter NVML reports: pcieTotal modulo 2^32.
func (d *device) pcieBytes(t float64, tx bool) uint64 {
	return uint64(d.pcieTotal(t, tx)) % pcieCounterWrap
}

func (d *device) pcieReplays(t float64) uint64 {
	base := uint64(d.index % 3)
	if d.index%3 == 2 {
		return base + steps(t, 600)
	}
	return base
}

func (d *device) GetPcieReplayCounter() (int, nvml.Return) {
	e, r := d.begin(featPCIeReplay)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return int(d.pcieReplays(seconds(e))), r
}

// --- ECC and memory repair ---

func (d *device) GetEccMode() (nvml.EnableState, nvml.EnableState, nvml.Return) {
	_, r := d.begin(featECC)
	if r != nvml.SUCCESS {
		return 0, 0, r
	}
	return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, r
}

func (d *device) GetDefaultEccMode() (nvml.EnableState, nvml.Return) {
	_, r := d.begin(featECC)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.FEATURE_ENABLED, r
}

// eccErrors counts ECC errors. GPU 1 of each group of four sees a corrected
// error every 30 minutes; GPU 5 carries one old uncorrected error (and the
// row remap that repaired it). Aggregate counts include history. Injected
// uncorrectable errors (faults) add to both, the volatile count only since
// the last injected GPU reset.
func (d *device) eccErrors(e time.Duration, kind nvml.MemoryErrorType, counter nvml.EccCounterType) uint64 {
	t := seconds(e)
	var volatile, history uint64
	switch kind {
	case nvml.MEMORY_ERROR_TYPE_CORRECTED:
		if d.index%4 == 1 {
			volatile = steps(t, 1800)
		}
		history = uint64(d.index*7) % 5
	case nvml.MEMORY_ERROR_TYPE_UNCORRECTED:
		if d.index == 5 {
			history = 1
		}
		v, all := d.memory.uncorrected(e)
		volatile, history = volatile+v, history+all-v
	}
	if counter == nvml.AGGREGATE_ECC {
		return volatile + history
	}
	return volatile
}

func (d *device) GetTotalEccErrors(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
	e, r := d.begin(featECC)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if kind >= nvml.MEMORY_ERROR_TYPE_COUNT || counter >= nvml.ECC_COUNTER_TYPE_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.eccErrors(e, kind, counter), r
}

// GetMemoryErrorCounter attributes every ECC error to device memory.
func (d *device) GetMemoryErrorCounter(kind nvml.MemoryErrorType, counter nvml.EccCounterType, loc nvml.MemoryLocation) (uint64, nvml.Return) {
	total, r := d.GetTotalEccErrors(kind, counter)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if loc == nvml.MEMORY_LOCATION_DEVICE_MEMORY || loc == nvml.MEMORY_LOCATION_DRAM {
		return total, r
	}
	return 0, r
}

func (d *device) GetRetiredPages_v2(cause nvml.PageRetirementCause) ([]uint64, []uint64, nvml.Return) {
	pages, r := d.GetRetiredPages(cause)
	if r != nvml.SUCCESS {
		return nil, nil, r
	}
	return pages, []uint64{}, r
}

func (d *device) GetRetiredPagesPendingStatus() (nvml.EnableState, nvml.Return) {
	_, r := d.begin(featRetiredPages)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return nvml.FEATURE_DISABLED, r
}

// GetRemappedRows returns correctable rows, uncorrectable rows, pending and
// failure. NVML answers NOT_SUPPORTED in MIG mode.
func (d *device) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	e, r := d.begin(featRemappedRows)
	if r != nvml.SUCCESS {
		return 0, 0, false, false, r
	}
	if d.migEnabled {
		return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED
	}
	unc, pending, failure := d.memory.remapState(e)
	if d.index == 5 {
		unc++
	}
	return 0, unc, pending, failure, r
}

// --- NVLink ---

func (d *device) beginLink(link int) (time.Duration, nvml.Return) {
	e, r := d.begin(featNVLink)
	if r != nvml.SUCCESS {
		return e, r
	}
	if link < 0 || link >= d.model.nvlinks {
		return e, nvml.ERROR_INVALID_ARGUMENT
	}
	return e, r
}

func (d *device) GetNvLinkState(link int) (nvml.EnableState, nvml.Return) {
	_, r := d.beginLink(link)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if d.nvlinkUp {
		return nvml.FEATURE_ENABLED, r
	}
	return nvml.FEATURE_DISABLED, r
}

func (d *device) GetNvLinkVersion(link int) (uint32, nvml.Return) {
	_, r := d.beginLink(link)
	if r != nvml.SUCCESS {
		return 0, r
	}
	return d.model.nvlinkVer, r
}

// nvlinkErrors: one link per GPU sees a DL replay every 15 minutes, and
// GPU 2's link 0 a CRC flit error every 20 minutes; all else stays 0.
func (d *device) nvlinkErrors(t float64, link int, c nvml.NvLinkErrorCounter) uint64 {
	if !d.nvlinkUp {
		return 0
	}
	switch c {
	case nvml.NVLINK_ERROR_DL_REPLAY:
		if link == d.index%d.model.nvlinks {
			return steps(t, 900)
		}
	case nvml.NVLINK_ERROR_DL_CRC_FLIT:
		if link == 0 && d.index == 2 {
			return steps(t, 1200)
		}
	}
	return 0
}

func (d *device) GetNvLinkErrorCounter(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	e, r := d.beginLink(link)
	if r != nvml.SUCCESS {
		return 0, r
	}
	if c >= nvml.NVLINK_ERROR_COUNT {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.nvlinkErrors(seconds(e), link, c), r
}

// nvlinkKiB is the data (or raw, with protocol overhead) traffic of one
// link since driver load, in KiB as NVML's throughput fields report it.
// An H100 link carries up to 25 GB/s per direction.
func (d *device) nvlinkKiB(t float64, link int, tx, raw bool) uint64 {
	if !d.nvlinkUp {
		return 0
	}
	const perLinkMax = 25e9 // NVLink3 and NVLink4 links both carry 25 GB/s per direction
	share := 0.55
	if !tx {
		share = 0.5
	}
	// Links carry slightly different loads so the per-link series differ.
	share *= 1 - 0.02*float64(link%5)
	bytes := perLinkMax * (0.002*(uptimeBeforeStart.Seconds()+t) + share*d.act.utilIntegral(t))
	if raw {
		bytes *= 1.08
	}
	return uint64(bytes / 1024)
}
