//go:build cgo

package nvmlbackend

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// listingReads reads every 2 s from 2 s to end and returns, per read
// time in seconds, the PIDs listed on GPU gpu (nil where the read did not
// list them).
func listingReads(t *testing.T, cfg sim.Config, gpu int, end time.Duration) map[int][]uint32 {
	t.Helper()
	return listingReadsEvery(t, cfg, gpu, end, 0)
}

// listingReadsEvery is listingReads with ListProcessesSteadyEvery steady.
func listingReadsEvery(t *testing.T, cfg sim.Config, gpu int, end time.Duration, steady int) map[int][]uint32 {
	t.Helper()
	s := newSim(t, cfg, 0)
	groups := map[string]bool{snapshot.GroupProcesses: true, snapshot.GroupMIG: true, snapshot.GroupGPM: true}
	r := newModeReader(t, s, Options{Groups: groups, Now: s.Now}, readMode{processSamples: true, gpmOnlyMIG: true, listEvery: 8, listSteady: steady})
	out := map[int][]uint32{}
	for e := 2 * time.Second; e <= end; e += 2 * time.Second {
		s.SetElapsed(e)
		snap, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Devices[gpu]
		var pids []uint32
		for _, p := range snap.Processes {
			if p.GPU == gpu {
				pids = append(pids, p.PID)
			}
		}
		if d.ProcessesNotListed {
			if len(pids) > 0 {
				t.Errorf("at %s: not listed, yet %d processes", e, len(pids))
			}
			continue
		}
		out[int(e/time.Second)] = append([]uint32{}, pids...)
	}
	return out
}

func listTimes(listed map[int][]uint32) []int {
	var at []int
	for s := range listed {
		at = append(at, s)
	}
	slices.Sort(at)
	return at
}

// The accounting's reader lists every GPU's processes every eighth read,
// and a GPU's at once when the samples show a new PID (a process listed,
// and so attributed, at the read of its first sample) or miss one sampled
// at the read before (a busy process ended). An idle process is listed
// with the others.
func TestProcessesListedWhenSamplesChange(t *testing.T) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 10, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5},
		{GPU: 0, PID: 11, UsedMemoryBytes: 1 << 30, SMUtilization: 0.3, Start: durationPtr(21 * time.Second), End: durationPtr(41 * time.Second)},
		{GPU: 0, PID: 12, UsedMemoryBytes: 1 << 30}, // idle: never sampled
	}}
	listed := listingReads(t, cfg, 0, 60*time.Second)
	// Every eighth read (2 s, 18 s, 34 s, 50 s) lists every GPU; 22 s:
	// PID 11's first sample (21.17 s); 44 s: PID 11's last sample (40.83 s)
	// was read at 42 s, none at 44 s.
	if at, want := listTimes(listed), []int{2, 18, 22, 34, 44, 50}; !slices.Equal(at, want) {
		t.Errorf("listed at %v s, want %v", at, want)
	}
	if got := listed[22]; !slices.Equal(got, []uint32{10, 11, 12}) {
		t.Errorf("at 22 s listed %v, want PIDs 10, 11 and the idle 12", got)
	}
	if got := listed[44]; !slices.Equal(got, []uint32{10, 12}) {
		t.Errorf("at 44 s listed %v, want PIDs 10 and 12 (11 ended)", got)
	}
}

// A MIG GPU has no per-process samples: with GPM steady, its processes
// are listed every eighth read, not at every one.
func TestMIGProcessesListedEveryEighthRead(t *testing.T) {
	cfg := sim.Config{Profile: "dgx-h100", Processes: []sim.ProcessSpec{
		{GPU: 7, PID: 701, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, GPUInstance: new(1), ComputeInstance: new(0)},
	}}
	listed := listingReads(t, cfg, 7, 40*time.Second)
	if at, want := listTimes(listed), []int{2, 18, 34}; !slices.Equal(at, want) {
		t.Errorf("listed at %v s, want %v", at, want)
	}
	if got := listed[18]; !slices.Equal(got, []uint32{701}) {
		t.Errorf("at 18 s listed %v, want 701", got)
	}
}

