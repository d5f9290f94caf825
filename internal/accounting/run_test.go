package accounting

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// fakeSource hands out snapshots one simulated second apart; every third
// collection fails.
type fakeSource struct{ n atomic.Int64 }

func (f *fakeSource) Snapshot(ctx context.Context) (*snapshot.Snapshot, error) {
	n := f.n.Add(1)
	if n%3 == 0 {
		return nil, errors.New("collection failed")
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	return &snapshot.Snapshot{
		Time:      now,
		Devices:   []snapshot.Device{{Index: 0, UUID: "GPU-1", Up: true, Power: snapshot.Power{Energy: snapshot.Some(float64(n) * 100)}, ProcessSamples: []snapshot.ProcessSample{}}},
		Processes: []snapshot.Process{{GPU: 0, GPUUUID: "GPU-1", PID: 7, Owner: snapshot.Owner{User: "a"}}},
	}, nil
}

// Run ticks on its own goroutine while outputs read the totals through
// Enrich; a failed collection is reported and skipped, and the next
// success integrates the whole interval (the energy is not lost).
func TestRunBesideEnrich(t *testing.T) {
	a, err := New(Options{NewOwnerHold: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var errs atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx, &fakeSource{}, time.Millisecond, func(error) { errs.Add(1) }) })
	wg.Go(func() {
		for ctx.Err() == nil {
			s := &snapshot.Snapshot{}
			a.Enrich(ctx, s)
			if s.Accounting == nil {
				t.Error("Enrich handed no totals")
				return
			}
		}
	})
	testenv.WaitFor(t, 30*time.Second, "ten seconds of totals", func() bool {
		tot := a.Totals()
		return len(tot.Owners) == 1 && tot.Owners[0].Seconds >= 10
	})
	cancel()
	wg.Wait()
	if errs.Load() == 0 {
		t.Error("no failed collection reported")
	}
	tot := a.Totals()
	o := tot.Owners[0]
	// The first snapshot (t=1s, 100 J) only starts; all energy since is a's.
	last := tot.Time.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Seconds()
	if !within(o.EnergyJoules.Value, (last-1)*100, 1e-9) || !within(o.Seconds, last-1, 1e-9) {
		t.Errorf("energy %v J over %v s held, want %v J over %v s", o.EnergyJoules.Value, o.Seconds, (last-1)*100, last-1)
	}
}
