//go:build cgo

package nvmlbackend

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// go-nvml binds libnvidia-ml lazily: calling a function the loaded library
// does not export ends the process with "symbol lookup error". It never
// returns ERROR_FUNCTION_NOT_FOUND. Older driver branches lack the newer
// functions (GPM before R520, clock-event reasons before R535, ...), so
// every call gpuwatch makes is listed here with the C functions go-nvml
// v0.13.3-0 may call for it, looked up once after Init, and every call site
// asks capabilities before calling.

// nvmlCall is one go-nvml method that gpuwatch calls.
type nvmlCall uint8

const (
	callShutdown nvmlCall = iota
	callErrorString
	callDeviceGetCount
	callDeviceGetHandleByIndex
	callGetUUID

	callSystemGetDriverVersion
	callSystemGetCudaDriverVersion
	callSystemGetNVMLVersion
	callGetName
	callGetBrand
	callGetArchitecture
	callGetPciInfo
	callGetMinorNumber
	callGetSerial
	callGetVbiosVersion
	callGetCudaComputeCapability
	callGetPersistenceMode
	callGetComputeMode
	callGetEccMode
	callGetMigMode
	callGetVirtualizationMode

	callGetUtilizationRates
	callGetEncoderUtilization
	callGetDecoderUtilization

	callGetMemoryInfoV2
	callGetMemoryInfo
	callGetBAR1MemoryInfo

	callGetTemperature
	callGetTemperatureThreshold
	callGetFieldValues

	callGetNumFans
	callGetFanSpeedV2
	callGetFanSpeed

	callGetClockInfo
	callGetMaxClockInfo
	callGetPerformanceState

	callGetCurrentClocksEventReasons
	callGetCurrentClocksThrottleReasons
	callGetSupportedClocksEventReasons
	callGetSupportedClocksThrottleReasons

	callGetPowerUsage
	callGetEnforcedPowerLimit
	callGetTotalEnergyConsumption
	callGetPowerManagementDefaultLimit
	callGetPowerManagementLimitConstraints

	callGetCurrPcieLinkGeneration
	callGetCurrPcieLinkWidth
	callGetMaxPcieLinkGeneration
	callGetMaxPcieLinkWidth
	callGetPcieReplayCounter

	callGetTotalEccErrors
	callGetRetiredPages
	callGetRetiredPagesPendingStatus
	callGetRemappedRows

	callGetNvLinkState
	callGetNvLinkErrorCounter
	callGetGpuFabricInfoV

	callEventSetCreate
	callGetSupportedEventTypes
	callRegisterEvents
	callEventSetWait
	callEventSetFree

	callGpmQueryDeviceSupport
	callGpmSampleAlloc
	callGpmSampleFree
	callGpmSampleGet
	callGpmMigSampleGet
	callGpmMetricsGet

	callGetMaxMigDeviceCount
	callGetMigDeviceHandleByIndex
	callGetGpuInstanceId
	callGetComputeInstanceId
	callGetGpuInstanceById
	callGpuInstanceGetInfo

	callGetComputeRunningProcesses
	callGetGraphicsRunningProcesses
	callGetMPSComputeRunningProcesses
	callGetProcessUtilization

	numCalls
)

