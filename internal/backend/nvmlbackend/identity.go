//go:build cgo

package nvmlbackend

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// versions are host-wide and fixed while the driver is loaded: read once.
type versions struct {
	known              bool
	driver, cuda, nvml string
}

func (r *Reader) readVersions() (versions, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.versions.known {
		return r.versions, nil
	}
	var v versions
	var firstErr error
	note := func(call string, ret nvml.Return) bool {
		switch classify(ret) {
		case succeeded:
			return true
		case absent:
			return false
		default:
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", call, nvmlErr(ret))
			}
			return false
		}
	}
	if r.driver.Version != "" {
		v.driver = r.driver.Version // read at start
	} else if r.caps.can(callSystemGetDriverVersion) {
		if s, ret := r.lib.SystemGetDriverVersion(); note("SystemGetDriverVersion", ret) {
			v.driver = s
		}
	}
	if r.caps.can(callSystemGetCudaDriverVersion) {
		if n, ret := r.lib.SystemGetCudaDriverVersion(); note("SystemGetCudaDriverVersion", ret) {
			v.cuda = cudaVersion(n)
		}
	}
	if r.caps.can(callSystemGetNVMLVersion) {
		if s, ret := r.lib.SystemGetNVMLVersion(); note("SystemGetNVMLVersion", ret) {
			v.nvml = s
		}
	}
	if firstErr == nil {
		v.known = true
		r.versions = v
	}
	return v, firstErr
}

// cudaVersion renders NVML's integer CUDA version: 12040 → "12.4".
func cudaVersion(n int) string {
	return strconv.Itoa(n/1000) + "." + strconv.Itoa(n%1000/10)
}

// staticInfo is the part of Info that cannot change while the driver is loaded.
type staticInfo struct {
	name, brand, architecture, pciBusID, serial, vbios, computeCapability string
	minor                                                                 snapshot.Opt[int]
	virtualization                                                        string
}

// readInfo fills Device.Info: the static identity (cached after the first
// complete read) and the modes, which an administrator can change at run
// time and are therefore read every time.
func (d *deviceReader) readInfo() {
	s := d.st.static
	if s == nil {
		var complete bool
		s, complete = d.readStaticInfo()
		if complete {
			d.st.static = s
		}
	}
	info := &d.out.device.Info
	info.Name = s.name
	info.Brand = s.brand
	info.Architecture = s.architecture
	info.PCIBusID = s.pciBusID
	info.MinorNumber = s.minor
	info.Serial = s.serial
	info.VBIOSVersion = s.vbios
	info.ComputeCapability = s.computeCapability
	info.VirtualizationMode = s.virtualization

	if enabled, known := d.migMode(gInfo); known {
		info.MIGMode = enabledDisabled(enabled)
	}
	if d.r.countersOnly {
		return
	}
	if d.can(callGetPersistenceMode) {
		if mode, ret := d.dev.GetPersistenceMode(); d.ok(gInfo, "GetPersistenceMode", ret) {
			info.PersistenceMode = enabledDisabled(mode == nvml.FEATURE_ENABLED)
		}
	}
	if d.can(callGetComputeMode) {
		if mode, ret := d.dev.GetComputeMode(); d.ok(gInfo, "GetComputeMode", ret) {
			info.ComputeMode = computeModeName(mode)
		}
	}
	if d.can(callGetEccMode) {
		if current, _, ret := d.dev.GetEccMode(); d.ok(gInfo, "GetEccMode", ret) {
			info.ECCMode = enabledDisabled(current == nvml.FEATURE_ENABLED)
		}
	}
}

// readStaticInfo reads the identity; complete is false when a read failed
// for a reason other than NOT_SUPPORTED, so the next read tries again.
func (d *deviceReader) readStaticInfo() (s *staticInfo, complete bool) {
	s = &staticInfo{}
	before := d.out.stats[gInfo].err
	if d.can(callGetName) {
		if v, ret := d.dev.GetName(); d.ok(gInfo, "GetName", ret) {
			s.name = v
		}
	}
	if d.can(callGetBrand) {
		if v, ret := d.dev.GetBrand(); d.ok(gInfo, "GetBrand", ret) {
			s.brand = brandName(v)
		}
	}
	if d.can(callGetArchitecture) {
		if v, ret := d.dev.GetArchitecture(); d.ok(gInfo, "GetArchitecture", ret) {
			s.architecture = architectureName(v)
		}
	}
	if d.can(callGetPciInfo) {
		if v, ret := d.dev.GetPciInfo(); d.ok(gInfo, "GetPciInfo", ret) {
			s.pciBusID = cString(v.BusId[:])
		}
	}
	if d.can(callGetMinorNumber) {
		if v, ret := d.dev.GetMinorNumber(); d.ok(gInfo, "GetMinorNumber", ret) {
			s.minor = snapshot.Opt[int]{Value: v, Valid: true}
		}
	}
	if d.can(callGetSerial) {
		if v, ret := d.dev.GetSerial(); d.ok(gInfo, "GetSerial", ret) {
			s.serial = v
		}
	}
	if d.can(callGetVbiosVersion) {
		if v, ret := d.dev.GetVbiosVersion(); d.ok(gInfo, "GetVbiosVersion", ret) {
			s.vbios = v
		}
	}
	if d.can(callGetCudaComputeCapability) {
		if major, minor, ret := d.dev.GetCudaComputeCapability(); d.ok(gInfo, "GetCudaComputeCapability", ret) {
			s.computeCapability = strconv.Itoa(major) + "." + strconv.Itoa(minor)
		}
	}
	// Set when the driver loads (bare metal, pass-through, vGPU guest or
	// host), so read once.
	if d.can(callGetVirtualizationMode) {
		if v, ret := d.dev.GetVirtualizationMode(); d.ok(gInfo, "GetVirtualizationMode", ret) {
			s.virtualization = virtualizationModeName(v)
		}
	}
	complete = d.gone == "" && d.out.stats[gInfo].err == before
	return s, complete
}

