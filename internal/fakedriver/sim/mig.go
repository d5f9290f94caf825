//go:build cgo

package sim

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIG (Multi-Instance GPU). A MIG-enabled GPU is split into GPU instances
// (slices of SMs and memory), each split into compute instances. NVML shows
// each compute instance as a "MIG device" handle, reachable from the parent
// with GetMigDeviceHandleByIndex; GPU and compute instances are also
// reachable as objects with GetGpuInstances / GetComputeInstances.
//
// The shapes (slices, SMs, engines, memory) are the card model's MIG table
// (mig_profiles.go).

// migTotalSlices is the number of compute slices of an A100 or H100.
const migTotalSlices = 7

// migReservedMiB is what an empty MIG instance already shows as used.
const migReservedMiB = 13

// gpuInstance is one MIG GPU instance; it implements nvml.GpuInstance.
type gpuInstance struct {
	unmodelledGpuInstance
	parent    *device
	id        int
	profileID int // nvml.GPU_INSTANCE_PROFILE_*
	shape     migShape
	info      nvml.GpuInstanceProfileInfo
	placement nvml.GpuInstancePlacement
	cis       []*computeInstance
}

func (gi *gpuInstance) memoryBytes() uint64 { return gi.info.MemorySizeMB * mib }

// computeInstance is one compute instance; it implements nvml.ComputeInstance.
type computeInstance struct {
	unmodelledComputeInstance
	gi        *gpuInstance
	id        int
	profileID int
	info      nvml.ComputeInstanceProfileInfo
	placement nvml.ComputeInstancePlacement
	mig       *migDevice
}

// migDevice is the MIG device handle of one compute instance. It
// implements nvml.Device; calls NVML does not answer on MIG handles (for
// example utilization) fall through to NOT_SUPPORTED.
type migDevice struct {
	unmodelledDevice
	parent   *device
	gi       *gpuInstance
	ci       *computeInstance
	ciID     int
	ciSlices int
	uuid     string
	name     string
}

var (
	_ nvml.GpuInstance     = (*gpuInstance)(nil)
	_ nvml.ComputeInstance = (*computeInstance)(nil)
	_ nvml.Device          = (*migDevice)(nil)
)

// buildMIG creates the instances and MIG devices of a MIG-enabled GPU.
// Profiles are fixed tables, so a bad layout is a programming error.
func (d *device) buildMIG(layout []migGPUInstance) {
	for _, l := range layout {
		shape, ok := d.model.mig[l.profileID]
		if !ok {
			panic(fmt.Sprintf("sim: profile %s: %s has no GPU instance profile %d", d.sim.profile.name, d.model.name, l.profileID))
		}
		info := shape.info
		gi := &gpuInstance{
			parent: d, id: l.id, profileID: l.profileID, shape: shape, info: info,
			placement: nvml.GpuInstancePlacement{Start: l.start, Size: shape.placementSize},
		}
		var start uint32
		for _, c := range l.cis {
			ciInfo, ok := shape.cis[c.profileID]
			if !ok {
				panic(fmt.Sprintf("sim: profile %s: unknown compute instance profile %d in GPU instance profile %d", d.sim.profile.name, c.profileID, l.profileID))
			}
			ci := &computeInstance{
				gi: gi, id: c.id, profileID: c.profileID, info: ciInfo,
				placement: nvml.ComputeInstancePlacement{Start: start, Size: ciInfo.SliceCount},
			}
			start += ciInfo.SliceCount
			name := shape.name
			if ciInfo.SliceCount != info.SliceCount {
				name = fmt.Sprintf("%dc.%s", ciInfo.SliceCount, name)
			}
			m := &migDevice{
				parent: d, gi: gi, ci: ci, ciID: c.id, ciSlices: int(ciInfo.SliceCount),
				uuid: "MIG-" + d.sim.stableUUID(d.sim.profile.name, fmt.Sprint(d.index), "gi", fmt.Sprint(l.id), "ci", fmt.Sprint(c.id)),
				name: d.model.name + " MIG " + name,
			}
			m.unmodelledDevice = migDeviceSafetyNet(m)
			ci.mig = m
			gi.cis = append(gi.cis, ci)
			d.migDevices = append(d.migDevices, m)
		}
		d.gpuInsts = append(d.gpuInsts, gi)
	}
}