// GPM says when a MIG instance turned busy with nobody listed in it (a
// process started there) or turned idle (its processes may have ended).
// The simulator's GPM does not follow processes' start and end, so the
// transitions are given here.
func TestMIGListingFollowsGPMTransitions(t *testing.T) {
	busy := func(pairs ...float64) []snapshot.MIGInstance {
		var out []snapshot.MIGInstance
		for i, v := range pairs {
			out = append(out, snapshot.MIGInstance{UUID: fmt.Sprint("MIG-", i), GPM: snapshot.GPM{SMActive: snapshot.Some(v)}})
		}
		return out
	}
	var l processListing
	steps := []struct {
		migs   []snapshot.MIGInstance
		listed []snapshot.Process // the list, when due
		due    bool
	}{
		{busy(0.5, 0), []snapshot.Process{{PID: 1, MIGUUID: "MIG-0"}}, true}, // the first read
		{busy(0.5, 0), nil, false},
		{busy(0.5, 0.3), []snapshot.Process{{PID: 1, MIGUUID: "MIG-0"}, {PID: 2, MIGUUID: "MIG-1"}}, true}, // MIG-1 turned busy, nobody listed
		{busy(0.5, 0.3), nil, false},
		{busy(0.5, 0), []snapshot.Process{{PID: 1, MIGUUID: "MIG-0"}}, true}, // MIG-1 turned idle
		{busy(0.5, 0), nil, false},
		{busy(0.5, 0.2), nil, true}, // MIG-1 turned busy again, nobody listed in it
	}
	for i, st := range steps {
		if due := l.due(false, 0, nil, true, st.migs, usedMemory{}); due != st.due {
			t.Fatalf("read %d: due %v, want %v", i, due, st.due)
		}
		if st.due {
			l.listed(st.listed, nil, usedMemory{})
		}
	}
	// An instance busy throughout with nobody listed asks once, not at
	// every read.
	var m processListing
	for i := range 7 {
		if due := m.due(false, 0, nil, true, busy(0.4), usedMemory{}); due != (i == 0) {
			t.Errorf("read %d: due %v, want a list at the first read only", i, due)
		}
		if i == 0 {
			m.listed(nil, nil, usedMemory{})
		}
	}
	// GPM absent (its first window): nothing says who is busy, so list.
	if !m.due(false, 0, nil, true, []snapshot.MIGInstance{{UUID: "MIG-0"}}, usedMemory{}) {
		t.Error("not due with GPM absent")
	}
}

// With ListProcessesSteadyEvery, a GPU's list every eighth read is made
// only when its used memory moved since its last list: an idle process
// that starts or ends (never sampled) moves it; a GPU whose processes
// stand still is listed with every GPU every 32nd read.
func TestSteadyListingFollowsUsedMemory(t *testing.T) {
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		{GPU: 0, PID: 10, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5},
		{GPU: 0, PID: 12, UsedMemoryBytes: 1 << 30},                                                                           // idle: never sampled
		{GPU: 0, PID: 13, UsedMemoryBytes: 2 << 30, Start: durationPtr(25 * time.Second), End: durationPtr(61 * time.Second)}, // idle
	}}
	listed := listingReadsEvery(t, cfg, 0, 80*time.Second, 32)
	// 2 s: the first read, every GPU; 26 s: the first read of the eighth
	// or later since it at which the memory moved (PID 13 started at
	// 25 s); 62 s: PID 13 ended at 61 s; 66 s: the 33rd read, every GPU.
	// Not at 18 s, 42 s or 58 s: the memory stood still.
	if at, want := listTimes(listed), []int{2, 26, 62, 66}; !slices.Equal(at, want) {
		t.Errorf("listed at %v s, want %v", at, want)
	}
	if got := listed[26]; !slices.Equal(got, []uint32{10, 12, 13}) {
		t.Errorf("at 26 s listed %v, want 10, 12 and the idle 13", got)
	}
	if got := listed[62]; !slices.Equal(got, []uint32{10, 12}) {
		t.Errorf("at 62 s listed %v, want 10 and 12 (13 ended)", got)
	}
	// Without it, the same GPU is listed every eighth read whatever its memory.
	if at, want := listTimes(listingReadsEvery(t, cfg, 0, 80*time.Second, 0)), []int{2, 18, 34, 50, 66}; !slices.Equal(at, want) {
		t.Errorf("without steady listing: listed at %v s, want %v", at, want)
	}
}

