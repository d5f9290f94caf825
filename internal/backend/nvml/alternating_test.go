package nvmlbackend

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The accounting's reader reuses its buffers: a snapshot's samples and
// processes must stand until the read after the next one (the accounting
// integrates a snapshot while nothing else reads), and each read must
// hand only its own samples, an empty slice (not nil) when the driver had
// none.
func TestAccountingReadersBuffersStandUntilTheReadAfterNext(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "h100", Processes: []sim.ProcessSpec{
		// None sampled at the first read, nor after 7 s.
		{GPU: 0, PID: 100, SMUtilization: 0.5, Start: new(sim.Duration(3 * time.Second)), End: new(sim.Duration(7 * time.Second))},
		{GPU: 0, PID: 200, SMUtilization: 0.2, Start: new(sim.Duration(3 * time.Second)), End: new(sim.Duration(5 * time.Second))},
		{GPU: 0, PID: 300}, // idle: listed, never sampled
	}}, 0)
	r := newReaderWith(t, s, Options{Groups: map[string]bool{snapshot.GroupProcesses: true}, Now: s.Now, ProcessSamples: true})
	var snaps []*snapshot.Snapshot
	var copies [][]snapshot.ProcessSample
	var procCopies [][]snapshot.Process
	for e := 2 * time.Second; e <= 10*time.Second; e += 2 * time.Second {
		s.SetElapsed(e)
		snap, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := snap.Devices[0].ProcessSamples
		if got == nil {
			t.Fatalf("at %s: samples nil, want a measure", e)
		}
		for _, smp := range got {
			at := time.UnixMicro(int64(smp.TimeMicros))
			if at.After(snap.Time) || (len(snaps) > 0 && !at.After(snaps[len(snaps)-1].Time)) {
				t.Errorf("at %s: a sample %s before the read, not of this read", e, snap.Time.Sub(at))
			}
		}
		if n := len(snaps); n > 0 && !slices.Equal(snaps[n-1].Devices[0].ProcessSamples, copies[n-1]) {
			t.Errorf("at %s: the previous snapshot's samples changed", e)
		}
		if n := len(snaps); n > 0 && !reflect.DeepEqual(snaps[n-1].Processes, procCopies[n-1]) {
			t.Errorf("at %s: the previous snapshot's processes changed", e)
		}
		if !slices.ContainsFunc(snap.Processes, func(p snapshot.Process) bool { return p.PID == 300 }) {
			t.Errorf("at %s: PID 300 not listed", e)
		}
		snaps = append(snaps, snap)
		copies = append(copies, slices.Clone(got))
		procCopies = append(procCopies, slices.Clone(snap.Processes))
	}
	if len(snaps[0].Devices[0].ProcessSamples) != 0 || len(snaps[2].Devices[0].ProcessSamples) == 0 || len(snaps[4].Devices[0].ProcessSamples) != 0 {
		t.Fatal("want no samples at 2 s and 10 s, some at 6 s: the test shows nothing")
	}
}
