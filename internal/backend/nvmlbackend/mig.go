//go:build cgo

package nvmlbackend

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// migDevice is one MIG device (a compute instance inside a GPU instance) of
// a MIG-enabled GPU.
type migDevice struct {
	handle            nvml.Device
	gpuInstanceID     int
	computeInstanceID int
	uuid              string
	profile           string
}

// migDevices lists the MIG devices of a MIG-enabled GPU, once per device
// read: instances can be created and destroyed at any time. The
// accounting's reader alone takes the last list again for a few reads
// (migListReuse). The calls are charged to group g, the first group that
// needs the list.
func (d *deviceReader) migDevices(g groupID) []migDevice {
	if d.migListed {
		return d.migDevs
	}
	d.migListed = true
	if !d.r.caps.migDevices() {
		return nil
	}
	if enabled, _ := d.migMode(g); !enabled {
		d.st.migReuse = false
		return nil
	}
	if d.reusesMIGList() {
		d.migDevs, d.migReusedList = d.st.migDevs, true
		d.st.migReused++
		return d.migDevs
	}
	d.st.migReused = 0
	clear(d.st.giInfos)
	count, ret := d.dev.GetMaxMigDeviceCount()
	if !d.ok(g, "GetMaxMigDeviceCount", ret) {
		return nil
	}
	// Into the slice of the device's last list: it is the same list
	// almost always.
	d.migDevs = d.st.migDevs[:0]
	defer func() { d.st.migDevs = d.migDevs }()
	for i := range count {
		h, ret := d.dev.GetMigDeviceHandleByIndex(i)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
			continue // an empty slot
		default:
			d.ok(g, "GetMigDeviceHandleByIndex", ret)
			if d.gone != "" {
				return nil
			}
			continue
		}
		m := migDevice{handle: h}
		gi, ret := h.GetGpuInstanceId()
		if !d.ok(g, "GetGpuInstanceId", ret) {
			continue
		}
		ci, ret := h.GetComputeInstanceId()
		if !d.ok(g, "GetComputeInstanceId", ret) {
			continue
		}
		m.gpuInstanceID, m.computeInstanceID = gi, ci
		if uuid, ret := h.GetUUID(); d.ok(g, "GetUUID", ret) {
			m.uuid = uuid
		}
		if name, ret := h.GetName(); d.ok(g, "GetName", ret) {
			m.profile = migProfile(name)
		}
		d.migDevs = append(d.migDevs, m)
	}
	d.migListWhole = true
	return d.migDevs
}

