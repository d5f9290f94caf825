//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func mpsHost(t *testing.T) *sim.Sim {
	return newSim(t, sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 100, UsedMemoryBytes: 2 << 30, SMUtilization: 0.3, Type: "compute+mps"},
		{GPU: 0, PID: 200, UsedMemoryBytes: 1 << 30, Type: "mps"},
		{GPU: 0, PID: 300, UsedMemoryBytes: 1 << 30, Type: "compute+graphics"},
		{GPU: 0, PID: 400, UsedMemoryBytes: 1 << 30, Type: "compute"},
	}}, time.Hour)
}

// MPS clients are listed, merged per PID with the other lists, and marked.
func TestMPSProcessesAreMergedAndMarked(t *testing.T) {
	s := mpsHost(t)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses, snapshot.GroupMemory))
	snap := read(t, r)
	noGroupErrors(t, snap)
	types := map[uint32]string{}
	var memSum uint64
	for _, p := range snap.Processes {
		if _, dup := types[p.PID]; dup {
			t.Errorf("pid %d listed twice", p.PID)
		}
		types[p.PID] = p.Type
		memSum += p.UsedMemory.Value
	}
	wantTypes := map[uint32]string{100: "compute+mps", 200: processTypeMPS, 300: processTypeBoth, 400: "compute"}
	for pid, typ := range wantTypes {
		if types[pid] != typ {
			t.Errorf("pid %d type %q, want %q", pid, types[pid], typ)
		}
	}
	want(t, "device memory used", snap.Devices[0].Memory.Used, memSum)
}

// A driver without the MPS call (the R470 table) still lists the compute
// processes, and never calls the MPS function.
func TestMPSWithoutTheFunction(t *testing.T) {
	s := mpsHost(t)
	r470, _ := nvmlbranch.Lookup("R470")
	lib := newRestrictedLibrary(s, branchExports(r470))
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now})
	snap := read(t, r)
	if v := lib.Violations(); len(v) > 0 {
		t.Fatalf("called: %v", v)
	}
	noGroupErrors(t, snap)
	types := map[uint32]string{}
	for _, p := range snap.Processes {
		types[p.PID] = p.Type
	}
	if types[100] != "compute" || types[200] != "" || types[300] != processTypeBoth {
		t.Errorf("types = %v", types)
	}
}

func TestCombineProcessTypes(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"compute", "graphics", "compute+graphics"},
		{"graphics", "compute", "compute+graphics"},
		{"mps", "compute", "compute+mps"},
		{"compute+graphics", "mps", "compute+graphics+mps"},
		{"compute+mps", "compute", "compute+mps"},
	} {
		if got := combineProcessTypes(c.a, c.b); got != c.want {
			t.Errorf("combine(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
