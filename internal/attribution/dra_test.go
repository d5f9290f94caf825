package attribution

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// testdata/k8s/podresources-list-dra.json is what a kubelet (1.34+, with
// KubeletPodResourcesDynamicResources) answers on a node running NVIDIA's
// DRA driver for GPUs: claims on whole GPUs, on MIG devices named by both
// of the driver's formats, one claim shared by two pods, and devices of
// other drivers.

func draAlloc(device, claim, ns, name, container string) PodAllocation {
	return PodAllocation{
		DeviceID: device, Driver: "gpu.nvidia.com", Pool: "gpu-node-3", Claim: claim,
		Pod: snapshot.Pod{Name: name, Namespace: ns, Container: container},
	}
}

func loadDRAFixture(t testing.TB) *KubeletResolver {
	t.Helper()
	resp := loadListFixtureFile(t, "testdata/k8s/podresources-list-dra.json")
	_, socket, _ := newFakeKubelet(t, resp)
	return newKubelet(t, socket, time.Second, time.Minute)
}

func TestKubeletDRAAllocations(t *testing.T) {
	got, err := loadDRAFixture(t).Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []PodAllocation{
		// One claim with two GPUs; the sidecar holds none.
		draAlloc("gpu-1", "research/trainer-0-gpus-x7k2p", "research", "trainer-0", "pytorch"),
		draAlloc("gpu-2", "research/trainer-0-gpus-x7k2p", "research", "trainer-0", "pytorch"),
		// MIG devices, named as v25.12+ and as v25.3–v25.8 name them.
		draAlloc("gpu-3-mig-3g40gb-9-4", "inference/embedder-5c9d-mig-q8r4t", "inference", "embedder-5c9d", "server"),
		draAlloc("gpu-3-mig-19-2-1", "inference/batch-old-driver-mig", "inference", "batch-old-driver", "job"),
		// One claim shared by two pods: each holds the GPU.
		draAlloc("gpu-0", "team/shared-gpu", "team", "notebook-a", "jupyter"),
		draAlloc("gpu-0", "team/shared-gpu", "team", "notebook-b", "jupyter"),
		// A device plugin GPU next to DRA claims in one container; the
		// compute domain channel and another driver's "gpu-2" are no
		// GPUs of gpu.nvidia.com; a device listed twice counts once.
		podAlloc(uuidTrainerA, "nvidia.com/gpu", "ml", "mixed", "main"),
		draAlloc("gpu-vfio-2", "ml/mixed-vfio", "ml", "mixed", "main"),
		draAlloc("gpu-2", "ml/mixed-same-twice", "ml", "mixed", "main"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("allocations:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseDRADeviceName(t *testing.T) {
	for name, want := range map[string]draDeviceName{
		"gpu-0":  {minor: 0},
		"gpu-13": {minor: 13},
		// v25.12+: profile name, GI profile ID, placement start.
		"gpu-3-mig-3g40gb-9-4":     {minor: 3, mig: true, profileID: 9, start: 4, size: -1, profile: "3g40gb"},
		"gpu-0-mig-1g10gb-me-20-6": {minor: 0, mig: true, profileID: 20, start: 6, size: -1, profile: "1g10gb-me"},
		"gpu-2-mig-1c3g40gb-9-0":   {minor: 2, mig: true, profileID: 9, start: 0, size: -1, profile: "1c3g40gb"},
		"gpu-1-mig-7g80gb-0-0":     {minor: 1, mig: true, profileID: 0, start: 0, size: -1, profile: "7g80gb"},
		// v25.3–v25.8: GI profile ID, placement start, placement size.
		"gpu-3-mig-19-2-1": {minor: 3, mig: true, profileID: 19, start: 2, size: 1},
		"gpu-0-mig-0-0-8":  {minor: 0, mig: true, profileID: 0, start: 0, size: 8},
	} {
		got, ok := parseDRADeviceName(name)
		if !ok || got != want {
			t.Errorf("parseDRADeviceName(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{
		"", "gpu-", "gpu-x", "gpu--1", "gpu-+1", "gpu- 1", "gpu-vfio-2", "channel-0", "daemon-0",
		"gpu-0-mig-", "gpu-0-mig-9-4", "gpu-0-mig-3g40gb-9", "gpu-0-mig-3g40gb-x-4", "gpu-0-mig--9-4",
		"GPU-0", "mig-1g.10gb-0", "gpu-0-mig-1g10gb-9-4-extra-",
	} {
		if got, ok := parseDRADeviceName(name); ok {
			t.Errorf("parseDRADeviceName(%q) = %+v, want not a GPU", name, got)
		}
	}
}

func TestDRAProfileName(t *testing.T) {
	for in, want := range map[string]string{
		"1g.10gb": "1g10gb", "3g.40gb": "3g40gb", "1g.10gb+me": "1g10gb-me",
		"1c.3g.40gb": "1c3g40gb", "7g.80GB": "7g80gb", "1g.20gb+gfx": "1g20gb-gfx",
	} {
		if got := draProfileName(in); got != want {
			t.Errorf("draProfileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// draHost is an H100 host whose minor numbers are not its NVML indices
// (NVML orders by PCI bus, the kernel by probe), with one MIG GPU.
func draHost(placements bool) []snapshot.Device {
	mig := func(gi, ci int, uuid, profile string, profileID, start, size int) snapshot.MIGInstance {
		m := snapshot.MIGInstance{GPUInstanceID: gi, ComputeInstanceID: ci, UUID: uuid, Profile: profile}
		if placements {
			m.GPUInstanceProfileID, m.PlacementStart, m.PlacementSize = snapshot.Some(profileID), snapshot.Some(start), snapshot.Some(size)
		}
		return m
	}
	dev := func(index, minor int, uuid string, migs ...snapshot.MIGInstance) snapshot.Device {
		return snapshot.Device{Index: index, UUID: uuid, Up: true, Info: snapshot.Info{MinorNumber: snapshot.Some(minor)}, MIGInstances: migs}
	}
	return []snapshot.Device{
		dev(0, 2, uuidTrainerA),
		dev(1, 0, uuidShared),
		dev(2, 1, uuidTrainerB),
		dev(3, 3, uuidMIGHost,
			mig(1, 0, migWorker, "3g.40gb", 9, 4, 4),
			mig(5, 0, "MIG-2g", "2g.20gb", 14, 0, 2),
			mig(13, 0, migServer, "1g.10gb", 19, 2, 1),
			mig(14, 0, "MIG-1g-b", "1g.10gb", 19, 3, 1)),
	}
}

func TestMatchDRAAllocations(t *testing.T) {
	allocs, err := loadDRAFixture(t).Allocations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, name, c string) snapshot.Pod { return snapshot.Pod{Namespace: ns, Name: name, Container: c} }
	got := MatchAllocations(allocs, draHost(true))
	want := []snapshot.Allocation{
		// gpu-2 is minor 2: NVML index 0; the device plugin's UUID
		// lands on the same GPU.
		{GPU: 0, GPUUUID: uuidTrainerA, Pod: pod("ml", "mixed", "main")},
		{GPU: 0, GPUUUID: uuidTrainerA, Pod: pod("research", "trainer-0", "pytorch")},
		// gpu-0 (index 1) is shared by two pods.
		{GPU: 1, GPUUUID: uuidShared, Pod: pod("team", "notebook-a", "jupyter")},
		{GPU: 1, GPUUUID: uuidShared, Pod: pod("team", "notebook-b", "jupyter")},
		// gpu-1 is index 2.
		{GPU: 2, GPUUUID: uuidTrainerB, Pod: pod("research", "trainer-0", "pytorch")},
		// gpu-3-mig-19-2-1: the 1g.10gb at slice 2, not the one at 3.
		{GPU: 3, GPUUUID: uuidMIGHost, MIGUUID: migServer, Pod: pod("inference", "batch-old-driver", "job")},
		// gpu-3-mig-3g40gb-9-4: the 3g.40gb at slice 4.
		{GPU: 3, GPUUUID: uuidMIGHost, MIGUUID: migWorker, Pod: pod("inference", "embedder-5c9d", "server")},
	}
	if !slices.Equal(got, want) {
		t.Errorf("MatchAllocations:\n got %+v\nwant %+v", got, want)
	}
}

func TestMatchDRAMIGWithoutPlacements(t *testing.T) {
	// An exporter without root or the MIG monitor capability knows each
	// instance's profile, not its placement: a profile name that one
	// instance has still names it; otherwise only the parent is known.
	devices := draHost(false)
	pod := snapshot.Pod{Namespace: "ns", Name: "p", Container: "c"}
	for name, wantMIG := range map[string]string{
		"gpu-3-mig-3g40gb-9-4":  migWorker, // the only 3g.40gb
		"gpu-3-mig-1g10gb-19-2": "",        // two 1g.10gb: which one?
		"gpu-3-mig-19-2-1":      "",        // no profile name in v25.3–v25.8 names
		"gpu-3-mig-4g40gb-5-0":  "",        // no such instance
	} {
		got := MatchAllocations([]PodAllocation{{DeviceID: name, Driver: "gpu.nvidia.com", Pod: pod}}, devices)
		want := []snapshot.Allocation{{GPU: 3, GPUUUID: uuidMIGHost, MIGUUID: wantMIG, Pod: pod}}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

func TestMatchDRAMIGComputeInstances(t *testing.T) {
	// One 7g.80gb GPU instance split into 4c and 3c compute instances
	// (A100): the v25.12+ name's profile says which; the v25.3–v25.8 name
	// holds the whole GPU instance, so both.
	placed := func(ci int, uuid, profile string) snapshot.MIGInstance {
		return snapshot.MIGInstance{GPUInstanceID: 0, ComputeInstanceID: ci, UUID: uuid, Profile: profile,
			GPUInstanceProfileID: snapshot.Some(0), PlacementStart: snapshot.Some(0), PlacementSize: snapshot.Some(8)}
	}
	devices := []snapshot.Device{{Index: 0, UUID: uuidMIGHost, Up: true, Info: snapshot.Info{MinorNumber: snapshot.Some(0)},
		MIGInstances: []snapshot.MIGInstance{placed(0, "MIG-4c", "4c.7g.80gb"), placed(1, "MIG-3c", "3c.7g.80gb")}}}
	pod := snapshot.Pod{Namespace: "ns", Name: "p", Container: "c"}
	for name, wantMIGs := range map[string][]string{
		"gpu-0-mig-3c7g80gb-0-0": {"MIG-3c"},
		"gpu-0-mig-0-0-8":        {"MIG-3c", "MIG-4c"},
		"gpu-0-mig-7g80gb-0-0":   {"MIG-3c", "MIG-4c"},
	} {
		got := MatchAllocations([]PodAllocation{{DeviceID: name, Driver: "gpu.nvidia.com", Pod: pod}}, devices)
		var want []snapshot.Allocation
		for _, m := range wantMIGs {
			want = append(want, snapshot.Allocation{GPU: 0, GPUUUID: uuidMIGHost, MIGUUID: m, Pod: pod})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

func TestMatchDRAUnknownDevices(t *testing.T) {
	devices := draHost(true)
	noMinor := slices.Clone(devices)
	noMinor[1].Info.MinorNumber = snapshot.Opt[int]{}
	pod := snapshot.Pod{Namespace: "ns", Name: "p", Container: "c"}
	for _, tc := range []struct {
		name    string
		devices []snapshot.Device
	}{
		{"gpu-9", devices},            // not on this host
		{"gpu-vfio-2", devices},       // bound to vfio-pci: NVML does not see it
		{"gpu-9-mig-19-2-1", devices}, // parent not on this host
		{"gpu-0", noMinor},            // minor number unknown
	} {
		if got := MatchAllocations([]PodAllocation{{DeviceID: tc.name, Driver: "gpu.nvidia.com", Pod: pod}}, tc.devices); len(got) != 0 {
			t.Errorf("%s: got %+v, want nothing", tc.name, got)
		}
	}
}
