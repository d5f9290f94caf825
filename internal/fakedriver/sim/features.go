//go:build cgo

package sim

import (
	"fmt"
	"strings"
)

// feature is one group of NVML reads that a simulated device may or may not
// support. A profile's model lists what the real card supports; a fault's
// `unsupported:` list removes more. The names are the contract used in the
// YAML config, so they are stable: add new ones, never rename.
type feature uint

const (
	featUtilization feature = iota
	featEncoder
	featDecoder
	featMemory
	featBAR1
	featTemperature
	featMemoryTemperature
	featTemperatureThresholds
	featFanSpeed
	featPState
	featPower
	featPowerLimit
	featEnergy
	featClocks
	featClockEvents
	featPCIe
	featPCIeReplay
	featECC
	featRetiredPages
	featRemappedRows
	featNVLink
	featGPM
	featProcesses
	featProcessUtilization
	featSerial
	featVBIOS
	featMIG
	featEvents
	numFeatures
)

// featureDoc names each feature and lists the NVML calls it gates. The
// order is the order of the constants above.
var featureDoc = [numFeatures]struct{ name, calls string }{
	featUtilization:           {"utilization", "GetUtilizationRates"},
	featEncoder:               {"encoder", "GetEncoderUtilization"},
	featDecoder:               {"decoder", "GetDecoderUtilization"},
	featMemory:                {"memory", "GetMemoryInfo, GetMemoryInfo_v2"},
	featBAR1:                  {"bar1", "GetBAR1MemoryInfo"},
	featTemperature:           {"temperature", "GetTemperature"},
	featMemoryTemperature:     {"memory_temperature", "field FI_DEV_MEMORY_TEMP"},
	featTemperatureThresholds: {"temperature_thresholds", "GetTemperatureThreshold"},
	featFanSpeed:              {"fan_speed", "GetNumFans, GetFanSpeed, GetFanSpeed_v2"},
	featPState:                {"pstate", "GetPerformanceState"},
	featPower:                 {"power", "GetPowerUsage, field FI_DEV_POWER_INSTANT"},
	featPowerLimit:            {"power_limit", "GetEnforcedPowerLimit, GetPowerManagementLimit, GetPowerManagementDefaultLimit, GetPowerManagementLimitConstraints"},
	featEnergy:                {"energy", "GetTotalEnergyConsumption, field FI_DEV_TOTAL_ENERGY_CONSUMPTION"},
	featClocks:                {"clocks", "GetClockInfo, GetMaxClockInfo"},
	featClockEvents:           {"clock_events", "GetCurrentClocksEventReasons, GetCurrentClocksThrottleReasons, GetSupportedClocksEventReasons"},
	featPCIe:                  {"pcie", "GetCurrPcieLinkGeneration, GetCurrPcieLinkWidth, GetMaxPcieLinkGeneration, GetMaxPcieLinkWidth, fields FI_DEV_PCIE_COUNT_TX_BYTES/RX_BYTES"},
	featPCIeReplay:            {"pcie_replay", "GetPcieReplayCounter, field FI_DEV_PCIE_REPLAY_COUNTER"},
	featECC:                   {"ecc", "GetEccMode, GetTotalEccErrors, GetMemoryErrorCounter"},
	featRetiredPages:          {"retired_pages", "GetRetiredPages, GetRetiredPages_v2, GetRetiredPagesPendingStatus"},
	featRemappedRows:          {"remapped_rows", "GetRemappedRows"},
	featNVLink:                {"nvlink", "GetNvLinkState, GetNvLinkErrorCounter, GetNvLinkVersion, NVLink fields"},
	featGPM:                   {"gpm", "GpmQueryDeviceSupport (IsSupportedDevice=0), GpmSampleGet, GpmMigSampleGet"},
	featProcesses:             {"processes", "GetComputeRunningProcesses, GetGraphicsRunningProcesses"},
	featProcessUtilization:    {"process_utilization", "GetProcessUtilization"},
	featSerial:                {"serial", "GetSerial"},
	featVBIOS:                 {"vbios", "GetVbiosVersion"},
	featMIG:                   {"mig", "GetMigMode, GetMaxMigDeviceCount (0), GetMigDeviceHandleByIndex, GetGpuInstances"},
	featEvents:                {"events", "GetSupportedEventTypes, RegisterEvents"},
}

func (f feature) String() string { return featureDoc[f].name }

// featureSet is a bit set of features.
type featureSet uint64

func setOf(fs ...feature) featureSet {
	var s featureSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

// allFeatures is every feature; card models subtract what they lack.
const allFeatures featureSet = 1<<numFeatures - 1

func (s featureSet) has(f feature) bool { return s&(1<<f) != 0 }

// UnsupportedNames lists, in a stable order, the names a fault's
// `unsupported:` list accepts.
func UnsupportedNames() []string {
	names := make([]string, numFeatures)
	for f := range numFeatures {
		names[f] = featureDoc[f].name
	}
	return names
}

func featureByName(name string) (feature, error) {
	for f := range numFeatures {
		if featureDoc[f].name == name {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown name %q in unsupported (valid: %s)", name, strings.Join(UnsupportedNames(), ", "))
}
