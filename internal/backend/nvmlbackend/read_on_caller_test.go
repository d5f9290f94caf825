//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

func onCallerReader(t *testing.T, h *fakeHost) *Reader {
	t.Helper()
	groups := AllGroups()
	delete(groups, snapshot.GroupXID) // its watcher takes half a second to stop
	return newModeReader(t, h, Options{Groups: groups, Now: steppingClock()}, readMode{onCaller: true})
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

// Read on the caller, the GPUs are read one at a time (never two reads at
// once), on no worker, and the snapshot is the one a parallel read makes:
// the same devices, in order, with the same readings.
func TestReadOnCallerReadsEveryGPU(t *testing.T) {
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
	onCaller := onCallerReader(t, h)
	armed.Store(true)
	read(t, onCaller)
	if m := most.Load(); m != 1 {
		t.Fatalf("%d GPUs were read at once, want one at a time", m)
	}
	if n := len(onCaller.workers.jobs); n != 0 {
		t.Fatalf("%d device workers started, want none", n)
	}
	armed.Store(false)
	groups := AllGroups()
	delete(groups, snapshot.GroupXID)
	parallel := newReaderWith(t, h, Options{Groups: groups, Now: steppingClock()})
	for range 3 {
		a, b := read(t, onCaller), read(t, parallel)
		noGroupErrors(t, a)
		if !slices.Equal(upByIndex(t, a), []bool{true, true, true, true}) {
			t.Fatalf("on the caller: up = %v", upByIndex(t, a))
		}
		for i := range a.Devices {
			da, db := a.Devices[i], b.Devices[i]
			if da.UUID != db.UUID || da.Temperature != db.Temperature || da.Memory != db.Memory {
				t.Errorf("GPU %d on the caller: uuid %s temperature %+v memory %+v; in parallel: %s %+v %+v",
					i, da.UUID, da.Temperature, da.Memory, db.UUID, db.Temperature, db.Memory)
			}
		}
	}
}

// countingTemperature counts a fake device's temperature calls.
func countingTemperature(calls *atomic.Int32) func(*mock.Device) {
	return func(d *mock.Device) {
		answer := d.GetTemperatureFunc
		d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			calls.Add(1)
			return answer(s)
		}
	}
}

// A Read left behind in a hung GPU's call (its caller reads again from
// another goroutine, as the accounting's ticks do): the next Read does not
// call the hung GPU again, serves it as down, and reads the others; the
// Read left behind, when its call returns, stops with errSuperseded
// without reading the GPUs after it; the GPU then answers again.
func TestReadOnCallerLeftBehindInAHungGPU(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var hung, after atomic.Int32
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hangingTemperature(release, &hung)), newFakeH100(h, 2, countingTemperature(&after))}
	r := onCallerReader(t, h)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	hung.Store(0)
	after.Store(0)
	leftBehind := make(chan error, 1)
	go func() {
		_, err := r.Read(context.Background())
		leftBehind <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() error {
		if hung.Load() == 0 {
			return errors.New("GPU 1 not called yet")
		}
		return nil
	})
	// The next Read's hold for a GPU is 400 ms / (2 × 3 GPUs), about
	// 67 ms: GPU 1's call has been in flight for longer.
	time.Sleep(100 * time.Millisecond)
	snap := readBy(t, r, 400*time.Millisecond)
	if up := upByIndex(t, snap); !slices.Equal(up, []bool{true, false, true}) {
		t.Fatalf("up = %v, want GPU 1 down while its call hangs", up)
	}
	if d := snap.Devices[1]; d.DownReason != "not_answering" || d.UUID == "" {
		t.Errorf("hung GPU: reason %q uuid %q, want itself, not answering", d.DownReason, d.UUID)
	}
	if n := hung.Load(); n != 1 {
		t.Errorf("the hung GPU was called %d times, want once", n)
	}
	if n := after.Load(); n != 1 {
		t.Fatalf("GPU 2 read %d times, want once (by the second Read)", n)
	}
	close(release)
	released = true
	select {
	case err := <-leftBehind:
		if !errors.Is(err, errSuperseded) {
			t.Fatalf("the Read left behind returned %v, want errSuperseded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Read left behind did not return after its call did")
	}
	if n := after.Load(); n != 1 {
		t.Errorf("GPU 2 read %d times: the Read left behind went on reading", n)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if up := upByIndex(t, read(t, r)); !slices.Equal(up, []bool{true, true, true}) {
			return fmt.Errorf("up = %v after the hung call returned", up)
		}
		return nil
	})
}

