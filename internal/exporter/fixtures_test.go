package exporter

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Hand-built snapshots shaped like the real machines, so these tests do not
// depend on the simulator package.

// fixedSource returns the same snapshot (or error) on every call.
type fixedSource struct {
	snap  *snapshot.Snapshot
	err   error
	calls atomic.Int64
}

func (f *fixedSource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	f.calls.Add(1)
	return f.snap, f.err
}

var some = snapshot.Some[float64]

func someU(v uint64) snapshot.Opt[uint64] { return snapshot.Some(v) }
func someI(v int) snapshot.Opt[int]       { return snapshot.Some(v) }
func someB(v bool) snapshot.Opt[bool]     { return snapshot.Some(v) }

// h100Device is an H100 SXM5 80GB with every reading present.
func h100Device(i, nvlinks int) snapshot.Device {
	const gib = 1 << 30
	f := float64(i)
	d := snapshot.Device{
		Index: i,
		UUID:  fmt.Sprintf("GPU-%08x-1d2e-4f50-8a9b-%012x", 0x5e1f0000+i, 0xc0ffee000000+i),
		Up:    true,
		Info: snapshot.Info{
			Name: "NVIDIA H100 80GB HBM3", Brand: "nvidia", Architecture: "hopper",
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10), Serial: fmt.Sprintf("165322001%04d", i),
			VBIOSVersion: "96.00.74.00.1A", ComputeCapability: "9.0",
			PersistenceMode: "enabled", ComputeMode: "default", MIGMode: "disabled", ECCMode: "enabled", VirtualizationMode: "none",
		},
		Utilization: snapshot.Utilization{GPU: some(0.87 - f/100), Memory: some(0.42), Encoder: some(0), Decoder: some(0.01)},
		Memory: snapshot.Memory{
			Total: someU(80 * gib), Used: someU(uint64(61+i) * gib), Free: someU(uint64(19-i) * gib), Reserved: someU(512 << 20),
			BAR1Total: someU(128 * gib), BAR1Used: someU(5 << 20), BAR1Free: someU(128*gib - 5<<20),
		},
		Temperature: snapshot.Temperature{
			GPU: some(61 + f), Memory: some(70 + f),
			SlowdownThreshold: some(90), ShutdownThreshold: some(92), MemoryMaxThreshold: some(95),
		},
		FanSpeed: some(0.3),
		Clocks: []snapshot.Clock{
			{Type: "graphics", Current: some(1.98e9), Max: some(1.98e9)},
			{Type: "sm", Current: some(1.98e9), Max: some(1.98e9)},
			{Type: "memory", Current: some(2.619e9), Max: some(2.619e9)},
			{Type: "video", Current: some(1.545e9), Max: some(1.545e9)},
		},
		PState: someI(0),
		ClockEvents: []snapshot.ClockEvent{
			{Reason: "gpu_idle"}, {Reason: "applications_clocks_setting"}, {Reason: "sw_power_cap", Active: i == 3},
			{Reason: "hw_slowdown"}, {Reason: "sync_boost"}, {Reason: "sw_thermal_slowdown"},
			{Reason: "hw_thermal_slowdown"}, {Reason: "hw_power_brake_slowdown"}, {Reason: "display_clock_setting"},
		},
		Power: snapshot.Power{Usage: some(512.3 + f), EnforcedLimit: some(700), Energy: some(9.87654321e8 + f),
			DefaultLimit: some(700), MinLimit: some(200), MaxLimit: some(700)},
		MIGModePending: snapshot.Some(false),
		// A healthy NVSwitch fabric: each health field FALSE (2), the
		// configuration NONE (1).
		Fabric: snapshot.Fabric{HealthMask: someU(0x1aa), HealthSummary: someU(1)},
		PCIe: snapshot.PCIe{
			TxBytes: someU(123456789012 + uint64(i)), RxBytes: someU(98765432109), LinkGen: someI(5), LinkWidth: someI(16),
			MaxLinkGen: someI(5), MaxLinkWidth: someI(16), ReplayCounter: someU(0),
		},
		ECC: snapshot.ECC{
			VolatileCorrected: someU(2), VolatileUncorrected: someU(0), AggregateCorrected: someU(17), AggregateUncorrected: someU(0),
			RetiredPagesSingleBit: someU(0), RetiredPagesDoubleBit: someU(0), RetiredPagesPending: someB(false),
			RemappedRowsCorrectable: someU(1), RemappedRowsUncorrectable: someU(0), RemappedRowsPending: someB(false), RemappedRowsFailure: someB(false),
		},
		XIDErrors:   []snapshot.XIDCount{{XID: 79, Count: uint64(i % 2)}, {XID: 13, Count: 4}},
		XIDEvents:   snapshot.Some(uint64(4 + i%2)),
		XIDLastCode: snapshot.Some(uint64(13)),
		GPM: snapshot.GPM{
			SMActive: some(0.81), SMOccupancy: some(0.44), TensorActive: some(0.63), DRAMActive: some(0.52),
			FP16Active: some(0.31), FP32Active: some(0.12), FP64Active: some(0.001),
			GraphicsActive: some(0.9), PCIeTxBytesPerSecond: some(3e9), PCIeRxBytesPerSecond: some(6e9),
			NVLinkTxBytesPerSecond: some(2e11), NVLinkRxBytesPerSecond: some(1.9e11),
		},
	}
	for l := range nvlinks {
		d.NVLinks = append(d.NVLinks, snapshot.NVLink{
			Link: l, Active: true, TxBytes: someU(uint64(l) << 34), RxBytes: someU(uint64(l)<<34 + 7),
			CRCFlitErrors: someU(0), CRCDataErrors: someU(0), ReplayErrors: someU(uint64(l % 3)), RecoveryErrors: someU(0),
		})
	}
	return d
}

