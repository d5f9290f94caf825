//go:build cgo

package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ProfileInfo describes one built-in profile, for --help and errors.
type ProfileInfo struct {
	Name        string
	Description string
}

// profile is one simulated host: a card model repeated count times, with
// the MIG layout and the default processes of a plausible busy machine.
type profile struct {
	name        string
	description string
	model       *gpuModel
	count       int
	// busIDs are the PCI bus numbers of the host's GPU slots; GPU i uses
	// busIDs[i%len] in PCI domain i/len.
	busIDs       []uint32
	nvlinkActive bool
	// mig maps a GPU index to its MIG layout; GPUs not listed have MIG
	// disabled.
	mig       map[int][]migGPUInstance
	processes []ProcessSpec
}

// migGPUInstance is one GPU instance of a MIG layout.
type migGPUInstance struct {
	profileID int    // nvml.GPU_INSTANCE_PROFILE_*
	id        int    // GPU instance ID as NVML numbers it
	start     uint32 // placement start slice
	cis       []migComputeInstance
}

// migComputeInstance is one compute instance inside a GPU instance.
type migComputeInstance struct {
	profileID int // nvml.COMPUTE_INSTANCE_PROFILE_*
	id        int
}

var (
	dgxH100Buses = []uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}
	dgxA100Buses = []uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}
)

const gib = 1 << 30

