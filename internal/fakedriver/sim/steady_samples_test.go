//go:build cgo

package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A GPU whose processes all run throughout at one utilization answers
// any read (of the whole buffer or part of it) from its steady samples,
// as the read of each process's periods answers: idle and graphics-only processes left out,
// the rest in the processes' order.
func TestSteadySamplesAnswerAsEachProcessesPeriods(t *testing.T) {
	procs := []ProcessSpec{
		{GPU: 0, PID: 30, UsedMemoryBytes: 1 << 20, SMUtilization: 0.003},
		{GPU: 0, PID: 10, UsedMemoryBytes: 1 << 20, SMUtilization: 0.5, MemoryUtilization: 0.25},
		{GPU: 0, PID: 20, UsedMemoryBytes: 1 << 20}, // idle: no sample
		{GPU: 0, PID: 40, UsedMemoryBytes: 1 << 20, SMUtilization: 0.7, Type: "graphics"},
		{GPU: 0, PID: 50, UsedMemoryBytes: 1 << 20, SMUtilization: 0.333},
		{GPU: 1, PID: 60, UsedMemoryBytes: 1 << 20, SMUtilization: 1},
	}
	s := newSim(t, Config{Profile: "dgx-h100", Processes: procs, PinTime: pinAt(0)})
	if s.devices[0].steadySamples == nil {
		t.Fatal("GPU 0's processes run throughout: no steady samples")
	}
	read := func(d *device, lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		out, r := d.GetProcessUtilization(lastSeen)
		return slices.Clone(out), r
	}
	for _, at := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 10*time.Second + 7*time.Millisecond, 31 * time.Second} {
		s.SetElapsed(at)
		for _, back := range []time.Duration{0, time.Second, 2 * time.Second, 5 * time.Second, time.Hour} {
			lastSeen := uint64(0)
			if back > 0 && at > back {
				lastSeen = uint64(Epoch.Add(at - back).UnixMicro())
			}
			for _, d := range s.devices[:2] {
				steady, r1 := read(d, lastSeen)
				kept := d.steadySamples
				d.steadySamples = nil
				each, r2 := read(d, lastSeen)
				d.steadySamples = kept
				if r1 != r2 || !slices.Equal(steady, each) {
					t.Errorf("GPU %d at %v, lastSeen %d: steady %v %+v; each process's periods %v %+v", d.index, at, lastSeen, r1, steady, r2, each)
				}
			}
		}
	}
	s.SetElapsed(5 * time.Second)
	got, _ := read(s.devices[0], 0)
	var pids []uint32
	for _, smp := range got {
		pids = append(pids, smp.Pid)
	}
	if want := []uint32{30, 10, 50}; !slices.Equal(pids, want) {
		t.Errorf("GPU 0 sampled PIDs %v, want %v (idle and graphics-only left out)", pids, want)
	}
}

// A process that starts, ends or changes its utilization makes its GPU's
// reads look at each process's periods.
func TestSteadySamplesOnlyWhenEveryProcessIsSteady(t *testing.T) {
	start := Duration(10 * time.Second)
	for name, p := range map[string]ProcessSpec{
		"start":    {GPU: 0, PID: 2, UsedMemoryBytes: 1 << 20, SMUtilization: 0.5, Start: &start},
		"end":      {GPU: 0, PID: 2, UsedMemoryBytes: 1 << 20, SMUtilization: 0.5, End: &start},
		"schedule": {GPU: 0, PID: 2, UsedMemoryBytes: 1 << 20, SMUtilization: 0.5, Schedule: []UtilizationStep{{At: start, SMUtilization: 0.9}}},
	} {
		s := newSim(t, Config{Profile: "h100", PinTime: pinAt(0), Processes: []ProcessSpec{{GPU: 0, PID: 1, UsedMemoryBytes: 1 << 20, SMUtilization: 0.5}, p}})
		if s.devices[0].steadySamples != nil {
			t.Errorf("%s: steady samples although process 2 is not steady", name)
		}
	}
}
