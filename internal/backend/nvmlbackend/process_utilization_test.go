//go:build cgo

package nvmlbackend

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// sizedCalls wraps a simulated GPU's sized process utilization call and
// notes each call's capacity, buffer and lastSeenTimeStamp; ask, when
// set, answers instead of the simulator (a driver in trouble).
type sizedCalls struct {
	nvml.Device
	mu         *sync.Mutex
	capacities *[]int
	buffers    *[]*nvml.ProcessUtilizationSample
	since      *[]uint64
	ask        func(capacity int) uint32
}

func (d sizedCalls) ProcessUtilizationSized(buf []nvml.ProcessUtilizationSample, lastSeen uint64) (uint32, nvml.Return) {
	d.mu.Lock()
	*d.capacities = append(*d.capacities, len(buf))
	*d.since = append(*d.since, lastSeen)
	if len(buf) > 0 {
		*d.buffers = append(*d.buffers, &buf[0])
	}
	d.mu.Unlock()
	if d.ask != nil {
		return d.ask(len(buf)), nvml.ERROR_INSUFFICIENT_SIZE
	}
	return d.Device.(sizedUtilizationSampler).ProcessUtilizationSized(buf, lastSeen)
}

func (d *sizedCalls) take() (capacities []int, buffers []*nvml.ProcessUtilizationSample) {
	d.mu.Lock()
	defer d.mu.Unlock()
	capacities, buffers = *d.capacities, *d.buffers
	*d.capacities, *d.buffers = nil, nil
	return capacities, buffers
}

func newSizedCalls() *sizedCalls {
	return &sizedCalls{mu: &sync.Mutex{}, capacities: &[]int{}, buffers: &[]*nvml.ProcessUtilizationSample{}, since: &[]uint64{}}
}

// takeSince returns the lastSeenTimeStamps asked with since the last take.
func (d *sizedCalls) takeSince() []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	since := *d.since
	*d.since = nil
	return since
}

// busyProcesses is a GPU with n processes, each busy all the time.
func busyProcesses(n int) sim.Config {
	cfg := sim.Config{Profile: "h100"}
	for i := range n {
		cfg.Processes = append(cfg.Processes, sim.ProcessSpec{PID: uint32(5000 + i), UsedMemoryBytes: 1 << 28, SMUtilization: 0.25})
	}
	return cfg
}

// The samples are read into a buffer the GPU keeps: one call of the
// driver a read, into the same memory, sized by the read before; the
// first read grows it to what the driver asks for. The samples are the
// driver's, one per process.
func TestProcessUtilizationIsReadIntoTheKeptBuffer(t *testing.T) {
	const processes = 100
	s := newSim(t, busyProcesses(processes), time.Hour)
	calls := newSizedCalls()
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device { c := *calls; c.Device = d; return c }}
	r := newModeReader(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now}, readMode{processSamples: true})

	var kept *nvml.ProcessUtilizationSample
	for i := range 4 {
		s.SetElapsed(time.Hour + time.Duration(i)*2*time.Second)
		snap := read(t, r)
		noGroupErrors(t, snap)
		samples := snap.Devices[0].ProcessSamples
		if len(samples) != processes {
			t.Fatalf("read %d: %d samples, want one per process (%d)", i, len(samples), processes)
		}
		for _, smp := range samples {
			if smp.SM != 0.25 {
				t.Fatalf("read %d: sample %+v, want SM 0.25", i, smp)
			}
		}
		capacities, buffers := calls.take()
		if i == 0 {
			// The first buffer fits the floor (64), the driver asks for
			// 100, the second fits them with room to spare.
			if len(capacities) != 2 || capacities[0] != int(processUtilizationBounds.floor) || capacities[1] < processes {
				t.Fatalf("first read: capacities %v, want [%d, at least %d]", capacities, processUtilizationBounds.floor, processes)
			}
			kept = buffers[1]
			continue
		}
		if len(capacities) != 1 || capacities[0] < processes {
			t.Fatalf("read %d: capacities %v, want one call with room for %d", i, capacities, processes)
		}
		if buffers[0] != kept {
			t.Errorf("read %d: samples read into new memory, want the buffer kept from the read before", i)
		}
	}
}

