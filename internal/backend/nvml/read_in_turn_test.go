package nvmlbackend

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// hangingTemperature makes a fake device's temperature call block until
// release is closed, counting the calls.
func hangingTemperature(release <-chan struct{}, calls *atomic.Int32) func(*mock.Device) {
	return func(d *mock.Device) {
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			calls.Add(1)
			<-release
			return 50, nvml.SUCCESS
		}
	}
}

func inTurnReader(t *testing.T, h *fakeHost) *Reader {
	t.Helper()
	groups := AllGroups()
	delete(groups, snapshot.GroupXID) // its watcher takes half a second to stop
	return newReaderWith(t, h, Options{Groups: groups, Now: steppingClock(), ReadInTurn: true})
}

func upByIndex(t *testing.T, snap *snapshot.Snapshot) []bool {
	t.Helper()
	var up []bool
	for i, d := range snap.Devices {
		if d.Index != i {
			t.Fatalf("device at %d has index %d", i, d.Index)
		}
		up = append(up, d.Up)
	}
	return up
}

// Read in turn, the GPUs are read one at a time (never two reads at
// once), and the snapshot is the one a parallel read makes: the same
// devices, in order, with the same readings.
func TestReadInTurnReadsEveryGPU(t *testing.T) {
	h := newFakeHost()
	var inFlight, most atomic.Int32
	var armed atomic.Bool // the reads, not New's start-up calls
	overlap := func(d *mock.Device) {
		answer := d.GetTemperatureFunc
		d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if armed.Load() {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond) // long enough for parallel reads to overlap
			}
			return answer(s)
		}
	}
	for i := range 4 {
		h.devices = append(h.devices, newFakeH100(h, i, overlap))
	}
	inTurn := inTurnReader(t, h)
	armed.Store(true)
	read(t, inTurn)
	if m := most.Load(); m != 1 {
		t.Fatalf("%d GPUs were read at once, want one at a time", m)
	}
	armed.Store(false)
	groups := AllGroups()
	delete(groups, snapshot.GroupXID)
	parallel := newReaderWith(t, h, Options{Groups: groups, Now: steppingClock()})
	for range 3 {
		a, b := read(t, inTurn), read(t, parallel)
		noGroupErrors(t, a)
		if !slices.Equal(upByIndex(t, a), []bool{true, true, true, true}) {
			t.Fatalf("in turn: up = %v", upByIndex(t, a))
		}
		for i := range a.Devices {
			da, db := a.Devices[i], b.Devices[i]
			if da.UUID != db.UUID || da.Temperature != db.Temperature || da.Memory != db.Memory {
				t.Errorf("GPU %d in turn: uuid %s temperature %+v memory %+v; in parallel: %s %+v %+v",
					i, da.UUID, da.Temperature, da.Memory, db.UUID, db.Temperature, db.Memory)
			}
		}
	}
}

// A GPU that hangs while the turn reads it holds up neither the GPUs after
// it (read in parallel once it has taken its share of the deadline) nor
// the Reads after (the turn goroutine is stuck: they read in parallel,
// and report the hung GPU down at once). It is called once, and comes back
// when its call returns.
func TestReadInTurnHungGPUDoesNotHoldUpTheRest(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var calls atomic.Int32
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hangingTemperature(release, &calls)), newFakeH100(h, 2), newFakeH100(h, 3)}
	r := inTurnReader(t, h)
	// Before the first Read: the turn goroutine is not started yet.
	baseline := runtime.NumGoroutine()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	readWithin := func(deadline time.Duration) ([]bool, time.Duration) {
		start := time.Now()
		snap := readBy(t, r, deadline)
		if d := snap.Devices[1]; !d.Up && (d.DownReason != "not_answering" || d.UUID == "") {
			t.Errorf("hung GPU: reason %q uuid %q", d.DownReason, d.UUID)
		}
		return upByIndex(t, snap), time.Since(start)
	}
	// Generous: the healthy GPUs answer in microseconds, however busy the
	// machine; the hung one's share of it is an eighth.
	up, took := readWithin(4 * time.Second)
	if !slices.Equal(up, []bool{true, false, true, true}) {
		t.Fatalf("first read: up = %v, want only GPU 1 down", up)
	}
	if took > 6*time.Second {
		t.Errorf("first read took %v with a 4s deadline", took)
	}
	up, took = readWithin(4 * time.Second)
	if !slices.Equal(up, []bool{true, false, true, true}) || took > 3*time.Second {
		t.Fatalf("second read: up = %v after %v, want only GPU 1 down, at once", up, took)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the hung GPU was called %d times, want 1", n)
	}
	close(release)
	released = true
	testenv.Eventually(t, 5*time.Second, func() error {
		if up, _ := readWithin(4 * time.Second); !slices.Equal(up, []bool{true, true, true, true}) {
			return errors.New("GPU 1 is still down after its call returned")
		}
		return nil
	})
	// The reads made in parallel meanwhile left no goroutine behind, but
	// the turn goroutine (a worker per device kept for good did: test/faults'
	// leak check).
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > baseline+1 {
			return fmt.Errorf("%d goroutines after the GPU came back, %d before the first read", n, baseline)
		}
		return nil
	})
}

