//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/validate"
)

// A driver that answers its "unavailable" sentinels or
// impossible values. Every one is dropped (absent, not exported as read),
// counted by field, and the healthy GPU beside it keeps its readings.
func TestSimBogusValuesAreDroppedAndCounted(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 1, BogusValues: sim.BogusValueNames()}}}, time.Hour)
	r := newSimReaderPastGPM(t, s, AllGroups())
	snap := read(t, r)
	d := snap.Devices[1]
	if !d.Up {
		t.Fatalf("GPU 1 down (%s): bogus values are not a lost GPU", d.DownReason)
	}
	absent := map[string]bool{
		"temperature":       d.Temperature.GPU.Valid,
		"power":             d.Power.Usage.Valid,
		"gpu utilization":   d.Utilization.GPU.Valid,
		"mem utilization":   d.Utilization.Memory.Valid,
		"memory used":       d.Memory.Used.Valid,
		"memory free":       d.Memory.Free.Valid,
		"performance state": d.PState.Valid,
	}
	for what, present := range absent {
		if present {
			t.Errorf("GPU 1 %s is exported though the driver answered a sentinel or an impossible value", what)
		}
	}
	for _, c := range d.Clocks {
		if c.Current.Valid {
			t.Errorf("GPU 1 %s clock current = %v Hz, want dropped", c.Type, c.Current.Value)
		}
		if !c.Max.Valid {
			t.Errorf("GPU 1 %s clock max dropped though it was plausible", c.Type)
		}
	}
	if !d.Memory.Total.Valid {
		t.Error("GPU 1 memory total dropped though it was plausible")
	}
	for _, p := range snap.Processes {
		if p.GPU == 1 && p.UsedMemory.Valid {
			t.Errorf("GPU 1 process %d used memory %d exported, want dropped", p.PID, p.UsedMemory.Value)
		}
	}
	healthy := snap.Devices[0]
	if !healthy.Temperature.GPU.Valid || !healthy.Power.Usage.Valid || !healthy.Memory.Used.Valid || !healthy.PState.Valid {
		t.Errorf("the healthy GPU 0 lost readings: %+v", healthy)
	}
	for _, field := range []string{validate.FieldTemperature, validate.FieldPower, validate.FieldUtilization,
		validate.FieldMemory, validate.FieldClock, validate.FieldPState, validate.FieldProcessMemory} {
		if snap.ReadingsDropped[field] == 0 {
			t.Errorf("ReadingsDropped[%s] = 0, want counted (%v)", field, snap.ReadingsDropped)
		}
	}
	before := snap.ReadingsDropped[validate.FieldTemperature]
	if after := read(t, r).ReadingsDropped[validate.FieldTemperature]; after <= before {
		t.Errorf("dropped temperature count %d then %d: a counter of every dropped reading", before, after)
	}
}

// The driver's energy counter starts again at a driver reload: the
// exported counter carries what was counted and never goes down.
func TestSimEnergyCounterResetIsCarried(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, EnergyResetAt: durationPtr(2 * time.Hour)}}}, time.Hour)
	r := newSimReader(t, s, map[string]bool{snapshot.GroupPower: true})
	energy := func() float64 {
		t.Helper()
		v, ok := read(t, r).Devices[0].Power.Energy.Get()
		if !ok {
			t.Fatal("no energy reading")
		}
		return v
	}
	last := energy()
	for _, at := range []time.Duration{2*time.Hour - time.Minute, 2*time.Hour + time.Second, 2*time.Hour + time.Minute, 3 * time.Hour} {
		s.SetElapsed(at)
		v := energy()
		if v < last {
			t.Fatalf("at %v the energy counter went down: %v J after %v J", at, v, last)
		}
		last = v
	}
	// Past the reset it still grows by what the GPU drew: 700 W at most for an hour.
	s.SetElapsed(4 * time.Hour)
	if grew := energy() - last; grew <= 0 || grew > 700*3600 {
		t.Errorf("an hour after the reset the counter grew by %v J", grew)
	}
}
