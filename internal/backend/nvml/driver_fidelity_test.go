package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Differences between a real driver and a naive reading of it, each shown
// through the simulator, which behaves as nvml.h says the driver does.

func groups(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestSimProcessWithComputeAndGraphicsContextsIsCountedOnce(t *testing.T) {
	const mem = 3 << 30
	s := newSim(t, sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 4242, UsedMemoryBytes: mem, SMUtilization: 0.4, MemoryUtilization: 0.2, Type: "compute+graphics"},
		{GPU: 0, PID: 77, UsedMemoryBytes: 1 << 30, SMUtilization: 0.1, Type: "compute"},
	}}, time.Hour)
	r := newSimReader(t, s, groups(snapshot.GroupProcesses, snapshot.GroupMemory))
	snap := read(t, r)
	noGroupErrors(t, snap)
	if len(snap.Processes) != 2 {
		t.Fatalf("got %d processes, want 2 (pid 4242 once, pid 77): %+v", len(snap.Processes), snap.Processes)
	}
	var memSum uint64
	for _, p := range snap.Processes {
		memSum += p.UsedMemory.Value
		if p.PID == 4242 {
			if p.Type != "compute+graphics" {
				t.Errorf("pid 4242 type = %q, want compute+graphics", p.Type)
			}
			want(t, "pid 4242 memory", p.UsedMemory, mem)
			want(t, "pid 4242 sm", p.SMUtilization, 0.4)
		}
	}
	// The processes' memory adds up to what the device says is used.
	want(t, "device memory used", snap.Devices[0].Memory.Used, memSum)
}
