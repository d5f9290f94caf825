//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// A GPU whose NVML calls hang must cost a read no more than its deadline,
// be reported down while it hangs, never get a second blocked read, and
// come back once its call returns. The other GPUs are read every time.
func TestHungDeviceIsReportedDownAndNotReadAgain(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var hungCalls atomic.Int32
	hang := func(d *mock.Device) {
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			hungCalls.Add(1)
			<-release
			return 50, nvml.SUCCESS
		}
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hang), newFakeH100(h, 2)}
	r := newReader(t, h, AllGroups())
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	readWithin := func(deadline time.Duration) (snapDevices []bool, took time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		snap, err := r.Read(ctx)
		took = time.Since(start)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for _, d := range snap.Devices {
			snapDevices = append(snapDevices, d.Up)
		}
		if d := snap.Devices[1]; !d.Up && (d.DownReason != "not_answering" || d.UUID == "") {
			t.Errorf("hung device: reason %q uuid %q", d.DownReason, d.UUID)
		}
		return snapDevices, took
	}

	// The deadline leaves the healthy GPUs time to answer on a loaded
	// machine: only the hung one may be down.
	up, took := readWithin(2 * time.Second)
	if took > 4*time.Second {
		t.Errorf("first read took %v with a 2s deadline", took)
	}
	if !up[0] || up[1] || !up[2] {
		t.Fatalf("first read: up = %v, want GPU 1 down and the others up", up)
	}
	// While the call hangs, later reads report GPU 1 down at once, well
	// within the deadline they would otherwise wait out.
	up, took = readWithin(5 * time.Second)
	if took > 2500*time.Millisecond || up[1] || !up[0] || !up[2] {
		t.Fatalf("second read: up = %v after %v", up, took)
	}
	if n := hungCalls.Load(); n != 1 {
		t.Errorf("the hung device was called %d times, want 1 (no second blocked read)", n)
	}
	// The call returns: the device is read again and comes back.
	close(release)
	testenv.Eventually(t, 5*time.Second, func() error {
		if up, _ = readWithin(5 * time.Second); !up[1] {
			return errors.New("the device is still down after its call returned")
		}
		return nil
	})
}

// A cancelled context (the caller gave up) is still an error, not a
// snapshot with every device down.
func TestCancelledReadIsAnError(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0)}
	r := newReader(t, h, AllGroups())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx); err == nil {
		t.Fatal("Read with a cancelled context returned no error")
	}
}

// Devices still waiting for a read slot when the deadline passes are
// reported as themselves (their index and known UUID, not_answering), never
// as a blank device that would claim index 0.
func TestDevicesWaitingForASlotAtTheDeadline(t *testing.T) {
	const devices = 6
	for attempt := range 20 {
		h := newFakeHost()
		release := make(chan struct{})
		hangAll := func(d *mock.Device) {
			d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
				<-release
				return 50, nvml.SUCCESS
			}
		}
		for i := range devices {
			h.devices = append(h.devices, newFakeH100(h, i, hangAll))
		}
		groups := AllGroups()
		delete(groups, snapshot.GroupXID) // its watcher takes half a second to stop
		r := newReaderWith(t, h, Options{Groups: groups, Parallel: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		snap, err := r.Read(ctx)
		cancel()
		close(release)
		if errors.Is(err, context.DeadlineExceeded) {
			// On a loaded machine the deadline can pass before the
			// device reads begin (Read then fails as a whole): not
			// the case under test.
			continue
		}
		if err != nil {
			t.Fatalf("attempt %d: Read: %v", attempt, err)
		}
		if len(snap.Devices) != devices {
			t.Fatalf("attempt %d: %d devices, want %d", attempt, len(snap.Devices), devices)
		}
		for i, d := range snap.Devices {
			if d.Index != i || d.Up || d.DownReason != "not_answering" {
				t.Fatalf("attempt %d: device %d = {Index %d, Up %v, DownReason %q}, want itself, not answering",
					attempt, i, d.Index, d.Up, d.DownReason)
			}
		}
	}
}

// Hung GPUs must not take the read slots of healthy ones: with as many
// GPUs hanging as there are slots, the others are still read and up
// (only a GPU that does not answer may be reported down).
func TestHungDevicesDoNotStarveHealthyOnes(t *testing.T) {
	const devices, parallel = 8, 4
	h := newFakeHost()
	release := make(chan struct{})
	hang := func(d *mock.Device) {
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			<-release
			return 50, nvml.SUCCESS
		}
	}
	for i := range devices {
		if i < parallel {
			h.devices = append(h.devices, newFakeH100(h, i, hang))
		} else {
			h.devices = append(h.devices, newFakeH100(h, i))
		}
	}
	groups := AllGroups()
	delete(groups, snapshot.GroupXID) // its watcher takes half a second to stop
	r := newReaderWith(t, h, Options{Groups: groups, Parallel: parallel})
	// Registered after the reader's Close, so it runs first: Close
	// waits for the hung reads.
	t.Cleanup(func() { close(release) })
	// A generous budget: the healthy GPUs answer in microseconds, so a
	// busy machine cannot make this flaky; before the fix they waited for
	// a slot until the deadline whatever its length.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	snap, err := r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range snap.Devices {
		if hung := i < parallel; d.Up == hung {
			t.Errorf("GPU %d: up=%v (%q), want up=%v", i, d.Up, d.DownReason, !hung)
		}
	}
}

