//go:build cgo

package sim

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// The A100 MIG table is a copy of go-nvml's mock/dgxa100 data (so that the
// simulator links no mock): it must say what go-nvml says, apart from the
// memory sizes, which are the 80 GB card's.
func TestA100MIGTableMatchesGoNVML(t *testing.T) {
	want := dgxa100.MIGProfiles
	if have, wantIDs := slices.Sorted(maps.Keys(a100MIG80Table)), slices.Sorted(maps.Keys(want.GpuInstanceProfiles)); !slices.Equal(have, wantIDs) {
		t.Fatalf("GPU instance profiles %v, go-nvml has %v", have, wantIDs)
	}
	for id, shape := range a100MIG80Table {
		wantInfo := want.GpuInstanceProfiles[id]
		wantInfo.MemorySizeMB = shape.info.MemorySizeMB
		if shape.info != wantInfo {
			t.Errorf("GPU instance profile %d (%s):\n have %+v\n want %+v", id, shape.name, shape.info, wantInfo)
		}
		if !reflect.DeepEqual(shape.cis, want.ComputeInstanceProfiles[id]) {
			t.Errorf("compute instance profiles of GPU instance profile %d (%s):\n have %+v\n want %+v", id, shape.name, shape.cis, want.ComputeInstanceProfiles[id])
		}
	}
	// The 80 GB card: 9.5 to 79 GiB.
	if got := a100MIG80Table[0].info.MemorySizeMB; got != 9728 {
		t.Errorf("1g.10gb has %d MiB", got)
	}
}