// findMIG returns the MIG device of GPU instance gi, compute instance ci.
func (d *device) findMIG(gi, ci int) *migDevice {
	for _, m := range d.migDevices {
		if m.gi.id == gi && m.ciID == ci {
			return m
		}
	}
	return nil
}

// migInstanceList names the instances of a MIG GPU for error messages.
func (d *device) migInstanceList() string {
	var parts []string
	for _, m := range d.migDevices {
		parts = append(parts, fmt.Sprintf("gpu_instance=%d compute_instance=%d (%s)", m.gi.id, m.ciID, strings.TrimPrefix(m.name, d.model.name+" MIG ")))
	}
	return strings.Join(parts, ", ")
}

// --- MIG calls on the parent device ---

// GetMaxMigDeviceCount is 7 on a MIG-enabled A100/H100 and 0 elsewhere
// ("zero if MIG is not supported or enabled").
func (d *device) GetMaxMigDeviceCount() (int, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	if !d.migEnabled || !d.features.has(featMIG) {
		return 0, r
	}
	return migTotalSlices, r
}

// GetMigDeviceHandleByIndex returns the index-th MIG device, NOT_FOUND for
// an unused index below the maximum.
func (d *device) GetMigDeviceHandleByIndex(index int) (nvml.Device, nvml.Return) {
	_, r := d.begin(featMIG)
	if r != nvml.SUCCESS {
		return nil, r
	}
	if !d.migEnabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if index < 0 || index >= migTotalSlices {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if index >= len(d.migDevices) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return d.migDevices[index], r
}

func (d *device) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return nil, r
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

func (d *device) GetGpuInstanceId() (int, nvml.Return) {
	_, r := d.always()
	if r != nvml.SUCCESS {
		return 0, r
	}
	return 0, nvml.ERROR_INVALID_ARGUMENT
}

func (d *device) GetComputeInstanceId() (int, nvml.Return) { return d.GetGpuInstanceId() }

func (d *device) GetGpuInstanceProfileInfo(profileID int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	_, r := d.begin(featMIG)
	if r != nvml.SUCCESS {
		return nvml.GpuInstanceProfileInfo{}, r
	}
	if profileID < 0 || profileID >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	shape, ok := d.model.mig[profileID]
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return shape.info, r
}

func (d *device) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	_, r := d.begin(featMIG)
	if r != nvml.SUCCESS {
		return nil, r
	}
	if info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if !d.migEnabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if !d.sim.privileged {
		return nil, nvml.ERROR_NO_PERMISSION // nvml.h: "Requires privileged user."
	}
	out := []nvml.GpuInstance{}
	for _, gi := range d.gpuInsts {
		if gi.info.Id == info.Id {
			out = append(out, gi)
		}
	}
	return out, r
}

func (d *device) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	_, r := d.begin(featMIG)
	if r != nvml.SUCCESS {
		return nil, r
	}
	if !d.migEnabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	if !d.sim.privileged {
		return nil, nvml.ERROR_NO_PERMISSION // nvml.h: "Requires privileged user."
	}
	for _, gi := range d.gpuInsts {
		if gi.id == id {
			return gi, r
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// --- GPU and compute instance objects ---

func (gi *gpuInstance) GetInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	_, r := gi.parent.always()
	if r != nvml.SUCCESS {
		return nvml.GpuInstanceInfo{}, r
	}
	return nvml.GpuInstanceInfo{Device: gi.parent, Id: uint32(gi.id), ProfileId: gi.info.Id, Placement: gi.placement}, r
}

func (gi *gpuInstance) GetComputeInstanceProfileInfo(profileID, engProfileID int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
	_, r := gi.parent.always()
	if r != nvml.SUCCESS {
		return nvml.ComputeInstanceProfileInfo{}, r
	}
	if profileID < 0 || profileID >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	if engProfileID != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	info, ok := gi.shape.cis[profileID]
	if !ok {
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return info, r
}

func (gi *gpuInstance) GetComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	_, r := gi.parent.always()
	if r != nvml.SUCCESS {
		return nil, r
	}
	if info == nil {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	out := []nvml.ComputeInstance{}
	for _, ci := range gi.cis {
		if uint32(ci.profileID) == info.Id {
			out = append(out, ci)
		}
	}
	return out, r
}

func (gi *gpuInstance) GetComputeInstanceById(id int) (nvml.ComputeInstance, nvml.Return) {
	_, r := gi.parent.always()
	if r != nvml.SUCCESS {
		return nil, r
	}
	for _, ci := range gi.cis {
		if ci.id == id {
			return ci, r
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

func (ci *computeInstance) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	_, r := ci.gi.parent.always()
	if r != nvml.SUCCESS {
		return nvml.ComputeInstanceInfo{}, r
	}
	return nvml.ComputeInstanceInfo{
		Device: ci.gi.parent, GpuInstance: ci.gi, Id: uint32(ci.id),
		ProfileId: uint32(ci.profileID), Placement: ci.placement,
	}, r
}

// --- calls on a MIG device handle ---

// begin checks the parent: a lost parent loses its MIG devices too.
func (m *migDevice) begin() nvml.Return {
	_, r := m.parent.begin(featMIG)
	return r
}

func (m *migDevice) IsMigDeviceHandle() (bool, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return false, r
	}
	return true, nvml.SUCCESS
}

func (m *migDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nil, r
	}
	return m.parent, nvml.SUCCESS
}

func (m *migDevice) GetGpuInstanceId() (int, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return 0, r
	}
	return m.gi.id, nvml.SUCCESS
}

func (m *migDevice) GetComputeInstanceId() (int, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return 0, r
	}
	return m.ciID, nvml.SUCCESS
}