// A GPU that hangs from its very first NVML call must not keep New from
// returning (it used to block in the first GPM sample forever): New waits
// StartTimeout for it, the first Read reports it down without calling it
// again, and the other GPUs are read as usual. Once its call returns, the
// GPU is read again and comes back.
func TestDeviceHungFromTheFirstCall(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	var hungCalls atomic.Int32
	hang := func(d *mock.Device) {
		answer := d.GetUUIDFunc
		d.GetUUIDFunc = func() (string, nvml.Return) {
			select {
			case <-release:
			default:
				hungCalls.Add(1)
				<-release
			}
			return answer()
		}
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hang), newFakeH100(h, 2)}
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)

	// The healthy GPUs must answer within the start timeout however
	// loaded the machine (much shorter ones were seen to miss under -race
	// on CI's two cores); New waits this long for the hung one.
	const startTimeout = 2 * time.Second
	begin := time.Now()
	r := newReaderWith(t, h, Options{Groups: AllGroups(), Now: steppingClock(), StartTimeout: startTimeout})
	if took := time.Since(begin); took > startTimeout+2*time.Second {
		t.Fatalf("New took %v with a %v start timeout", took, startTimeout)
	}
	if n := hungCalls.Load(); n != 1 {
		t.Errorf("the hung GPU was called %d times during New, want 1 (the XID registration must skip it)", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	snap, err := r.Read(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range snap.Devices {
		if hung := i == 1; d.Up == hung {
			t.Errorf("GPU %d: up=%v (%q), want up=%v", i, d.Up, d.DownReason, !hung)
		}
	}
	if d := snap.Devices[1]; d.DownReason != "not_answering" {
		t.Errorf("hung GPU's down reason %q, want not_answering", d.DownReason)
	}
	if n := hungCalls.Load(); n != 1 {
		t.Errorf("the hung GPU was called %d times, want 1 (no second blocked call)", n)
	}

	releaseOnce()
	testenv.Eventually(t, 5*time.Second, func() error {
		if !read(t, r).Devices[1].Up {
			return errors.New("the GPU is still down after its call returned")
		}
		return nil
	})
}

// Close must not wait for a read blocked in a hung GPU: that read holds its
// device's state, and Close used to wait for the lock forever.
func TestCloseWithAReadBlockedInAHungGPU(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	defer close(release)
	blocked := make(chan struct{}, 1)
	hang := func(d *mock.Device) {
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			blocked <- struct{}{}
			<-release
			return 50, nvml.SUCCESS
		}
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hang)}
	groups := AllGroups()
	delete(groups, snapshot.GroupXID) // its watcher takes half a second to stop
	r, err := New(h, Options{Groups: groups, Now: steppingClock()})
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the read cannot fail as a whole on a loaded
	// machine (a deadline that passes before the device reads begin).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if _, err := r.Read(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-blocked // the read of GPU 1 is inside the hung call, holding its state

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the read blocked in the hung GPU")
	}
}

// nvmlShutdown can itself wait on a call blocked in a hung GPU: Close
// gives up on it after shutdownTimeout with an error instead of hanging
// the exporter's exit.
func TestCloseDoesNotWaitForeverOnShutdown(t *testing.T) {
	h := newFakeHost()
	h.devices = []nvml.Device{newFakeH100(h, 0)}
	release := make(chan struct{})
	defer close(release)
	h.Interface.ShutdownFunc = func() nvml.Return {
		<-release
		return nvml.SUCCESS
	}
	groups := AllGroups()
	delete(groups, snapshot.GroupXID)
	r, err := New(h, Options{Groups: groups, Now: steppingClock()})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "did not return") {
			t.Errorf("Close = %v, want the shutdown that did not return", err)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("Close waited for nvmlShutdown forever")
	}
}

// A GPU that did not answer at start is registered for XID events once it
// answers again (the watcher retries every xidRetryInterval), so its XID
// series appear without a restart.
func TestHungAtStartIsRegisteredForXIDsLater(t *testing.T) {
	h := newFakeHost()
	release := make(chan struct{})
	hang := func(d *mock.Device) {
		answer := d.GetUUIDFunc
		d.GetUUIDFunc = func() (string, nvml.Return) {
			<-release
			return answer()
		}
	}
	h.devices = []nvml.Device{newFakeH100(h, 0), newFakeH100(h, 1, hang)}
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	// The healthy GPU must answer within the start timeout however loaded
	// the machine (much shorter ones were seen to miss under -race on two
	// busy cores).
	r := newReaderWith(t, h, Options{Groups: AllGroups(), Now: steppingClock(), StartTimeout: 2 * time.Second})

	snap := read(t, r)
	if _, ok := snap.Devices[1].XIDEvents.Get(); ok {
		t.Fatal("the GPU that did not answer at start has XID counts before it was registered")
	}
	if _, ok := snap.Devices[0].XIDEvents.Get(); !ok {
		t.Fatal("the healthy GPU has no XID counts")
	}

	releaseOnce()
	var events uint64
	testenv.Eventually(t, xidRetryInterval+5*time.Second, func() error {
		var registered bool
		if events, registered = read(t, r).Devices[1].XIDEvents.Get(); !registered {
			return errors.New("gpu 1 answers but is not registered for XID events")
		}
		return nil
	})
	if events != 0 {
		t.Errorf("gpu 1: %d XID events, want 0", events)
	}
	h.events <- nvml.EventData{Device: h.devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	testenv.Eventually(t, 5*time.Second, func() error {
		if code, _ := read(t, r).Devices[1].XIDLastCode.Get(); code != 48 {
			return fmt.Errorf("the late-registered GPU's last XID is %d, want 48", code)
		}
		return nil
	})
}