// migMode reads whether MIG is enabled, once per device read, charging the
// call to the first group that needs it. known is false when the device has
// no MIG support or the read failed.
func (d *deviceReader) migMode(g groupID) (enabled, known bool) {
	if !d.migModeRead {
		d.migModeRead = true
		if !d.can(callGetMigMode) {
			return false, false
		}
		current, pending, ret := d.dev.GetMigMode()
		if d.ok(g, "GetMigMode", ret) {
			d.migModeKnown = true
			d.migEnabled = current == nvml.DEVICE_MIG_ENABLE
			d.migPending = pending != current
		}
	}
	return d.migEnabled, d.migModeKnown
}

func enabledDisabled(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

func computeModeName(m nvml.ComputeMode) string {
	switch m {
	case nvml.COMPUTEMODE_DEFAULT:
		return "default"
	case nvml.COMPUTEMODE_EXCLUSIVE_THREAD:
		return "exclusive_thread"
	case nvml.COMPUTEMODE_PROHIBITED:
		return "prohibited"
	case nvml.COMPUTEMODE_EXCLUSIVE_PROCESS:
		return "exclusive_process"
	}
	return ""
}

var brandNames = map[nvml.BrandType]string{
	nvml.BRAND_QUADRO:              "quadro",
	nvml.BRAND_TESLA:               "tesla",
	nvml.BRAND_NVS:                 "nvs",
	nvml.BRAND_GRID:                "grid",
	nvml.BRAND_GEFORCE:             "geforce",
	nvml.BRAND_TITAN:               "titan",
	nvml.BRAND_NVIDIA_VAPPS:        "nvidia vapps",
	nvml.BRAND_NVIDIA_VPC:          "nvidia vpc",
	nvml.BRAND_NVIDIA_VCS:          "nvidia vcs",
	nvml.BRAND_NVIDIA_VWS:          "nvidia vws",
	nvml.BRAND_NVIDIA_CLOUD_GAMING: "nvidia cloud gaming",
	nvml.BRAND_QUADRO_RTX:          "quadro rtx",
	nvml.BRAND_NVIDIA_RTX:          "nvidia rtx",
	nvml.BRAND_NVIDIA:              "nvidia",
	nvml.BRAND_GEFORCE_RTX:         "geforce rtx",
	nvml.BRAND_TITAN_RTX:           "titan rtx",
}

// brandName renders a brand as lower-case words ("geforce rtx"); an unknown
// brand stays empty rather than inventing a name.
func brandName(b nvml.BrandType) string {
	return brandNames[b]
}

var architectureNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "pascal",
	nvml.DEVICE_ARCH_VOLTA:     "volta",
	nvml.DEVICE_ARCH_TURING:    "turing",
	nvml.DEVICE_ARCH_AMPERE:    "ampere",
	nvml.DEVICE_ARCH_ADA:       "ada",
	nvml.DEVICE_ARCH_HOPPER:    "hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "blackwell",
	nvml.DEVICE_ARCH_RUBIN:     "rubin",
}

func architectureName(a nvml.DeviceArchitecture) string {
	return architectureNames[a]
}

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// virtualizationModeName names nvmlGpuVirtualizationMode_t's values.
func virtualizationModeName(m nvml.GpuVirtualizationMode) string {
	switch m {
	case nvml.GPU_VIRTUALIZATION_MODE_NONE:
		return "none"
	case nvml.GPU_VIRTUALIZATION_MODE_PASSTHROUGH:
		return "passthrough"
	case nvml.GPU_VIRTUALIZATION_MODE_VGPU:
		return "vgpu"
	case nvml.GPU_VIRTUALIZATION_MODE_HOST_VGPU:
		return "host_vgpu"
	case nvml.GPU_VIRTUALIZATION_MODE_HOST_VSGA:
		return "host_vsga"
	}
	return ""
}
