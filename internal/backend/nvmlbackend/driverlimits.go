//go:build cgo

package nvmlbackend

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// What each collector group reads, and which calls (or field IDs) each
// reading needs. From it and the capabilities of the loaded library follow
// the groups the driver limits: logged once at start, exported as
// gpuwatch_driver_limited_group, and tabled per driver branch in the README.

// groupReading is one reading of a group.
type groupReading struct {
	what string
	// calls are all needed; or, when alt is set, all of alt will do instead.
	calls, alt []nvmlCall
	// fields are field IDs read through GetFieldValues.
	fields []uint32
}

var groupReadings = [numGroups][]groupReading{
	gInfo: {
		{what: "driver version", calls: []nvmlCall{callSystemGetDriverVersion}},
		{what: "CUDA driver version", calls: []nvmlCall{callSystemGetCudaDriverVersion}},
		{what: "NVML version", calls: []nvmlCall{callSystemGetNVMLVersion}},
		{what: "name", calls: []nvmlCall{callGetName}},
		{what: "brand", calls: []nvmlCall{callGetBrand}},
		{what: "architecture", calls: []nvmlCall{callGetArchitecture}},
		{what: "PCI bus ID", calls: []nvmlCall{callGetPciInfo}},
		{what: "serial", calls: []nvmlCall{callGetSerial}},
		{what: "VBIOS version", calls: []nvmlCall{callGetVbiosVersion}},
		{what: "compute capability", calls: []nvmlCall{callGetCudaComputeCapability}},
		{what: "persistence mode", calls: []nvmlCall{callGetPersistenceMode}},
		{what: "compute mode", calls: []nvmlCall{callGetComputeMode}},
		{what: "MIG mode", calls: []nvmlCall{callGetMigMode}},
		{what: "ECC mode", calls: []nvmlCall{callGetEccMode}},
	},
	gUtilization: {
		{what: "GPU and memory utilization", calls: []nvmlCall{callGetUtilizationRates}},
		{what: "encoder utilization", calls: []nvmlCall{callGetEncoderUtilization}},
		{what: "decoder utilization", calls: []nvmlCall{callGetDecoderUtilization}},
	},
	gMemory: {
		{what: "framebuffer memory", calls: []nvmlCall{callGetMemoryInfoV2}, alt: []nvmlCall{callGetMemoryInfo}},
		{what: "reserved memory", calls: []nvmlCall{callGetMemoryInfoV2}},
		{what: "BAR1 memory", calls: []nvmlCall{callGetBAR1MemoryInfo}},
	},
	gTemperature: {
		{what: "GPU temperature", calls: []nvmlCall{callGetTemperature}},
		{what: "temperature thresholds", calls: []nvmlCall{callGetTemperatureThreshold}},
		{what: "memory temperature", calls: []nvmlCall{callGetFieldValues}, fields: []uint32{nvml.FI_DEV_MEMORY_TEMP}},
	},
	gFan: {
		{what: "fan speed", calls: []nvmlCall{callGetNumFans, callGetFanSpeedV2}, alt: []nvmlCall{callGetFanSpeed}},
	},
	gClocks: {
		{what: "current clocks", calls: []nvmlCall{callGetClockInfo}},
		{what: "maximum clocks", calls: []nvmlCall{callGetMaxClockInfo}},
		{what: "performance state", calls: []nvmlCall{callGetPerformanceState}},
	},
	gClockEvents: {
		{what: "clock event reasons", calls: []nvmlCall{callGetCurrentClocksEventReasons}, alt: []nvmlCall{callGetCurrentClocksThrottleReasons}},
		{what: "supported clock event reasons", calls: []nvmlCall{callGetSupportedClocksEventReasons}, alt: []nvmlCall{callGetSupportedClocksThrottleReasons}},
	},
	gPower: {
		{what: "power draw", calls: []nvmlCall{callGetPowerUsage}},
		{what: "enforced power limit", calls: []nvmlCall{callGetEnforcedPowerLimit}},
		{what: "energy counter", calls: []nvmlCall{callGetTotalEnergyConsumption}},
		{what: "default power limit", calls: []nvmlCall{callGetPowerManagementDefaultLimit}},
		{what: "power limit range", calls: []nvmlCall{callGetPowerManagementLimitConstraints}},
	},
	gPCIe: {
		{what: "PCIe traffic counters", calls: []nvmlCall{callGetFieldValues}, fields: []uint32{nvml.FI_DEV_PCIE_COUNT_TX_BYTES, nvml.FI_DEV_PCIE_COUNT_RX_BYTES}},
		{what: "PCIe link", calls: []nvmlCall{callGetCurrPcieLinkGeneration, callGetCurrPcieLinkWidth, callGetMaxPcieLinkGeneration, callGetMaxPcieLinkWidth}},
		{what: "PCIe replay counter", calls: []nvmlCall{callGetPcieReplayCounter}},
	},
	gECC: {
		{what: "ECC error counts", calls: []nvmlCall{callGetTotalEccErrors}},
		{what: "retired pages", calls: []nvmlCall{callGetRetiredPages, callGetRetiredPagesPendingStatus}},
		{what: "remapped rows", calls: []nvmlCall{callGetRemappedRows}},
	},
	gNVLink: {
		{what: "NVLink state", calls: []nvmlCall{callGetNvLinkState}},
		{what: "NVLink traffic", calls: []nvmlCall{callGetNvLinkState, callGetFieldValues}, fields: []uint32{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX}},
		{what: "NVLink errors", calls: []nvmlCall{callGetNvLinkState, callGetNvLinkErrorCounter}},
	},
	gXID: {
		{what: "XID events", calls: []nvmlCall{callEventSetCreate, callRegisterEvents, callEventSetWait, callEventSetFree}},
	},
	gGPM: {
		{what: "GPM", calls: gpmCalls},
		{what: "GPM per MIG instance", calls: append(append([]nvmlCall(nil), gpmCalls...), callGpmMigSampleGet)},
	},
	gMIG: {
		{what: "MIG instances", calls: []nvmlCall{callGetMigMode, callGetMaxMigDeviceCount, callGetMigDeviceHandleByIndex, callGetGpuInstanceId, callGetComputeInstanceId}},
		{what: "pending MIG mode", calls: []nvmlCall{callGetMigMode}},
		{what: "MIG placements", calls: []nvmlCall{callGetMigMode, callGetGpuInstanceById, callGpuInstanceGetInfo}},
	},
	gProcesses: {
		{what: "compute processes", calls: []nvmlCall{callGetComputeRunningProcesses}},
		{what: "graphics processes", calls: []nvmlCall{callGetGraphicsRunningProcesses}},
		{what: "MPS processes", calls: []nvmlCall{callGetMPSComputeRunningProcesses}},
		{what: "per-process utilization", calls: []nvmlCall{callGetProcessUtilization}},
	},
}

