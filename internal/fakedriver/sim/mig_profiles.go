//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// MIG profile tables: what `nvidia-smi mig -lgip` (GPU instance profiles)
// and `-lcip` (compute instance profiles) list on each MIG-capable card.
// Both cards here split into 7 compute slices and 8 memory slices.

// migShape is one GPU instance profile of a card.
type migShape struct {
	name string // "1g.10gb", as it appears in the MIG device name
	info nvml.GpuInstanceProfileInfo
	// placementSize is the placement's size in slices, as
	// GetGpuInstancePossiblePlacements reports it.
	placementSize uint32
	// cis are the compute instance profiles of a GPU instance of this
	// profile, by nvml.COMPUTE_INSTANCE_PROFILE_*.
	cis map[int]nvml.ComputeInstanceProfileInfo
}

// migTable maps nvml.GPU_INSTANCE_PROFILE_* to a card's profile; nil for a
// card without MIG.
type migTable map[int]migShape

// a100MIG80Table is the A100-SXM4-80GB: shapes (slices, SMs, engines)
// from go-nvml's A100 tables, memory sizes of the 80 GB card. Profile IDs
// are go-nvml's mock IDs (the profile constants).
var a100MIG80Table = func() migTable {
	t := migTable{}
	for _, r := range a100MIGRows {
		info := nvml.GpuInstanceProfileInfo{
			Id: uint32(r.profile), SliceCount: r.slices, InstanceCount: r.instances,
			MultiprocessorCount: r.sms, CopyEngineCount: r.ce, DecoderCount: r.dec,
			JpegCount: r.jpeg, OfaCount: r.ofa, MemorySizeMB: r.memMiB,
		}
		size := info.SliceCount
		if size == migTotalSlices {
			size = 8 // the full-GPU instance spans all 8 memory slices
		}
		t[r.profile] = migShape{name: r.name, info: info, placementSize: size, cis: a100ComputeInstanceProfiles(info)}
	}
	return t
}()

// a100MIGRows are the A100's GPU instance profiles. Slices, instances,
// SMs and engine counts are copied from go-nvml v0.13.3-0,
// pkg/nvml/mock/dgxa100/mig-profile.go (MIGProfiles.GpuInstanceProfiles;
// Apache-2.0, (c) NVIDIA), so that the simulator links no mock package;
// TestA100MIGTableMatchesGoNVML checks the copy. That table has the
// 40 GB card's memory sizes; memMiB is the 80 GB card's.
var a100MIGRows = []struct {
	profile                int
	name                   string
	slices, instances, sms uint32
	ce, dec, jpeg, ofa     uint32
	memMiB                 uint64
}{
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE, "1g.10gb", 1, 7, 14, 1, 0, 0, 0, 9728},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, "1g.10gb+me", 1, 1, 14, 1, 1, 1, 1, 9728},
	{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, "1g.20gb", 1, 4, 14, 1, 1, 0, 0, 19968},
	{nvml.GPU_INSTANCE_PROFILE_2_SLICE, "2g.20gb", 2, 3, 28, 2, 1, 0, 0, 19968},
	{nvml.GPU_INSTANCE_PROFILE_3_SLICE, "3g.40gb", 3, 2, 42, 3, 2, 0, 0, 40192},
	{nvml.GPU_INSTANCE_PROFILE_4_SLICE, "4g.40gb", 4, 1, 56, 4, 2, 0, 0, 40192},
	{nvml.GPU_INSTANCE_PROFILE_7_SLICE, "7g.80gb", 7, 1, 98, 7, 5, 1, 1, 80896},
}