// On a MIG GPU the instances' used memory, read at every read, is what
// moves: a process that starts in an instance while the others run on is
// listed at the next periodic read, and a steady GPU only with every GPU.
func TestSteadyListingOnMIGFollowsInstanceMemory(t *testing.T) {
	cfg := sim.Config{Profile: "dgx-h100", Processes: []sim.ProcessSpec{
		{GPU: 7, PID: 701, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, GPUInstance: new(1), ComputeInstance: new(0)},
		{GPU: 7, PID: 702, UsedMemoryBytes: 1 << 30, GPUInstance: new(5), ComputeInstance: new(0), Start: durationPtr(30 * time.Second)},
	}}
	listed := listingReadsEvery(t, cfg, 7, 70*time.Second, 32)
	// 2 s: the first read; 30 s: 702 started (idle: GPM of its instance
	// stays 0) and moved instance 5's memory; 66 s: every GPU.
	if at, want := listTimes(listed), []int{2, 30, 66}; !slices.Equal(at, want) {
		t.Errorf("listed at %v s, want %v", at, want)
	}
}

// The memory read failing (known false) lists the GPU every eighth read,
// as without the comparison; a GPU whose memory stands still is not.
func TestSteadyListingWithoutMemoryListsByThePeriod(t *testing.T) {
	const every = 4
	steadyMB := usedMemory{bytes: 1 << 20, known: true}
	for _, tc := range []struct {
		name   string
		memory func(read int) usedMemory
		want   []int
	}{
		{"memory unknown", func(int) usedMemory { return usedMemory{} }, []int{0, 4, 8, 12}},
		{"memory steady", func(int) usedMemory { return steadyMB }, []int{0}},
		{"memory moves at read 6", func(read int) usedMemory {
			if read >= 6 {
				return usedMemory{bytes: 2 << 20, known: true}
			}
			return steadyMB
		}, []int{0, 6}},
		{"memory unreadable from read 9", func(read int) usedMemory {
			if read >= 9 {
				return usedMemory{}
			}
			return steadyMB
		}, []int{0, 9, 13}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l processListing
			samples := []nvml.ProcessUtilizationSample{{Pid: 1, TimeStamp: 1, SmUtil: 10}}
			var at []int
			for read := range 15 {
				samples[0].TimeStamp = uint64(read + 1)
				m := tc.memory(read)
				if l.due(false, every, samples, true, nil, m) {
					at = append(at, read)
					l.listed([]snapshot.Process{{PID: 1}}, samples, m)
				}
			}
			if !slices.Equal(at, tc.want) {
				t.Errorf("listed at reads %v, want %v", at, tc.want)
			}
		})
	}
}

// noteSamples counts a read's PIDs once however many samples each has (a
// driver that gives every buffered sample): a change is a new PID or one
// of the previous read's missing now, and a PID the list did not hold
// (it ended before the list) is expected only if sampled again.
func TestNoteSamplesCountsPIDsNotSamples(t *testing.T) {
	samples := func(pids ...uint32) []nvml.ProcessUtilizationSample {
		var out []nvml.ProcessUtilizationSample
		for _, pid := range pids {
			out = append(out, nvml.ProcessUtilizationSample{Pid: pid})
		}
		return out
	}
	var l processListing
	l.listed([]snapshot.Process{{PID: 1}, {PID: 2}}, samples(1, 1, 2, 2, 3), usedMemory{})
	for i, c := range []struct {
		pids []uint32
		want bool
	}{
		{[]uint32{1, 1, 2, 2}, false},    // 3 ended before the list: not expected
		{[]uint32{2, 1, 1, 2, 3}, false}, // sampled again: known, so no change
		{[]uint32{1, 1, 1, 2}, true},     // and now gone
		{[]uint32{1, 2, 2}, false},
		{[]uint32{1, 1}, true},        // 2 gone
		{[]uint32{1}, false},          //
		{[]uint32{1, 4, 4}, true},     // 4 new
		{[]uint32{4, 1, 4, 1}, false}, // another order
		{nil, true},                   // nobody sampled
		{nil, false},
	} {
		l.reads++
		if got := l.noteSamples(samples(c.pids...)); got != c.want {
			t.Errorf("read %d (PIDs %v): changed %v, want %v", i+1, c.pids, got, c.want)
		}
	}
}
