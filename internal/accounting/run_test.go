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

// hangingSource hands out snapshots one simulated second apart, from one
// owner; the collections numbered in hang block, as a call into a hung
// driver does (deaf to ctx), until release is closed, and then return a
// snapshot of owner "left-behind", an hour later.
type hangingSource struct {
	hang     map[int64]bool // nil: every collection hangs
	release  chan struct{}
	n        atomic.Int64
	inFlight atomic.Int64
}

func (h *hangingSource) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	n := h.n.Add(1)
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	user, at := "a", time.Duration(n)*time.Second
	if h.hang == nil || h.hang[n] {
		<-h.release
		user, at = "left-behind", time.Hour
	}
	return &snapshot.Snapshot{
		Time:      time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(at),
		Devices:   []snapshot.Device{{Index: 0, UUID: "GPU-1", Up: true, ProcessSamples: []snapshot.ProcessSample{}}},
		Processes: []snapshot.Process{{GPU: 0, GPUUUID: "GPU-1", PID: 7, Owner: snapshot.Owner{User: user}}},
	}, nil
}

// startRun runs a over src, ticking every millisecond, until cancel; done
// is closed when Run returns.
func startRun(a *Accountant, src Source) (cancel context.CancelFunc, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		a.Run(ctx, src, time.Millisecond, nil)
	}()
	return cancel, ended
}

func runAccountant(t *testing.T, tickTimeout time.Duration) *Accountant {
	t.Helper()
	a, err := New(Options{NewOwnerHold: time.Nanosecond, TickTimeout: tickTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A tick that hangs in its collection is left behind after TickTimeout:
// the ticks go on from another goroutine, and the snapshot the hung tick
// returns at last is dropped, not integrated.
func TestRunLeavesAHungTickBehind(t *testing.T) {
	a := runAccountant(t, 50*time.Millisecond)
	src := &hangingSource{hang: map[int64]bool{3: true}, release: make(chan struct{})}
	cancel, done := startRun(a, src)
	testenv.WaitFor(t, 30*time.Second, "ticks after the hung one", func() bool { return src.n.Load() >= 10 })
	close(src.release)
	testenv.WaitFor(t, 30*time.Second, "the hung tick's return", func() bool { return src.inFlight.Load() == 0 && src.n.Load() >= 12 })
	cancel()
	<-done
	for _, o := range a.Totals().Owners {
		if o.Key.User != "a" {
			t.Errorf("owner %q integrated: the tick left behind was not dropped", o.Key.User)
		}
	}
	if len(a.Totals().Owners) != 1 {
		t.Errorf("owners = %+v, want a alone", a.Totals().Owners)
	}
}

// Run ends soon after its context does even while a tick hangs, and
// however many ticks hang at once, no more than maxLeftBehind are left
// behind (a driver that hangs every call does not pile up goroutines).
func TestRunEndsWhileEveryTickHangs(t *testing.T) {
	const tickTimeout = 20 * time.Millisecond
	a := runAccountant(t, tickTimeout)
	src := &hangingSource{release: make(chan struct{})}
	defer close(src.release)
	cancel, done := startRun(a, src)
	testenv.WaitFor(t, 30*time.Second, "every tick left behind that may be", func() bool { return src.inFlight.Load() == maxLeftBehind+1 })
	// Ten more timeouts: none more is started.
	time.Sleep(10 * tickTimeout)
	if n := src.inFlight.Load(); n != maxLeftBehind+1 {
		t.Fatalf("%d collections in flight, want at most %d left behind and the current one", n, maxLeftBehind)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end while its tick hung")
	}
}

// Run ends within stopGrace of its context even when its tick hangs and
// TickTimeout is far off; the tick, when its collection returns at last,
// integrates nothing.
func TestRunEndsSoonWhileATickHangs(t *testing.T) {
	a := runAccountant(t, time.Hour)
	src := &hangingSource{hang: map[int64]bool{3: true}, release: make(chan struct{})}
	cancel, done := startRun(a, src)
	testenv.WaitFor(t, 30*time.Second, "the third tick hanging", func() bool { return src.inFlight.Load() == 1 && src.n.Load() == 3 })
	before := a.Totals()
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(stopGrace + 10*time.Second):
		t.Fatal("Run did not end while its tick hung")
	}
	if took := time.Since(start); took < stopGrace {
		t.Errorf("Run ended %v after its context, before the tick's grace", took)
	}
	close(src.release)
	testenv.WaitFor(t, 30*time.Second, "the hung tick's return", func() bool { return src.inFlight.Load() == 0 })
	time.Sleep(50 * time.Millisecond) // what the tick would integrate after its return
	if after := a.Totals(); !after.Time.Equal(before.Time) || len(after.Owners) != len(before.Owners) {
		t.Errorf("the tick left behind at the end integrated its snapshot: totals at %v with %d owners, were at %v with %d", after.Time, len(after.Owners), before.Time, len(before.Owners))
	}
}

// within reports whether got is within the fraction rel of want.
func within(got, want, rel float64) bool {
	if want == 0 {
		return got == 0
	}
	d := (got - want) / want
	return d <= rel && d >= -rel
}
