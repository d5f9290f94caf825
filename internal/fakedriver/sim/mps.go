//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// GetMPSComputeRunningProcesses lists the MPS clients of the device (type
// "mps" or "compute+mps" in the config), each with all of its memory.
func (d *device) GetMPSComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.whole(d.mpsProcesses(nil))
}

// GetMPSComputeRunningProcesses on a MIG device lists the clients in it.
func (m *migDevice) GetMPSComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nil, r
	}
	return m.parent.whole(m.parent.mpsProcesses(m))
}

func (d *device) mpsProcesses(only *migDevice) ([]nvml.ProcessInfo, nvml.Return) {
	e, r := d.begin(featProcesses)
	if r != nvml.SUCCESS {
		return nil, r
	}
	out := []nvml.ProcessInfo{}
	for _, p := range d.procs() {
		if !p.mps || (only != nil && p.mig != only) || !p.alive(e) {
			continue
		}
		info := nvml.ProcessInfo{Pid: p.pid, UsedGpuMemory: p.usedMemory, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
		if p.mig != nil {
			info.GpuInstanceId = uint32(p.mig.gi.id)
			info.ComputeInstanceId = uint32(p.mig.ciID)
		}
		out = append(out, info)
	}
	return out, r
}