func (m *migDevice) GetUUID() (string, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return "", r
	}
	return m.uuid, nvml.SUCCESS
}

func (m *migDevice) GetName() (string, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return "", r
	}
	return m.name, nvml.SUCCESS
}

// giUsedBytes is the memory held by processes in this MIG device's GPU
// instance; compute instances of one GPU instance share its memory.
func (m *migDevice) giUsedBytes() uint64 {
	e := m.parent.sim.elapsed()
	if u := m.parent.usedThroughout(e); u != nil {
		return u.gi[m.gi]
	}
	var sum uint64
	for _, p := range m.parent.procs() {
		if p.mig != nil && p.mig.gi == m.gi && p.alive(e) {
			sum += p.usedMemory
		}
	}
	return sum
}

func (m *migDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nvml.Memory{}, r
	}
	if !m.parent.features.has(featMemory) {
		return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED
	}
	total := m.gi.memoryBytes()
	used := migReservedMiB*mib + m.giUsedBytes()
	return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
}

func (m *migDevice) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nvml.Memory_v2{}, r
	}
	if !m.parent.features.has(featMemory) {
		return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED
	}
	total := m.gi.memoryBytes()
	reserved := uint64(migReservedMiB * mib)
	used := m.giUsedBytes()
	return nvml.Memory_v2{
		Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2),
		Total:   total, Reserved: reserved, Used: used, Free: total - reserved - used,
	}, nvml.SUCCESS
}

func (m *migDevice) GetAttributes() (nvml.DeviceAttributes, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nvml.DeviceAttributes{}, r
	}
	return nvml.DeviceAttributes{
		MultiprocessorCount:       m.ci.info.MultiprocessorCount,
		SharedCopyEngineCount:     m.ci.info.SharedCopyEngineCount,
		SharedDecoderCount:        m.ci.info.SharedDecoderCount,
		SharedEncoderCount:        m.ci.info.SharedEncoderCount,
		SharedJpegCount:           m.ci.info.SharedJpegCount,
		SharedOfaCount:            m.ci.info.SharedOfaCount,
		GpuInstanceSliceCount:     m.gi.info.SliceCount,
		ComputeInstanceSliceCount: m.ci.info.SliceCount,
		MemorySizeMB:              m.gi.info.MemorySizeMB,
	}, nvml.SUCCESS
}

func (m *migDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nil, r
	}
	return m.parent.whole(m.parent.runningProcesses(false, m))
}

func (m *migDevice) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nil, r
	}
	return m.parent.whole(m.parent.runningProcesses(true, m))
}

// GpmQueryDeviceSupport on a MIG handle answers for its parent.
func (m *migDevice) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return m.parent.GpmQueryDeviceSupport()
}

func (m *migDevice) GetMaxMigDeviceCount() (int, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return 0, r
	}
	return 0, nvml.ERROR_INVALID_ARGUMENT
}
