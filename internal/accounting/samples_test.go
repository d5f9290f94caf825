//go:build cgo

package accounting

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// nvml.h describes GetProcessUtilization as one sample per process, the
// most recent: a driver that keeps no buffer. Each sample then stands for
// the whole interval (the gap between one process's samples), not for a
// buffered driver's 1/6 s.
func TestOneSamplePerProcessPerRead(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval = 5 * time.Second
	for i := range 25 {
		now := start.Add(time.Duration(i) * interval)
		s := &snapshot.Snapshot{
			Time: now,
			Devices: []snapshot.Device{{
				Index: 0, UUID: "GPU-1", Up: true,
				// Each process's latest sample, taken a little before the read, at
				// times of their own.
				ProcessSamples: []snapshot.ProcessSample{
					{PID: 1, TimeMicros: uint64(now.Add(-300 * time.Millisecond).UnixMicro()), SM: 0.5},
					{PID: 2, TimeMicros: uint64(now.Add(-100 * time.Millisecond).UnixMicro()), SM: 0.2},
				},
			}},
			Processes: []snapshot.Process{
				{GPU: 0, GPUUUID: "GPU-1", PID: 1, Owner: snapshot.Owner{User: "a"}},
				{GPU: 0, GPUUUID: "GPU-1", PID: 2, Owner: snapshot.Owner{User: "b"}},
			},
		}
		a.Observe(s)
	}
	for _, o := range a.Totals().Owners {
		want := map[string]float64{"a": 0.5, "b": 0.2}[o.Key.User] * 24 * interval.Seconds()
		if !o.SMSeconds.Valid || !within(o.SMSeconds.Value, want, 0.01) {
			t.Errorf("%s: SM-seconds %+v, want %.1f", o.Key.User, o.SMSeconds, want)
		}
	}
}

// Ticks that do not fall on the driver's 1/6 s periods read 11 periods
// one time and 12 the next: a per-process sample (its mean since the
// last read) must stand for the time since that read, not for a gap
// learnt once.
func TestTicksOffTheDriverPeriods(t *testing.T) {
	for _, samples := range []string{sim.ProcessSamplesPerProcess, sim.ProcessSamplesEveryPeriod} {
		t.Run(samples, func(t *testing.T) {
			cfg := sim.Config{Profile: "h100", ProcessSamples: samples, Processes: []sim.ProcessSpec{
				{GPU: 0, PID: 100, UsedMemoryBytes: 1 << 30, SMUtilization: 0.5, Start: dur(3 * time.Second), End: dur(63 * time.Second)},
			}}
			r := newRig(t, cfg, map[uint32]snapshot.Owner{100: {User: "alice"}}, Options{})
			r.run(1900*time.Millisecond, 80*time.Second)
			near(t, "SM-seconds", r.ownerTotal(byUser("alice")).SMSeconds, 60*0.5, 0.01)
		})
	}
}

// A GPU whose read misses the deadline is served again from its last
// completed reading, samples included, at each tick until a read returns
// (nvmlbackend's late readings): those samples were integrated once and
// must not be again, and the next read's samples cover the gap.
func TestLateReadingsSamplesCountOnce(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval = 2 * time.Second
	for _, perRead := range []int{1, 12} { // one sample per process per read; every buffered 1/6 s sample
		a, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		var served []snapshot.ProcessSample
		for i := range 30 {
			now := start.Add(time.Duration(i) * interval)
			late := i%5 == 3 || i%5 == 4 // two ticks in five serve the reading before
			if !late {
				served = nil
				for k := range perRead {
					at := now.Add(-time.Duration(k) * interval / time.Duration(perRead))
					served = append(served, snapshot.ProcessSample{PID: 1, TimeMicros: uint64(at.UnixMicro()), SM: 0.5})
				}
			}
			a.Observe(&snapshot.Snapshot{
				Time: now,
				Devices: []snapshot.Device{{
					Index: 0, UUID: "GPU-1", Up: true, ProcessSamples: served,
				}},
				Processes: []snapshot.Process{{GPU: 0, GPUUUID: "GPU-1", PID: 1, Owner: snapshot.Owner{User: "a"}}},
			})
		}
		o := a.Totals().Owners[0]
		// From the first tick (which has no interval before it) to the
		// last fresh read, at tick 27 (28 and 29 serve it again).
		want := 0.5 * 27 * interval.Seconds()
		if !o.SMSeconds.Valid || !within(o.SMSeconds.Value, want, 0.01) {
			t.Errorf("%d samples per read: SM-seconds %+v, want %.1f", perRead, o.SMSeconds, want)
		}
	}
}