// migProfile extracts the profile from a MIG device name:
// "NVIDIA A100-SXM4-80GB MIG 1g.10gb" → "1g.10gb",
// "NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb" → "1c.3g.20gb".
func migProfile(name string) string {
	i := strings.LastIndex(name, "MIG ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(name[i+len("MIG "):])
}

// The accounting's reader reads a MIG GPU at every tick, and listing its
// MIG devices takes, on an H100 with seven instances, 36 driver calls
// (the count, a handle per slot, the GPU and compute instance IDs, UUID
// and name of each) and 14 more as root (each GPU instance's profile and
// placement), more than the tick's own reads of the GPU. So it lists them every migListReuse reads,
// at every read that lists every GPU's processes, and at the read after
// any call about the GPU's instances, GPM or processes failed (as a call
// on a destroyed instance's handle does); in between it takes the last
// list. An instance created since is read from the next list on, at most
// migListReuse reads later (16 s at the default interval; its
// processes are listed and attributed at the list after).
func (d *deviceReader) reusesMIGList() bool {
	return d.r.processSamples && d.st.migReuse && !d.listAll && d.st.migReused+1 < d.r.migListReuse()
}

// migListReuse is how many reads one list of MIG devices serves: the
// reads between two lists of a GPU whose memory moved
// (AccountingOptions.ListProcessesEvery).
func (r *Reader) migListReuse() int { return max(r.listEvery, 1) }

// keepMIGList says, at the end of a read, whether the next may take this
// read's list of MIG devices: when it was read whole (a list cut short by
// a failure is not kept) and no call about the GPU's instances, their GPM
// or processes failed since.
func (d *deviceReader) keepMIGList() {
	if !d.migListed {
		return
	}
	failed := d.gone != "" || d.out.stats[gMIG].err != nil || d.out.stats[gGPM].err != nil || d.out.stats[gProcesses].err != nil
	d.st.migReuse = !failed && (d.migReusedList || d.migListWhole)
}

// readMIGInstances reads each MIG device's identity and memory; GPM fills
// in per-instance profiling afterwards.
func (d *deviceReader) readMIGInstances() []snapshot.MIGInstance {
	devs := d.migDevices(gMIG)
	if len(devs) == 0 {
		return nil
	}
	out := d.takeMIGInstances(len(devs))
	for i, m := range devs {
		inst := &out[i]
		inst.GPUInstanceID = m.gpuInstanceID
		inst.ComputeInstanceID = m.computeInstanceID
		inst.UUID = m.uuid
		inst.Profile = m.profile
		if gi, ok := d.gpuInstanceInfo(m.gpuInstanceID); ok {
			inst.GPUInstanceProfileID = snapshot.Some(int(gi.ProfileId))
			inst.PlacementStart = snapshot.Some(int(gi.Placement.Start))
			inst.PlacementSize = snapshot.Some(int(gi.Placement.Size))
		}
		if memoryReader(devs, i) {
			inst.MemoryTotal, inst.MemoryUsed, _, _ = d.readFramebuffer(gMIG, m.handle)
		}
	}
	return out
}

// takeMIGInstances is the slice for n MIG instances, zeroed: the
// accounting's reader's buffer of this read (alternating.go), a new one
// for any other.
func (d *deviceReader) takeMIGInstances(n int) []snapshot.MIGInstance {
	if !d.r.processSamples {
		return make([]snapshot.MIGInstance, n)
	}
	out := d.st.migInstances.take(n)[:n]
	clear(out)
	return d.st.migInstances.keep(out)
}

// gpuInstanceInfo reads GPU instance id's profile and placement, once per
// GPU instance per read. nvml.h reserves GetGpuInstanceById to privileged
// callers (root, or the MIG monitor capability); an unprivileged exporter
// gets NO_PERMISSION on every read, which is the caller's standing rather
// than a failure, so it leaves the placement absent without counting an
// error.
func (d *deviceReader) gpuInstanceInfo(id int) (nvml.GpuInstanceInfo, bool) {
	if !d.r.caps.gpuInstanceInfo() || d.giDenied {
		return nvml.GpuInstanceInfo{}, false
	}
	if got, ok := d.st.giInfos[id]; ok {
		return got.info, got.ok
	}
	info, ok := d.readGPUInstanceInfo(id)
	if d.st.giInfos == nil {
		d.st.giInfos = make(map[int]gpuInstanceRead)
	}
	d.st.giInfos[id] = gpuInstanceRead{info, ok}
	return info, ok
}

// gpuInstanceRead is one GPU instance's info as read, or not, this read.
type gpuInstanceRead struct {
	info nvml.GpuInstanceInfo
	ok   bool
}

func (d *deviceReader) readGPUInstanceInfo(id int) (nvml.GpuInstanceInfo, bool) {
	gi, ret := d.dev.GetGpuInstanceById(id)
	if ret == nvml.ERROR_NO_PERMISSION {
		d.giDenied = true
		return nvml.GpuInstanceInfo{}, false
	}
	if !d.ok(gMIG, "GetGpuInstanceById", ret) {
		return nvml.GpuInstanceInfo{}, false
	}
	info, ret := gi.GetInfo()
	if ret == nvml.ERROR_NO_PERMISSION {
		d.giDenied = true
		return nvml.GpuInstanceInfo{}, false
	}
	return info, d.ok(gMIG, "GpuInstance.GetInfo", ret)
}

// memoryReader says whether MIG device i reports its GPU instance's memory:
// memory belongs to the GPU instance, and every compute instance in it
// answers the same numbers, so a sum() over compute instances would count
// it once per compute instance. Only the compute instance with the lowest
// ID in each GPU instance reports it.
func memoryReader(devs []migDevice, i int) bool {
	for j, m := range devs {
		if j != i && m.gpuInstanceID == devs[i].gpuInstanceID && m.computeInstanceID < devs[i].computeInstanceID {
			return false
		}
	}
	return true
}