// A driver that asks for more at every call (twice the buffer offered)
// gets a bounded number of calls and a bounded buffer: the GPU's
// processes are a group error, the other GPUs are read.
func TestProcessUtilizationExchangeIsBounded(t *testing.T) {
	cfg := busyProcesses(3)
	cfg.Profile = "dgx-h100"
	s := newSim(t, cfg, time.Hour)
	calls := newSizedCalls()
	calls.ask = func(capacity int) uint32 { return uint32(2 * max(capacity, 1)) }
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device {
		if idx, _ := d.GetIndex(); idx != 0 {
			return d
		}
		c := *calls
		c.Device = d
		return c
	}}
	r := newModeReader(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now}, readMode{processSamples: true})
	snap := read(t, r)
	capacities, _ := calls.take()
	if len(capacities) != processUtilizationBounds.tries {
		t.Errorf("calls %v, want %d", capacities, processUtilizationBounds.tries)
	}
	for _, c := range capacities {
		if c > int(processUtilizationBounds.limit) {
			t.Errorf("a buffer of %d samples offered, over the limit %d", c, processUtilizationBounds.limit)
		}
	}
	if st := snap.Groups[snapshot.GroupProcesses]; st.Err == nil || !strings.Contains(st.Err.Error(), "gpu 0: GetProcessUtilization") {
		t.Errorf("processes group error %v, want gpu 0's samples that never fit", st.Err)
	}
	if snap.Devices[0].ProcessSamples != nil {
		t.Errorf("gpu 0: samples %v, want none (unknown)", snap.Devices[0].ProcessSamples)
	}
	for _, d := range snap.Devices[1:] {
		if !d.Up {
			t.Errorf("gpu %d down (%s): one GPU's samples must not take the others", d.Index, d.DownReason)
		}
	}
}

// A process that starts on a GPU whose reads found nobody busy: the
// accounting's reader had seen no sample to ask from, so the driver's one
// sample would be its mean over all it keeps (the simulator's buffer, of
// which the process was busy for the last second). The reader asks again from one read's gap (2 s) before the newest
// sample, reports that time, and gets the mean over the gap (busy half of
// it); the next read asks once, from the newest sample seen.
func TestSamplesAskedAgainFromTheLastAnswer(t *testing.T) {
	start := sim.Duration(time.Hour + 31*time.Second)
	cfg := sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{{PID: 5000, UsedMemoryBytes: 1 << 28, SMUtilization: 0.5, Start: &start}}}
	s := newSim(t, cfg, time.Hour)
	calls := newSizedCalls()
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device { c := *calls; c.Device = d; return c }}
	r := newModeReader(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now}, readMode{processSamples: true})
	at := func(e time.Duration) (*snapshot.Device, []uint64) {
		t.Helper()
		s.SetElapsed(e)
		calls.takeSince()
		snap := read(t, r)
		noGroupErrors(t, snap)
		return &snap.Devices[0], calls.takeSince()
	}
	for e := time.Hour; e <= time.Hour+30*time.Second; e += 2 * time.Second {
		if d, since := at(e); len(d.ProcessSamples) != 0 || !slices.Equal(since, []uint64{0}) {
			t.Fatalf("at %v, idle: samples %+v, asked from %v", e, d.ProcessSamples, since)
		}
	}
	d, since := at(time.Hour + 32*time.Second)
	if len(d.ProcessSamples) != 1 || len(since) != 2 || since[0] != 0 {
		t.Fatalf("first busy read: samples %+v, asked from %v; want one sample, asked from 0 then again", d.ProcessSamples, since)
	}
	newest := d.ProcessSamples[0].TimeMicros
	if want := newest - 2e6; since[1] != want || d.ProcessSamplesSince != want {
		t.Errorf("asked again from %d, ProcessSamplesSince %d; want one gap before the newest sample, %d", since[1], d.ProcessSamplesSince, want)
	}
	if got := d.ProcessSamples[0].SM; got != 0.25 {
		t.Errorf("sample %+v; want the mean over the gap, 0.25", d.ProcessSamples[0])
	}
	d, since = at(time.Hour + 34*time.Second)
	if !slices.Equal(since, []uint64{newest}) || d.ProcessSamplesSince != newest {
		t.Errorf("next read asked from %v (ProcessSamplesSince %d); want once, from the newest sample seen, %d", since, d.ProcessSamplesSince, newest)
	}
}