// A Read whose deadline passes while a slow GPU answers serves the GPUs
// it has not read yet as themselves (index and UUID, not answering), and
// returns when the slow call does.
func TestReadOnCallerDeadlineServesTheRest(t *testing.T) {
	h := newFakeHost()
	var armed atomic.Bool
	slow := func(d *mock.Device) {
		answer := d.GetTemperatureFunc
		d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if armed.Load() {
				time.Sleep(200 * time.Millisecond)
			}
			return answer(s)
		}
	}
	var later atomic.Int32
	h.devices = []nvml.Device{newFakeH100(h, 0, slow), newFakeH100(h, 1, countingTemperature(&later)), newFakeH100(h, 2)}
	r := onCallerReader(t, h)
	armed.Store(true)
	later.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	snap, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !snap.Devices[0].Up {
		t.Errorf("GPU 0 (slow, but it answered) is down: %q", snap.Devices[0].DownReason)
	}
	for _, d := range snap.Devices[1:] {
		if d.Up || d.DownReason != "not_answering" || d.UUID == "" {
			t.Errorf("GPU %d after the deadline: up %v reason %q uuid %q, want itself, not answering", d.Index, d.Up, d.DownReason, d.UUID)
		}
	}
	if n := later.Load(); n != 0 {
		t.Errorf("GPU 1 was called %d times after the deadline", n)
	}
}

// A Read whose caller gave up is an error.
func TestReadOnCallerCancelled(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1)}
	r := onCallerReader(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); err == nil {
		t.Fatal("Read with a cancelled context returned no error")
	}
}

// Reads on the caller from several goroutines at once each get every GPU,
// or stop with errSuperseded when a newer one overtook them (run with
// -race): the last one always gets every GPU.
func TestReadOnCallerConcurrentReads(t *testing.T) {
	h := newFakeHost()
	for i := range 3 {
		h.devices = append(h.devices, newFakeH100(h, i))
	}
	r := onCallerReader(t, h)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 20 {
				snap, err := r.Read(context.Background())
				if errors.Is(err, errSuperseded) {
					continue
				}
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
	if up := upByIndex(t, read(t, r)); !slices.Equal(up, []bool{true, true, true}) {
		t.Fatalf("up = %v after the concurrent reads", up)
	}
}

// Close does not wait for good on a Read left behind in a hung call: it
// gives up after closeWaitsForReads and says so.
func TestCloseWithAReadLeftBehind(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var hung atomic.Int32
	h.devices = []nvml.Device{newFakeH100(h, 0, hangingTemperature(release, &hung))}
	groups := AllGroups()
	delete(groups, snapshot.GroupXID)
	r, err := openReader(h, Options{Groups: groups, Now: steppingClock()}, readMode{onCaller: true})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	hung.Store(0)
	go func() { _, _ = r.Read(context.Background()) }()
	testenv.Eventually(t, 5*time.Second, func() error {
		if hung.Load() == 0 {
			return errors.New("GPU 0 not called yet")
		}
		return nil
	})
	start := time.Now()
	err = r.Close()
	if err == nil || !strings.Contains(err.Error(), "leaving nvml as it is") {
		t.Errorf("Close = %v, want it to say it left NVML", err)
	}
	if took := time.Since(start); took > closeWaitsForReads+3*time.Second {
		t.Errorf("Close took %v", took)
	}
}
