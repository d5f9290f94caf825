//go:build cgo

package nvmlbackend

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// A long process list (a shared inference or MPS host) is merged per PID
// and sorted as a short one is: each process once, with all of its
// kinds, in PID order whatever order the driver lists them in, and the
// memory counted once.
func TestLongProcessListsAreMergedAndSorted(t *testing.T) {
	kinds := []string{"compute", "compute+graphics", "compute+mps", "mps", "graphics"}
	var specs []sim.ProcessSpec
	wantTypes := map[uint32]string{}
	for i := range 60 {
		pid := uint32(5000 - 37*i) // the driver lists them newest first
		kind := kinds[i%len(kinds)]
		specs = append(specs, sim.ProcessSpec{GPU: 0, PID: pid, UsedMemoryBytes: uint64(i+1) << 20, Type: kind})
		wantTypes[pid] = kind
	}
	// And a short list on another GPU, merged by the scan.
	specs = append(specs, sim.ProcessSpec{GPU: 1, PID: 9, UsedMemoryBytes: 1 << 20, Type: "compute+graphics"},
		sim.ProcessSpec{GPU: 1, PID: 3, UsedMemoryBytes: 1 << 20, Type: "compute"})
	wantTypes[9], wantTypes[3] = "compute+graphics", "compute"
	s := newSim(t, sim.Config{Profile: "dgx-h100", Processes: specs}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses, snapshot.GroupMemory))
	for range 2 { // the second read has the first one's size hint
		snap := read(t, r)
		noGroupErrors(t, snap)
		if !slices.IsSortedFunc(snap.Processes, func(a, b snapshot.Process) int { return compareProcesses(&a, &b) }) {
			t.Errorf("processes not sorted by GPU and PID")
		}
		types := map[uint32]string{}
		var mem uint64
		for _, p := range snap.Processes {
			if _, dup := types[p.PID]; dup {
				t.Errorf("pid %d listed twice", p.PID)
			}
			types[p.PID] = p.Type
			if p.GPU == 0 {
				mem += p.UsedMemory.Value
			}
		}
		for pid, typ := range wantTypes {
			if types[pid] != typ {
				t.Errorf("pid %d: type %q, want %q", pid, types[pid], typ)
			}
		}
		if len(types) != len(wantTypes) {
			t.Errorf("%d processes, want %d", len(types), len(wantTypes))
		}
		want(t, "GPU 0 memory used", snap.Devices[0].Memory.Used, mem)
	}
}
