//go:build cgo

package nvmlbackend

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// newFakeMIGDevice is one MIG device (GPU instance gi, compute instance ci).
func newFakeMIGDevice(h *fakeHost, parent, gi, ci int, profile string, procs []nvml.ProcessInfo) *mock.Device {
	d := &mock.Device{
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) {
			return fmt.Sprintf("MIG-%d-%d-%d", parent, gi, ci), nvml.SUCCESS
		},
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA A100-SXM4-80GB MIG " + profile, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 40 * gib, Used: uint64(gi) * gib, Free: 40*gib - uint64(gi)*gib}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS },
	}
	instrument(d, "MIGDevice", h.log)
	return d
}

// newFakeMIGParent turns a fake H100 into a MIG-enabled GPU with two GPU
// instances: GI 1 (3g.40gb, one compute instance) and GI 2 (two 1c.3g.40gb
// compute instances).
func newFakeMIGParent(h *fakeHost, index int) *mock.Device {
	migs := []nvml.Device{
		newFakeMIGDevice(h, index, 1, 0, "3g.40gb", []nvml.ProcessInfo{{Pid: 300, UsedGpuMemory: gib, GpuInstanceId: 1, ComputeInstanceId: 0}}),
		newFakeMIGDevice(h, index, 2, 0, "1c.3g.40gb", nil),
		newFakeMIGDevice(h, index, 2, 1, "1c.3g.40gb", nil),
	}
	return newFakeH100(h, index, func(d *mock.Device) {
		d.GetMigModeFunc = func() (int, int, nvml.Return) {
			return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
		}
		d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
			if i < len(migs) {
				return migs[i], nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{
				{Pid: 300, UsedGpuMemory: gib, GpuInstanceId: 1, ComputeInstanceId: 0},
				{Pid: 400, UsedGpuMemory: math.MaxUint64, GpuInstanceId: 2, ComputeInstanceId: 1},
			}, nvml.SUCCESS
		}
		d.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
		d.GpmMigSampleGetFunc = func(gi int, s nvml.GpmSample) nvml.Return { return h.takeSample(s) }
	})
}

func TestMIGInstancesAndTheirGPM(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeMIGParent(h, 0)}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if d.Info.MIGMode != "enabled" {
		t.Errorf("MIG mode = %q", d.Info.MIGMode)
	}
	if len(d.MIGInstances) != 3 {
		t.Fatalf("MIG instances = %+v", d.MIGInstances)
	}
	first := d.MIGInstances[0]
	if first.GPUInstanceID != 1 || first.ComputeInstanceID != 0 || first.UUID != "MIG-0-1-0" || first.Profile != "3g.40gb" {
		t.Errorf("instance 0 = %+v", first)
	}
	want(t, "mig0.memory_total (v1 fallback)", first.MemoryTotal, 40*gib)
	want(t, "mig0.memory_used", first.MemoryUsed, 1*gib)
	if d.MIGInstances[1].Profile != "1c.3g.40gb" {
		t.Errorf("instance 1 profile = %q", d.MIGInstances[1].Profile)
	}
	for i, inst := range d.MIGInstances {
		want(t, fmt.Sprintf("mig%d.gpm.sm_active", i), inst.GPM.SMActive, 0.80)
	}
	// One sample per GPU instance per read, not per compute instance.
	if n := h.log.count("Device.GpmMigSampleGet"); n != 4 {
		t.Errorf("GpmMigSampleGet called %d times (baseline + 1 read, 2 GPU instances), want 4", n)
	}
	wantAbsent(t, "device GPM on a MIG-enabled GPU", d.GPM.SMActive)

	if len(snap.Processes) != 2 {
		t.Fatalf("processes = %+v", snap.Processes)
	}
	p300, p400 := snap.Processes[0], snap.Processes[1]
	if p300.PID != 300 || p300.MIGUUID != "MIG-0-1-0" || p300.GPUInstanceID != snapshot.Some(1) || p300.ComputeInstanceID != snapshot.Some(0) {
		t.Errorf("process 300 = %+v", p300)
	}
	if p400.PID != 400 || p400.MIGUUID != "MIG-0-2-1" || p400.GPUInstanceID != snapshot.Some(2) || p400.ComputeInstanceID != snapshot.Some(1) {
		t.Errorf("process 400 (seen only on the parent) = %+v", p400)
	}
	wantAbsent(t, "process 400 memory (NVML: not available)", p400.UsedMemory)
}