var profiles = map[string]*profile{
	"h100": {
		name:        "h100",
		description: "one NVIDIA H100 80GB HBM3 (SXM5, Hopper): GPM, ECC, 18 NVLinks (inactive: no peer)",
		model:       h100SXM, count: 1, busIDs: []uint32{0x18},
		processes: []ProcessSpec{
			{GPU: 0, PID: 48213, UsedMemoryBytes: 61 * gib, SMUtilization: 0.72, MemoryUtilization: 0.41},
		},
	},
	"dgx-h100": {
		name:        "dgx-h100",
		description: "DGX H100: eight H100 80GB HBM3 with 18 active NVLinks each; a 4-GPU training job, a fine-tuning job, an inference server and a notebook, GPU 5 idle, GPU 7 in MIG mode (3g.40gb+2g.20gb+2x1g.10gb)",
		model:       h100SXM, count: 8, busIDs: dgxH100Buses, nvlinkActive: true,
		// GPU 7 is split for small jobs, as `nvidia-smi mig -cgi 9,14,19,19 -C`
		// would: one 3g.40gb, one 2g.20gb and two 1g.10gb instances, each with
		// one compute instance. Hopper samples GPM per GPU instance
		// (GpmMigSampleGet).
		mig: map[int][]migGPUInstance{
			7: {
				{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 1, 4, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 5, 0, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 13, 2, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 14, 3, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
			},
		},
		processes: []ProcessSpec{
			// One 4-GPU training job (torchrun ranks).
			{GPU: 0, PID: 71201, UsedMemoryBytes: 74 * gib, SMUtilization: 0.78, MemoryUtilization: 0.46},
			{GPU: 1, PID: 71202, UsedMemoryBytes: 74 * gib, SMUtilization: 0.77, MemoryUtilization: 0.45},
			{GPU: 2, PID: 71203, UsedMemoryBytes: 74 * gib, SMUtilization: 0.78, MemoryUtilization: 0.46},
			{GPU: 3, PID: 71204, UsedMemoryBytes: 74 * gib, SMUtilization: 0.76, MemoryUtilization: 0.44},
			// A fine-tuning job on GPU 4. GPU 5 is idle: the demo
			// (internal/demo) has a Slurm job hold it, the "allocated but
			// idle" case operators look for.
			{GPU: 4, PID: 83310, UsedMemoryBytes: 52 * gib, SMUtilization: 0.55, MemoryUtilization: 0.30},
			// An inference server holding its KV cache, plus a notebook.
			{GPU: 6, PID: 90412, UsedMemoryBytes: 70 * gib, SMUtilization: 0.35, MemoryUtilization: 0.52},
			{GPU: 6, PID: 91877, UsedMemoryBytes: 3 * gib, SMUtilization: 0.02, MemoryUtilization: 0.01},
			// GPU 7 (MIG): an embedding service on the 3g.40gb instance; the
			// 2g.20gb and the two 1g.10gb instances are idle.
			{GPU: 7, PID: 95120, UsedMemoryBytes: 27 * gib, SMUtilization: 0.6, MemoryUtilization: 0.35, GPUInstance: new(1), ComputeInstance: new(0)},
		},
	},
	"dgx-a100-mig": {
		name:        "dgx-a100-mig",
		description: "DGX A100: eight A100-SXM4-80GB, 12 NVLinks each; GPUs 0-3 in MIG mode (7x1g.10gb, 2x3g.40gb, 7g.80gb split 4c+3c, mixed 3g+2g+1g+1g)",
		model:       a100SXM80, count: 8, busIDs: dgxA100Buses, nvlinkActive: true,
		mig: map[int][]migGPUInstance{
			0: {
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 7, 0, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 8, 1, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 9, 2, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 10, 3, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 11, 4, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 12, 5, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 13, 6, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
			},
			1: {
				{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 1, 4, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2, 0, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 0}}},
			},
			2: {
				{nvml.GPU_INSTANCE_PROFILE_7_SLICE, 0, 0, []migComputeInstance{
					{nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 0},
					{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 1},
				}},
			},
			3: {
				{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 1, 4, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 5, 0, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 13, 2, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
				{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 14, 3, []migComputeInstance{{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 0}}},
			},
		},
		processes: []ProcessSpec{
			// Notebooks on the 1g.10gb slices of GPU 0.
			{GPU: 0, PID: 30511, UsedMemoryBytes: 7 * gib, SMUtilization: 0.4, GPUInstance: new(7), ComputeInstance: new(0)},
			{GPU: 0, PID: 30544, UsedMemoryBytes: 5 * gib, SMUtilization: 0.2, GPUInstance: new(8), ComputeInstance: new(0)},
			{GPU: 0, PID: 30602, UsedMemoryBytes: 9 * gib, SMUtilization: 0.6, GPUInstance: new(11), ComputeInstance: new(0)},
			// Two inference services on the 3g.40gb halves of GPU 1.
			{GPU: 1, PID: 41170, UsedMemoryBytes: 31 * gib, SMUtilization: 0.5, GPUInstance: new(1), ComputeInstance: new(0)},
			{GPU: 1, PID: 41233, UsedMemoryBytes: 28 * gib, SMUtilization: 0.45, GPUInstance: new(2), ComputeInstance: new(0)},
			// Two jobs sharing the 7g.80gb instance of GPU 2 through its compute instances.
			{GPU: 2, PID: 52001, UsedMemoryBytes: 40 * gib, SMUtilization: 0.5, GPUInstance: new(0), ComputeInstance: new(0)},
			{GPU: 2, PID: 52090, UsedMemoryBytes: 22 * gib, SMUtilization: 0.3, GPUInstance: new(0), ComputeInstance: new(1)},
			// GPU 3: a job on the 3g.40gb, a notebook on one 1g.10gb.
			{GPU: 3, PID: 60017, UsedMemoryBytes: 33 * gib, SMUtilization: 0.4, GPUInstance: new(1), ComputeInstance: new(0)},
			{GPU: 3, PID: 60321, UsedMemoryBytes: 6 * gib, SMUtilization: 0.1, GPUInstance: new(13), ComputeInstance: new(0)},
			// Whole-GPU training on GPUs 4-6; GPU 7 idle.
			{GPU: 4, PID: 77120, UsedMemoryBytes: 71 * gib, SMUtilization: 0.82, MemoryUtilization: 0.5},
			{GPU: 5, PID: 77121, UsedMemoryBytes: 71 * gib, SMUtilization: 0.81, MemoryUtilization: 0.5},
			{GPU: 6, PID: 77122, UsedMemoryBytes: 71 * gib, SMUtilization: 0.8, MemoryUtilization: 0.49},
		},
	},
	"rtx4090": {
		name:        "rtx4090",
		description: "one NVIDIA GeForce RTX 4090 (Ada) workstation card: no ECC, NVLink, GPM, MIG, memory temperature or serial",
		model:       rtx4090, count: 1, busIDs: []uint32{0x01},
		processes: []ProcessSpec{
			{GPU: 0, PID: 2154, UsedMemoryBytes: 412 << 20, Type: "graphics"}, // Xorg
			{GPU: 0, PID: 5120, UsedMemoryBytes: 18 * gib, SMUtilization: 0.85, MemoryUtilization: 0.38},
		},
	},
	"v100": {
		name:        "v100",
		description: "one Tesla V100-SXM2-32GB (Volta): page retirement instead of row remapping, no MIG, no GPM",
		model:       v100SXM2, count: 1, busIDs: []uint32{0x06},
		processes: []ProcessSpec{
			{GPU: 0, PID: 12877, UsedMemoryBytes: 27 * gib, SMUtilization: 0.66, MemoryUtilization: 0.4},
		},
	},
	"large": {
		name:        "large",
		description: "64 H100 80GB HBM3 with NVLink, one process on each GPU but every eighth (stress)",
		model:       h100SXM, count: 64, busIDs: dgxH100Buses, nvlinkActive: true,
		processes: largeProcesses(64),
	},
}

func largeProcesses(n int) []ProcessSpec {
	var ps []ProcessSpec
	for i := range n {
		if i%8 == 7 {
			continue
		}
		ps = append(ps, ProcessSpec{
			GPU: i, PID: uint32(100000 + 37*i), UsedMemoryBytes: uint64(40+i%30) * gib,
			SMUtilization: 0.3 + 0.01*float64(i%60), MemoryUtilization: 0.2 + 0.005*float64(i%60),
		})
	}
	return ps
}

// Profiles lists the built-in profiles, sorted by name.
func Profiles() []ProfileInfo {
	out := make([]ProfileInfo, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, ProfileInfo{Name: p.name, Description: p.description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func profileNames() string {
	var names []string
	for _, p := range Profiles() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func lookupProfile(name string) (*profile, error) {
	if name == "" {
		return nil, fmt.Errorf("no simulator profile given (valid profiles: %s)", profileNames())
	}
	p, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("unknown simulator profile %q (valid profiles: %s)", name, profileNames())
	}
	return p, nil
}