// a100ComputeInstanceProfiles are the compute instance profiles of an A100
// GPU instance, by the rule go-nvml's table follows (same source as
// a100MIGRows): 1-slice compute instances (plain and REV1) in every GPU
// instance, and c-slice ones for c = 2, 3, 4, 7 up to the GPU instance's
// slices, except 3 in a 4-slice instance; 14 SMs a slice; as many as fit;
// the GPU instance's engines, shared.
func a100ComputeInstanceProfiles(gi nvml.GpuInstanceProfileInfo) map[int]nvml.ComputeInstanceProfileInfo {
	cis := map[int]nvml.ComputeInstanceProfileInfo{}
	for _, c := range []struct {
		profile int
		slices  uint32
	}{
		{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 1},
		{nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, 1},
		{nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, 2},
		{nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 3},
		{nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 4},
		{nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, 7},
	} {
		if c.slices > gi.SliceCount || (c.slices == 3 && gi.SliceCount == 4) {
			continue
		}
		cis[c.profile] = nvml.ComputeInstanceProfileInfo{
			Id: uint32(c.profile), SliceCount: c.slices, InstanceCount: gi.SliceCount / c.slices,
			MultiprocessorCount: 14 * c.slices, SharedCopyEngineCount: gi.CopyEngineCount,
			SharedDecoderCount: gi.DecoderCount, SharedEncoderCount: gi.EncoderCount,
			SharedJpegCount: gi.JpegCount, SharedOfaCount: gi.OfaCount,
		}
	}
	return cis
}

// h100MIG80Table is the H100 80GB HBM3 (SXM5), as NVIDIA's MIG user guide
// lists it for H100-SXM5-80GB and `nvidia-smi mig -lgip` prints it: profile
// ID, instances, memory (9.75, 19.62, 39.50, 79.25 GiB), SMs, copy engines,
// NVDEC, NVENC, JPEG and OFA units. IDs are NVML's real profile IDs.
var h100MIG80Table = func() migTable {
	type row struct {
		profile                 int
		name                    string
		id, instances, slices   uint32
		memMiB                  uint64
		sms, ce, dec, jpeg, ofa uint32
		memorySlices            uint32
	}
	rows := []row{
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, "1g.10gb", 19, 7, 1, 9984, 16, 1, 1, 1, 0, 1},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, "1g.10gb+me", 20, 1, 1, 9984, 16, 1, 1, 1, 1, 1},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, "1g.20gb", 15, 4, 1, 20096, 26, 1, 1, 1, 0, 2},
		{nvml.GPU_INSTANCE_PROFILE_2_SLICE, "2g.20gb", 14, 3, 2, 20096, 32, 2, 2, 2, 0, 2},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, "3g.40gb", 9, 2, 3, 40448, 60, 3, 3, 3, 0, 4},
		{nvml.GPU_INSTANCE_PROFILE_4_SLICE, "4g.40gb", 5, 1, 4, 40448, 64, 4, 4, 4, 0, 4},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, "7g.80gb", 0, 1, 7, 81152, 132, 8, 7, 7, 1, 8},
	}
	// A compute instance of c slices inside a larger GPU instance has the
	// SMs of the c-slice GPU instance (1c.7g.80gb: 16 SMs, like 1g.10gb).
	smsOfSlices := map[uint32]uint32{1: 16, 2: 32, 3: 60, 4: 64, 7: 132}
	ciProfiles := map[uint32]int{
		1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
		3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
		7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	}
	t := migTable{}
	for _, r := range rows {
		shape := migShape{
			name: r.name,
			info: nvml.GpuInstanceProfileInfo{
				Id: r.id, SliceCount: r.slices, InstanceCount: r.instances,
				MultiprocessorCount: r.sms, CopyEngineCount: r.ce, DecoderCount: r.dec,
				JpegCount: r.jpeg, OfaCount: r.ofa, MemorySizeMB: r.memMiB,
			},
			placementSize: r.memorySlices,
			cis:           map[int]nvml.ComputeInstanceProfileInfo{},
		}
		for c, ciProfile := range ciProfiles {
			if c > r.slices || (c == 3 && r.slices == 4) {
				continue // a 4g instance splits into 1c, 2c or 4c, never 3c
			}
			sms := smsOfSlices[c]
			if c == r.slices {
				sms = r.sms // the whole GPU instance (1g.20gb has 26 SMs)
			}
			shape.cis[ciProfile] = nvml.ComputeInstanceProfileInfo{
				Id: uint32(ciProfile), SliceCount: c, InstanceCount: r.slices / c,
				MultiprocessorCount: sms, SharedCopyEngineCount: r.ce, SharedDecoderCount: r.dec,
				SharedJpegCount: r.jpeg, SharedOfaCount: r.ofa,
			}
		}
		t[r.profile] = shape
	}
	return t
}()