// knowsField reports whether the driver knows field ID id, from the
// field-ID table of its branch. When the branch is unknown the field is
// asked for anyway: a driver answers an ID it does not know per field.
func (c *capabilities) knowsField(id uint32) bool {
	return c.branch == nil || c.branch.KnowsField(id)
}

// tableBranch is the nvmlbranch table that describes driver branch major:
// the newest one not newer than it (R560 has what R550 has), or the oldest
// for a driver older than every table. nil when major is unknown.
func tableBranch(major int) *nvmlbranch.Branch {
	if major == 0 {
		return nil
	}
	branches := nvmlbranch.Branches()
	best := branches[0]
	for _, b := range branches {
		if n, err := strconv.Atoi(strings.TrimPrefix(b.Name, "R")); err == nil && n <= major {
			best = b
		}
	}
	return best
}

// driverMajor parses the branch out of a driver version: 550 from
// "550.90.07"; 0 when it is not a number.
func driverMajor(version string) int {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// driverBranch names the branch the way NVIDIA does: "R550".
func driverBranch(major int) string {
	if major == 0 {
		return ""
	}
	return "R" + strconv.Itoa(major)
}

// readingMissing returns what reading rd lacks: C functions, then field IDs
// the driver branch does not know. Empty when the reading is served.
func (c *capabilities) readingMissing(rd groupReading) (missing []string) {
	lacks := func(calls []nvmlCall) []string {
		var out []string
		for _, call := range calls {
			if !c.has[call] {
				out = append(out, c.missing[call])
			}
		}
		return out
	}
	missing = lacks(rd.calls)
	if len(missing) > 0 && len(rd.alt) > 0 && len(lacks(rd.alt)) == 0 {
		missing = nil
	}
	for _, id := range rd.fields {
		if !c.knowsField(id) {
			missing = append(missing, "field ID "+strconv.Itoa(int(id)))
		}
	}
	return missing
}

// limits lists the enabled groups the library cannot fully serve, in group
// order. A group none of whose readings is served is "unavailable"; one
// that lacks some is "partial".
func (c *capabilities) limits(enabled groupSet) []snapshot.DriverLimit {
	var out []snapshot.DriverLimit
	for g := range numGroups {
		if !enabled[g] {
			continue
		}
		var lost, symbols []string
		for _, rd := range groupReadings[g] {
			missing := c.readingMissing(rd)
			if len(missing) == 0 {
				continue
			}
			lost = append(lost, rd.what)
			for _, m := range missing {
				if !contains(symbols, m) {
					symbols = append(symbols, m)
				}
			}
		}
		if len(lost) == 0 {
			continue
		}
		unavailable := len(lost) == len(groupReadings[g])
		state := "partial"
		if unavailable {
			state = "unavailable"
		}
		out = append(out, snapshot.DriverLimit{
			Group:       groupNames[g],
			Unavailable: unavailable,
			Reason:      state + ": no " + strings.Join(lost, ", "),
			Missing:     symbols,
		})
	}
	return out
}

func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}

// loadedLibraryPath finds where libnvidia-ml was loaded from, in
// /proc/self/maps, so that an operator can see which of several installed
// drivers gpuwatch uses. "" when it is not mapped (the simulator).
func loadedLibraryPath() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := fields[len(fields)-1]
		if strings.HasPrefix(filepath.Base(path), "libnvidia-ml.so") {
			return path
		}
	}
	return ""
}