var allGroupsOK = func() map[string]snapshot.GroupStatus {
	m := map[string]snapshot.GroupStatus{}
	for i, g := range snapshot.AllGroups {
		m[g] = snapshot.GroupStatus{Duration: time.Duration(100+i) * time.Microsecond}
	}
	m[snapshot.GroupGPM] = snapshot.GroupStatus{Duration: time.Millisecond, Err: errors.New("nvmlGpmSampleGet: unknown error")}
	return m
}

// fullSnapshot is a DGX-H100-like host with n GPUs, every field set: GPU 1
// is in MIG mode with two instances, and processes of several owners run on
// the first GPUs (two of them in the same container, one with a hostile
// name).
func fullSnapshot(n, nvlinks int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Time:          time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		DriverVersion: "550.90.07", CUDADriverVersion: "12.4", NVMLVersion: "12.550.90.07",
		Driver: snapshot.Driver{Version: "550.90.07", Branch: "R550", Library: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.90.07",
			Limits: []snapshot.DriverLimit{{Group: "pcie", Reason: "partial: no PCIe traffic counters"}}},
		AttributionErrors: map[string]uint64{"docker": 3, "slurm": 0, "kubelet": 1},
		ReadingsDropped:   map[string]uint64{"temperature": 2, "power": 1},
		Groups:            allGroupsOK(),
	}
	for i := range n {
		s.Devices = append(s.Devices, h100Device(i, nvlinks))
	}
	if n > 1 {
		d := &s.Devices[1]
		d.Info.MIGMode = "enabled"
		d.MIGInstances = []snapshot.MIGInstance{
			{GPUInstanceID: 1, ComputeInstanceID: 0, UUID: "MIG-1b2c3d4e-0001-5f60-8a9b-0123456789ab", Profile: "3g.40gb",
				MemoryTotal: someU(40 << 30), MemoryUsed: someU(12 << 30),
				GPM: snapshot.GPM{SMActive: some(0.5), SMOccupancy: some(0.25), TensorActive: some(0.4), DRAMActive: some(0.3),
					FP16Active: some(0.2), FP32Active: some(0.1), FP64Active: some(0)}},
			{GPUInstanceID: 2, ComputeInstanceID: 0, UUID: "MIG-1b2c3d4e-0002-5f60-8a9b-0123456789ab", Profile: "3g.40gb",
				MemoryTotal: someU(40 << 30), MemoryUsed: someU(0)},
		}
	}
	if n > 1 {
		// A pod holding GPU 0 twice through time-slicing (one series), a
		// pod on a MIG instance of GPU 1, and a Slurm job holding GPU 1.
		pod := snapshot.Pod{Name: "llm-0", Namespace: "research", Container: "main"}
		s.Allocations = []snapshot.Allocation{
			{GPU: 0, GPUUUID: s.Devices[0].UUID, Pod: pod},
			{GPU: 0, GPUUUID: s.Devices[0].UUID, Pod: pod},
			{GPU: 1, GPUUUID: s.Devices[1].UUID, MIGUUID: "MIG-1b2c3d4e-0001-5f60-8a9b-0123456789ab", Pod: snapshot.Pod{Name: "nb-\"x\"", Namespace: "users", Container: "jupyter"}},
			{GPU: 1, GPUUUID: s.Devices[1].UUID, Slurm: snapshot.SlurmJob{JobID: "4242", User: "carol", Account: "chem", Partition: "gpu"}},
		}
	}
	// Accounting totals of the first GPU: one owner, one with a figure
	// never measured (absent), an allocation and the idle energy.
	s.Accounting = &snapshot.Accounting{
		Ticks: 60, TickCPUSeconds: some(0.018),
		Owners: []snapshot.OwnerTotal{
			{Key: snapshot.OwnerKey{GPU: 0, GPUUUID: s.Devices[0].UUID, User: "alice", Container: "trainer", ComposeProject: "lab", ComposeService: "trainer"},
				Seconds: 120, SMSeconds: some(60), MemoryByteSeconds: some(120 << 30), EnergyJoules: some(30000)},
			{Key: snapshot.OwnerKey{GPU: 0, GPUUUID: s.Devices[0].UUID, MIGUUID: "MIG-1b2c3d4e-0001-5f60-8a9b-0123456789ab", Pod: "nb", Namespace: "users"},
				Seconds: 30},
		},
		Allocations: []snapshot.AllocationTotal{{GPU: 0, GPUUUID: s.Devices[0].UUID, Namespace: "research", Pod: "llm-0", Container: "main", Seconds: 300, IdleSeconds: some(100)}},
		IdleEnergy:  []snapshot.DeviceEnergy{{GPU: 0, GPUUUID: s.Devices[0].UUID, Joules: 5000}},
	}
	owners := []snapshot.Owner{
		{User: "alice", Command: "python train.py", Container: snapshot.Container{Runtime: "docker", ID: "4f9a1c2b3d4e5f60718293a4b5c6d7e8f9", Name: "trainer",
			ComposeProject: "lab", ComposeService: "trainer"}},
		{User: "bob", Command: "torchrun", Pod: snapshot.Pod{Name: "llm-0", Namespace: "research", Container: "main"},
			Container: snapshot.Container{Runtime: "containerd", ID: "a1b2c3d4e5f6a7b8c9d0"}},
		{User: "carol", Command: "srun ./md", Slurm: snapshot.SlurmJob{JobID: "4242", User: "carol", Partition: "gpu"}},
		{User: "d\"ave\\\n", Command: "bad\xffname ünïcødé"},
		{}, // not attributed
	}
	pid := uint32(1000)
	for i := 0; i < n && i < 4; i++ {
		for j, o := range owners {
			p := snapshot.Process{
				GPU: i, GPUUUID: s.Devices[i].UUID, PID: pid, Type: "compute",
				UsedMemory: someU(uint64(j+1) << 30), SMUtilization: some(0.1), MemoryUtilization: some(0.05),
				Owner: o,
			}
			p.Owner.StartTime = uint64(pid) * 10
			s.Processes = append(s.Processes, p)
			pid++
		}
		// A second process of alice's container on the same GPU.
		p := s.Processes[len(s.Processes)-len(owners)]
		p.PID = pid
		pid++
		s.Processes = append(s.Processes, p)
	}
	// The health stage's verdicts on it, as the pipeline's last enricher gives them.
	s.Health = health.NewJudge(health.DefaultPolicy()).Judge(s)
	return s
}