// nvmlCalls names each call's go-nvml method the way nvmlbranch does:
// "DeviceGetCount" on nvml.Interface, "Device.GetName" on nvml.Device,
// "EventSet.Wait", "GpmSample.Free". The C functions behind each come from
// nvmlbranch.MethodSymbols, read out of go-nvml's own source.
var nvmlCalls = [numCalls]string{
	callShutdown:                           "Shutdown",
	callErrorString:                        "ErrorString",
	callDeviceGetCount:                     "DeviceGetCount",
	callDeviceGetHandleByIndex:             "DeviceGetHandleByIndex",
	callGetUUID:                            "Device.GetUUID",
	callSystemGetDriverVersion:             "SystemGetDriverVersion",
	callSystemGetCudaDriverVersion:         "SystemGetCudaDriverVersion",
	callSystemGetNVMLVersion:               "SystemGetNVMLVersion",
	callGetName:                            "Device.GetName",
	callGetBrand:                           "Device.GetBrand",
	callGetArchitecture:                    "Device.GetArchitecture",
	callGetPciInfo:                         "Device.GetPciInfo",
	callGetMinorNumber:                     "Device.GetMinorNumber",
	callGetSerial:                          "Device.GetSerial",
	callGetVbiosVersion:                    "Device.GetVbiosVersion",
	callGetCudaComputeCapability:           "Device.GetCudaComputeCapability",
	callGetPersistenceMode:                 "Device.GetPersistenceMode",
	callGetComputeMode:                     "Device.GetComputeMode",
	callGetEccMode:                         "Device.GetEccMode",
	callGetMigMode:                         "Device.GetMigMode",
	callGetVirtualizationMode:              "Device.GetVirtualizationMode",
	callGetUtilizationRates:                "Device.GetUtilizationRates",
	callGetEncoderUtilization:              "Device.GetEncoderUtilization",
	callGetDecoderUtilization:              "Device.GetDecoderUtilization",
	callGetMemoryInfoV2:                    "Device.GetMemoryInfo_v2",
	callGetMemoryInfo:                      "Device.GetMemoryInfo",
	callGetBAR1MemoryInfo:                  "Device.GetBAR1MemoryInfo",
	callGetTemperature:                     "Device.GetTemperature",
	callGetTemperatureThreshold:            "Device.GetTemperatureThreshold",
	callGetFieldValues:                     "Device.GetFieldValues",
	callGetNumFans:                         "Device.GetNumFans",
	callGetFanSpeedV2:                      "Device.GetFanSpeed_v2",
	callGetFanSpeed:                        "Device.GetFanSpeed",
	callGetClockInfo:                       "Device.GetClockInfo",
	callGetMaxClockInfo:                    "Device.GetMaxClockInfo",
	callGetPerformanceState:                "Device.GetPerformanceState",
	callGetCurrentClocksEventReasons:       "Device.GetCurrentClocksEventReasons",
	callGetCurrentClocksThrottleReasons:    "Device.GetCurrentClocksThrottleReasons",
	callGetSupportedClocksEventReasons:     "Device.GetSupportedClocksEventReasons",
	callGetSupportedClocksThrottleReasons:  "Device.GetSupportedClocksThrottleReasons",
	callGetPowerUsage:                      "Device.GetPowerUsage",
	callGetEnforcedPowerLimit:              "Device.GetEnforcedPowerLimit",
	callGetTotalEnergyConsumption:          "Device.GetTotalEnergyConsumption",
	callGetPowerManagementDefaultLimit:     "Device.GetPowerManagementDefaultLimit",
	callGetPowerManagementLimitConstraints: "Device.GetPowerManagementLimitConstraints",
	callGetCurrPcieLinkGeneration:          "Device.GetCurrPcieLinkGeneration",
	callGetCurrPcieLinkWidth:               "Device.GetCurrPcieLinkWidth",
	callGetMaxPcieLinkGeneration:           "Device.GetMaxPcieLinkGeneration",
	callGetMaxPcieLinkWidth:                "Device.GetMaxPcieLinkWidth",
	callGetPcieReplayCounter:               "Device.GetPcieReplayCounter",
	callGetTotalEccErrors:                  "Device.GetTotalEccErrors",
	callGetRetiredPages:                    "Device.GetRetiredPages",
	callGetRetiredPagesPendingStatus:       "Device.GetRetiredPagesPendingStatus",
	callGetRemappedRows:                    "Device.GetRemappedRows",
	callGetNvLinkState:                     "Device.GetNvLinkState",
	callGetNvLinkErrorCounter:              "Device.GetNvLinkErrorCounter",
	callGetGpuFabricInfoV:                  "Device.GetGpuFabricInfoV",
	callEventSetCreate:                     "EventSetCreate",
	callGetSupportedEventTypes:             "Device.GetSupportedEventTypes",
	callRegisterEvents:                     "Device.RegisterEvents",
	callEventSetWait:                       "EventSet.Wait",
	callEventSetFree:                       "EventSet.Free",
	callGpmQueryDeviceSupport:              "Device.GpmQueryDeviceSupport",
	callGpmSampleAlloc:                     "GpmSampleAlloc",
	callGpmSampleFree:                      "GpmSample.Free",
	callGpmSampleGet:                       "Device.GpmSampleGet",
	callGpmMigSampleGet:                    "Device.GpmMigSampleGet",
	callGpmMetricsGet:                      "GpmMetricsGet",
	callGetMaxMigDeviceCount:               "Device.GetMaxMigDeviceCount",
	callGetMigDeviceHandleByIndex:          "Device.GetMigDeviceHandleByIndex",
	callGetGpuInstanceId:                   "Device.GetGpuInstanceId",
	callGetComputeInstanceId:               "Device.GetComputeInstanceId",
	callGetGpuInstanceById:                 "Device.GetGpuInstanceById",
	callGpuInstanceGetInfo:                 "GpuInstance.GetInfo",
	callGetComputeRunningProcesses:         "Device.GetComputeRunningProcesses",
	callGetGraphicsRunningProcesses:        "Device.GetGraphicsRunningProcesses",
	callGetMPSComputeRunningProcesses:      "Device.GetMPSComputeRunningProcesses",
	callGetProcessUtilization:              "Device.GetProcessUtilization",
}