// The GPUs after a hung one are read once it has taken its share of the
// deadline, not at the deadline: the last GPU's read releases the hung
// one, so the Read ends long before its deadline only if the rest were
// handed back in time.
func TestReadInTurnHandsTheRestBackFromAHungGPU(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var calls atomic.Int32
	lastRead := make(chan struct{}, 1)
	var armed atomic.Bool // from the Read on, not during New
	signalLast := func(d *mock.Device) {
		answer := d.GetTemperatureFunc
		d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if armed.Load() {
				select {
				case lastRead <- struct{}{}:
				default:
				}
			}
			return answer(s)
		}
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hangingTemperature(release, &calls)), newFakeH100(h, 2), newFakeH100(h, 3, signalLast)}
	r := inTurnReader(t, h)
	armed.Store(true)
	go func() {
		<-lastRead
		close(release)
	}()
	// GPU 1's share: 8 s / (2 × 4 GPUs) = 1 s.
	const deadline = 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	snap, err := r.Read(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if up := upByIndex(t, snap); !slices.Equal(up, []bool{true, true, true, true}) {
		t.Errorf("up = %v, want every GPU (GPU 1 answered once released)", up)
	}
	if took > deadline/2 {
		t.Errorf("the Read took %v: the GPUs after the hung one waited for the %v deadline", took, deadline)
	}
}

// At the deadline, every GPU the turn has not read is reported as itself
// (its index and UUID, not answering), not as a blank device, whether the
// turn was inside a call or had not reached it.
func TestReadInTurnDeadlineWithEveryGPUHung(t *testing.T) {
	const devices = 4
	for attempt := range 10 {
		h := newFakeHost()
		release := make(chan struct{})
		var calls atomic.Int32
		for i := range devices {
			h.devices = append(h.devices, newFakeH100(h, i, hangingTemperature(release, &calls)))
		}
		r := inTurnReader(t, h)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		snap, err := r.Read(ctx)
		cancel()
		close(release)
		if errors.Is(err, context.DeadlineExceeded) {
			continue // the deadline passed before the reads began: not the case under test
		}
		if err != nil {
			t.Fatalf("attempt %d: Read: %v", attempt, err)
		}
		for i, d := range snap.Devices {
			if d.Index != i || d.Up || d.DownReason != "not_answering" {
				t.Fatalf("attempt %d: device %d = {Index %d, Up %v, DownReason %q}, want itself, not answering",
					attempt, i, d.Index, d.Up, d.DownReason)
			}
		}
	}
}

// A Read whose caller gave up is an error, in turn as in parallel.
func TestReadInTurnCancelled(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	r := inTurnReader(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); err == nil {
		t.Fatal("Read with a cancelled context returned no error")
	}
}

// Reads in turn from several goroutines at once (the turn goroutine busy:
// the others read in parallel) all get every GPU (run with -race).
func TestReadInTurnConcurrentReads(t *testing.T) {
	h := newFakeHost()
	for i := range 3 {
		h.devices = append(h.devices, newFakeH100(h, i))
	}
	r := inTurnReader(t, h)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 20 {
				snap, err := r.Read(context.Background())
				if err == nil && !slices.Equal(upByIndex(t, snap), []bool{true, true, true}) {
					err = errors.New("a GPU is down")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