// sparseSnapshot is a mixed host: GPU 0 is a consumer card where most
// readings are absent, GPU 1 has been lost, GPU 2 is a full H100.
func sparseSnapshot() *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		DriverVersion: "550.90.07", CUDADriverVersion: "12.4",
		Groups: allGroupsOK(),
	}
	s.Devices = []snapshot.Device{
		{
			Index: 0, UUID: "GPU-4090-0000", Up: true,
			Info:        snapshot.Info{Name: "NVIDIA GeForce RTX 4090", Brand: "geforce", Architecture: "ada"},
			Utilization: snapshot.Utilization{GPU: some(0.5)},
			Memory:      snapshot.Memory{Total: someU(24 << 30)},
			Temperature: snapshot.Temperature{GPU: some(55)},
			Power:       snapshot.Power{Usage: some(300)},
		},
		{Index: 1, UUID: "GPU-lost-0001", Up: false, DownReason: "GPU_IS_LOST",
			// The XID that announced the loss stays visible.
			XIDEvents: someU(1), XIDLastCode: someU(79), XIDErrors: []snapshot.XIDCount{{XID: 79, Count: 1}}},
		h100Device(2, 18),
	}
	s.Processes = []snapshot.Process{
		{GPU: 0, PID: 7, UsedMemory: someU(1 << 30)}, // no utilization readings
		{GPU: 1, PID: 8, UsedMemory: someU(1 << 30)}, // on the lost GPU
		{GPU: 9, PID: 9, UsedMemory: someU(1 << 30)}, // on an unknown GPU
	}
	return s
}