func TestProcessesWithUtilization(t *testing.T) {
	h := newFakeHost()
	gpu1 := newFakeH100(h, 1)
	gpu1.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 100, UsedGpuMemory: gib, GpuInstanceId: math.MaxUint32, ComputeInstanceId: math.MaxUint32},
			{Pid: 50, UsedGpuMemory: math.MaxUint64, GpuInstanceId: math.MaxUint32, ComputeInstanceId: math.MaxUint32},
		}, nvml.SUCCESS
	}
	gpu1.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 256 * mib, GpuInstanceId: math.MaxUint32, ComputeInstanceId: math.MaxUint32}}, nvml.SUCCESS
	}
	var mu sync.Mutex
	var lastSeenArgs []uint64
	gpu1.GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		mu.Lock()
		lastSeenArgs = append(lastSeenArgs, lastSeen)
		mu.Unlock()
		if lastSeen >= 20 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return []nvml.ProcessUtilizationSample{
			{Pid: 100, TimeStamp: 20, SmUtil: 30, MemUtil: 10},
			{Pid: 100, TimeStamp: 10, SmUtil: 20, MemUtil: 5},
		}, nvml.SUCCESS
	}
	gpu0 := newFakeH100(h, 0)
	gpu0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 999, UsedGpuMemory: 2 * gib, GpuInstanceId: math.MaxUint32, ComputeInstanceId: math.MaxUint32}}, nvml.SUCCESS
	}
	h.devices = []nvml.Device{gpu0, gpu1}
	r := newReader(t, h, AllGroups())
	snap := read(t, r)
	noGroupErrors(t, snap)

	procs := snap.Processes
	// pid 100 holds a compute and a graphics context: one process.
	if len(procs) != 3 {
		t.Fatalf("processes = %+v", procs)
	}
	// Sorted by GPU, then PID.
	order := [][2]int{{0, 999}, {1, 50}, {1, 100}}
	for i, o := range order {
		if procs[i].GPU != o[0] || int(procs[i].PID) != o[1] {
			t.Errorf("process %d = gpu %d pid %d, want gpu %d pid %d", i, procs[i].GPU, procs[i].PID, o[0], o[1])
		}
	}
	if procs[1].GPUUUID != snap.Devices[1].UUID || procs[1].Type != "compute" {
		t.Errorf("process 50 = %+v", procs[1])
	}
	wantAbsent(t, "pid 50 memory (not available)", procs[1].UsedMemory)
	wantAbsent(t, "pid 50 sm (no sample)", procs[1].SMUtilization)
	if procs[2].Type != "compute+graphics" {
		t.Errorf("pid 100 type = %q", procs[2].Type)
	}
	// Both lists report all of the application's memory: the larger.
	want(t, "pid 100 memory", procs[2].UsedMemory, gib)
	want(t, "pid 100 sm (newest sample)", procs[2].SMUtilization, 0.30)
	want(t, "pid 100 memory util", procs[2].MemoryUtilization, 0.10)
	if procs[2].MIGUUID != "" || procs[2].GPUInstanceID.Valid {
		t.Errorf("non-MIG process has MIG identity: %+v", procs[2])
	}

	// The next read asks for the samples of the second before the newest
	// seen (here: from 0 again), so a read a moment after another still
	// finds the process's newest sample.
	snap = read(t, r)
	mu.Lock()
	args := append([]uint64(nil), lastSeenArgs...)
	mu.Unlock()
	if len(args) != 2 || args[0] != 0 || args[1] != 0 {
		t.Errorf("GetProcessUtilization lastSeen args = %v, want [0 0]", args)
	}
	noGroupErrors(t, snap)
	want(t, "pid 100 sm a moment later", snap.Processes[2].SMUtilization, 0.30)
}

// The accounting's reader (GPMOnlyMIG) asks the driver for the SM
// activity of each MIG instance and for no other GPM metric: the
// accounting uses that alone, and the driver computes each metric asked.
func TestGPMOnlyMIGAsksForSMActivityAlone(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeMIGParent(h, 0)}
	var askedMu sync.Mutex
	asked := map[nvml.GpmMetricId]int{}
	answer := h.GpmMetricsGetFunc
	h.GpmMetricsGetFunc = func(req *nvml.GpmMetricsGetType) nvml.Return {
		askedMu.Lock()
		for i := range req.NumMetrics {
			asked[nvml.GpmMetricId(req.Metrics[i].MetricId)]++
		}
		askedMu.Unlock()
		return answer(req)
	}
	groups := map[string]bool{snapshot.GroupInfo: true, snapshot.GroupMIG: true, snapshot.GroupGPM: true}
	r := newModeReader(t, h, Options{Groups: groups, Now: steppingClock()}, readMode{gpmOnlyMIG: true})
	snap := read(t, r)
	noGroupErrors(t, snap)
	d := snap.Devices[0]
	if len(d.MIGInstances) != 3 {
		t.Fatalf("MIG instances = %+v", d.MIGInstances)
	}
	for i, inst := range d.MIGInstances {
		want(t, fmt.Sprintf("mig%d.gpm.sm_active", i), inst.GPM.SMActive, 0.80)
		wantAbsent(t, fmt.Sprintf("mig%d.gpm.sm_occupancy", i), inst.GPM.SMOccupancy)
	}
	askedMu.Lock()
	defer askedMu.Unlock()
	if asked[nvml.GPM_METRIC_SM_UTIL] == 0 || len(asked) != 1 {
		t.Errorf("metrics asked of the driver = %v, want the SM activity alone", asked)
	}
}