// requiredCalls are those gpuwatch cannot run without: it could not find
// a single GPU. (nvmlShutdown is skipped when missing, and NVML errors are
// rendered without nvmlErrorString: see nvmlErr.)
var requiredCalls = []nvmlCall{callDeviceGetCount, callDeviceGetHandleByIndex, callGetUUID}

// symbols lists the C functions behind call c; each inner list holds
// alternatives, of which go-nvml uses the newest the library exports.
// nil for a method nvmlbranch does not know (never made: see the test).
func (c nvmlCall) symbols() [][]string {
	if c == callErrorString {
		// go-nvml's ErrorString, and every Return.Error, goes through a
		// function pointer set to nvmlErrorString at load, which the
		// method table cannot see.
		return [][]string{{"nvmlErrorString"}}
	}
	if c == callGetGpuFabricInfoV {
		// go-nvml's GetGpuFabricInfoV returns a handler whose V2 and V3
		// call nvmlDeviceGetGpuFabricInfoV, which the method table does
		// not follow.
		return [][]string{{"nvmlDeviceGetGpuFabricInfoV"}}
	}
	syms, _ := nvmlbranch.MethodSymbols(nvmlCalls[c])
	return syms
}

// method is c's go-nvml method name, without the receiver.
func (c nvmlCall) method() string {
	m := nvmlCalls[c]
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[i+1:]
	}
	return m
}

// capabilities is what the loaded library exports, looked up once after
// Init. The zero value has nothing; use everything() for a library that
// cannot be asked.
type capabilities struct {
	has [numCalls]bool
	// missing names, for a call the library lacks, the C function it lacks.
	missing [numCalls]string
	// branch is the field-ID table of the driver's branch; nil when it is
	// unknown, and every field is asked for.
	branch *nvmlbranch.Branch
	// unasked is set when the library could not be asked (mocks).
	unasked bool
}

// symbolLookup answers whether the loaded library exports a C function; nil
// means it does. nvml.ExtendedInterface (go-nvml's library and the
// simulator) is one.
type symbolLookup interface {
	LookupSymbol(name string) error
}

// lookupCapabilities asks the library about every call's C functions. A
// library that cannot be asked (go-nvml's mocks return a nil
// ExtendedInterface) is taken to have everything, as the mocks do.
func lookupCapabilities(lib nvml.Interface) (caps capabilities) {
	ext := extensionsOf(lib)
	if ext == nil {
		return everything()
	}
	exports := make(map[string]bool)
	has := func(sym string) bool {
		v, seen := exports[sym]
		if !seen {
			v = ext.LookupSymbol(sym) == nil
			exports[sym] = v
		}
		return v
	}
	for c := range numCalls {
		caps.has[c], caps.missing[c] = callAvailable(c, has)
	}
	caps.branch = exportedBranch(has)
	return caps
}

// exportedBranch is the newest driver branch whose every function the
// library exports: the field IDs that branch knows are the ones the
// library can be asked for. nil when it exports no branch's full set (a
// stripped-down library); the driver version decides then.
func exportedBranch(has func(string) bool) *nvmlbranch.Branch {
	branches := nvmlbranch.Branches()
	for _, branche := range slices.Backward(branches) {
		if allExported(branche.Functions(), has) {
			return branche
		}
	}
	return nil
}

func allExported(symbols []string, has func(string) bool) bool {
	for _, sym := range symbols {
		if !has(sym) {
			return false
		}
	}
	return true
}

// callAvailable says whether call c can be made given has, and if not,
// the first C function it lacks (named by its oldest alternative).
func callAvailable(c nvmlCall, has func(string) bool) (ok bool, missing string) {
	syms := c.symbols()
	if syms == nil {
		return false, nvmlCalls[c]
	}
	for _, alts := range syms {
		found := slices.ContainsFunc(alts, has)
		if !found && len(alts) > 0 {
			return false, alts[0]
		}
	}
	return true, ""
}

// extensionsOf returns lib's symbol lookup, or nil when it has none (a
// nil ExtendedInterface, or a mock whose Extensions panics).
func extensionsOf(lib nvml.Interface) (ext symbolLookup) {
	defer func() {
		if recover() != nil {
			ext = nil
		}
	}()
	e := lib.Extensions()
	if e == nil {
		return nil
	}
	return e
}

func everything() capabilities {
	caps := capabilities{unasked: true}
	for c := range numCalls {
		caps.has[c] = true
	}
	return caps
}

// can reports whether call c is safe to make.
func (c *capabilities) can(call nvmlCall) bool { return c.has[call] }

// missingRequired names the required C functions the library lacks.
func (c *capabilities) missingRequired() []string {
	var missing []string
	for _, call := range requiredCalls {
		if !c.has[call] {
			missing = append(missing, c.missing[call])
		}
	}
	return missing
}

// errMissingFunctions is wrapped by New's error when the library lacks a
// function gpuwatch cannot run without.
var errMissingFunctions = errors.New("the loaded libnvidia-ml.so.1 lacks functions gpuwatch needs")

func missingFunctionsError(missing []string) error {
	return fmt.Errorf("%w: %s", errMissingFunctions, strings.Join(missing, ", "))
}

// clockEventReasonsCall is the call that reads the active clock-event
// reasons: the R535+ name, or the older throttle-reasons call with the same
// bits. ok is false when the library has neither.
func (c *capabilities) clockEventReasonsCall() (call nvmlCall, ok bool) {
	switch {
	case c.has[callGetCurrentClocksEventReasons]:
		return callGetCurrentClocksEventReasons, true
	case c.has[callGetCurrentClocksThrottleReasons]:
		return callGetCurrentClocksThrottleReasons, true
	}
	return 0, false
}

// supportedClockEventReasonsCall is the same choice for the reasons a
// device can report.
func (c *capabilities) supportedClockEventReasonsCall() (call nvmlCall, ok bool) {
	switch {
	case c.has[callGetSupportedClocksEventReasons]:
		return callGetSupportedClocksEventReasons, true
	case c.has[callGetSupportedClocksThrottleReasons]:
		return callGetSupportedClocksThrottleReasons, true
	}
	return 0, false
}

// perFanSpeeds says whether fans can be read one by one (R460+); otherwise
// only the single GetFanSpeed call is there.
func (c *capabilities) perFanSpeeds() bool {
	return c.has[callGetNumFans] && c.has[callGetFanSpeedV2]
}

// gpm says whether device-level GPM can be sampled at all.
func (c *capabilities) gpm() bool {
	for _, call := range gpmCalls {
		if !c.has[call] {
			return false
		}
	}
	return true
}

var gpmCalls = []nvmlCall{callGpmQueryDeviceSupport, callGpmSampleAlloc, callGpmSampleFree, callGpmSampleGet, callGpmMetricsGet}

// xid says whether XID events can be watched.
func (c *capabilities) xid() bool {
	return c.has[callEventSetCreate] && c.has[callRegisterEvents] && c.has[callEventSetWait] && c.has[callEventSetFree]
}

// migDevices says whether MIG devices can be listed.
func (c *capabilities) migDevices() bool {
	return c.has[callGetMigMode] && c.has[callGetMaxMigDeviceCount] && c.has[callGetMigDeviceHandleByIndex] &&
		c.has[callGetGpuInstanceId] && c.has[callGetComputeInstanceId]
}

// gpuInstanceInfo says whether a GPU instance's profile and placement can
// be read (the parent's GetGpuInstanceById, then GpuInstance.GetInfo).
func (c *capabilities) gpuInstanceInfo() bool {
	return c.has[callGetGpuInstanceById] && c.has[callGpuInstanceGetInfo]
}
