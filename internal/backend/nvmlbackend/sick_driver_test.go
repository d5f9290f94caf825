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

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// A driver in trouble, through the simulator: process lists
// that never fit, a GPU whose very handle is lost, XIDs on several GPUs at
// the instant another falls off the bus, process lists not supported.
// test/e2e/sick_driver_test.go runs the same cases through the fake
// libnvidia-ml.so.1 and the real cgo path.

// processPIDs lists the PIDs the snapshot has on gpu.
func processPIDs(s *snapshot.Snapshot, gpu int) []uint32 {
	var pids []uint32
	for _, p := range s.Processes {
		if p.GPU == gpu {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

func TestSimProcessListThatNeverFitsIsAGroupErrorForThatGPUOnly(t *testing.T) {
	for _, size := range []string{sim.ProcessListDoubling, sim.ProcessListOneMore} {
		t.Run(size, func(t *testing.T) {
			s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 1, ProcessListSize: size}}}, time.Minute)
			r := newSimReader(t, s, AllGroups())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			snap, err := r.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := snap.Devices[1]
			if !d.Up || !d.Temperature.GPU.Valid || !d.Power.Usage.Valid {
				t.Errorf("gpu 1: up=%v (%s), temperature %+v, power %+v; the rest of the GPU must still be served",
					d.Up, d.DownReason, d.Temperature.GPU, d.Power.Usage)
			}
			if d.ProcessesUnknown != "insufficient_size" {
				t.Errorf("gpu 1: ProcessesUnknown = %q, want insufficient_size", d.ProcessesUnknown)
			}
			if pids := processPIDs(snap, 1); len(pids) != 0 {
				t.Errorf("gpu 1 lists processes %v though its list never fit", pids)
			}
			err = snap.Groups[snapshot.GroupProcesses].Err
			if !errors.Is(err, nvml.ERROR_INSUFFICIENT_SIZE) || !strings.HasPrefix(err.Error(), "gpu 1: ") {
				t.Errorf("processes group error = %v, want gpu 1's insufficient_size", err)
			}
			for gpu, want := range map[int]uint32{0: 71201, 2: 71203, 4: 83310} {
				if pids := processPIDs(snap, gpu); !slices.Contains(pids, want) || snap.Devices[gpu].ProcessesUnknown != "" {
					t.Errorf("gpu %d: processes %v (unknown %q), want pid %d listed", gpu, pids, snap.Devices[gpu].ProcessesUnknown, want)
				}
			}
		})
	}
}

// countingLists counts a handle's sized process-list calls and the
// largest buffer offered.
type countingLists struct {
	nvml.Device
	calls, largest atomic.Int64
}

func (c *countingLists) RunningProcessesSized(kind string, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
	c.calls.Add(1)
	for {
		old := c.largest.Load()
		if int64(capacity) <= old || c.largest.CompareAndSwap(old, int64(capacity)) {
			break
		}
	}
	return c.Device.(interface {
		RunningProcessesSized(string, uint32) ([]nvml.ProcessInfo, uint32, nvml.Return)
	}).RunningProcessesSized(kind, capacity)
}

func TestSimProcessListCallsAndBufferAreBounded(t *testing.T) {
	for _, size := range []string{sim.ProcessListDoubling, sim.ProcessListOneMore} {
		t.Run(size, func(t *testing.T) {
			s := newSim(t, sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, ProcessListSize: size}}}, time.Minute)
			counted := &countingLists{}
			lib := wrappedSim{s, func(d nvml.Device) nvml.Device { counted.Device = d; return counted }}
			r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupProcesses), Now: s.Now})
			read(t, r)
			// compute, graphics and MPS lists: processListTries each.
			if n := counted.calls.Load(); n == 0 || n > 3*processListTries {
				t.Errorf("%d process-list calls in one read, want 1..%d", n, 3*processListTries)
			}
			if c := counted.largest.Load(); c > maxProcessListEntries {
				t.Errorf("a buffer of %d entries was offered, over the bound of %d", c, maxProcessListEntries)
			}
		})
	}
}

func TestBoundedListGrowsToWhatTheDriverAsksFor(t *testing.T) {
	// A list that grows between calls (processes starting meanwhile) fits
	// on a later try; one that asks for more than the bound never does.
	have := 100
	calls := 0
	list, ret, tooLong := boundedList(func(capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
		calls++
		have += 10
		if int(capacity) < have {
			return nil, uint32(have), nvml.ERROR_INSUFFICIENT_SIZE
		}
		return make([]nvml.ProcessInfo, have), uint32(have), nvml.SUCCESS
	}, 0)
	if ret != nvml.SUCCESS || tooLong != nil || len(list) != have || calls != 2 {
		t.Errorf("growing list: %d entries, %v, tooLong %+v after %d calls; want %d entries on the second call", len(list), ret, tooLong, calls, have)
	}
	calls = 0
	_, ret, tooLong = boundedList(func(capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
		calls++
		if capacity > maxProcessListEntries {
			t.Errorf("offered %d entries", capacity)
		}
		return nil, 1 << 31, nvml.ERROR_INSUFFICIENT_SIZE
	}, 0)
	if ret != nvml.ERROR_INSUFFICIENT_SIZE || tooLong == nil || calls > processListTries {
		t.Errorf("a list past the bound: %v, tooLong %+v after %d calls", ret, tooLong, calls)
	}
}

func TestSimUnsupportedProcessListIsUnknownNotZero(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 2, Unsupported: []string{"processes"}}}}, time.Minute)
	r := newSimReader(t, s, AllGroups())
	snap := read(t, r)
	if got := snap.Devices[2].ProcessesUnknown; got != "not_supported" {
		t.Errorf("gpu 2: ProcessesUnknown = %q, want not_supported", got)
	}
	if err := snap.Groups[snapshot.GroupProcesses].Err; err != nil {
		t.Errorf("processes group error %v; NOT_SUPPORTED is no error", err)
	}
	for _, gpu := range []int{0, 1, 3} {
		if got := snap.Devices[gpu].ProcessesUnknown; got != "" || len(processPIDs(snap, gpu)) == 0 {
			t.Errorf("gpu %d: ProcessesUnknown %q, processes %v; want its processes", gpu, got, processPIDs(snap, gpu))
		}
	}
	// GPU 5 is idle: its list is read and empty, which is known, not unknown.
	if got := snap.Devices[5].ProcessesUnknown; got != "" {
		t.Errorf("idle gpu 5: ProcessesUnknown = %q, want its (empty) list known", got)
	}
}

func TestSimLostHandleKeepsTheUUIDAndTheXID79(t *testing.T) {
	// nvml.h: nvmlDeviceGetHandleByIndex_v2 itself answers GPU_IS_LOST for
	// a GPU that fell off the bus.
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 1, XID: 79, At: durationPtr(9 * time.Second), LostAfter: durationPtr(10 * time.Second), LostHandle: true},
	}}, 0)
	r := newSimReader(t, s, AllGroups())
	before := read(t, r)
	s.SetElapsed(9 * time.Second)
	pollUntil(t, r, func(s *snapshot.Snapshot) bool { return s.Devices[1].XIDErrors != nil })
	s.SetElapsed(11 * time.Second)
	if _, ret := s.DeviceGetHandleByIndex(1); ret != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("the simulator's handle call answers %v, want GPU_IS_LOST", ret)
	}
	for range 2 { // the first read after the loss, and one after that
		d := read(t, r).Devices[1]
		if d.Up || d.DownReason != "gpu_is_lost" || d.UUID != before.Devices[1].UUID {
			t.Errorf("lost gpu 1: up=%v reason %q uuid %q, want down (gpu_is_lost) with its uuid %q", d.Up, d.DownReason, d.UUID, before.Devices[1].UUID)
		}
		if len(d.XIDErrors) != 1 || d.XIDErrors[0] != (snapshot.XIDCount{XID: 79, Count: 1}) || d.XIDLastCode.Value != 79 {
			t.Errorf("lost gpu 1: xids %+v, last %+v; want its XID 79 kept", d.XIDErrors, d.XIDLastCode)
		}
	}
}

func TestSimXIDsAtTheInstantOfALossAreCounted(t *testing.T) {
	// Correlated failures: GPU 3 falls off the bus at 1s while GPUs 0, 2,
	// 5 and 7 raise XIDs at the same instant (test/faults' case is GPU
	// 2's XID 79). With one event set for every GPU the loss made the set
	// answer GPU_IS_LOST and be rebuilt, and the XIDs pending in it were
	// dropped.
	s := newSim(t, sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{
		{GPU: 3, LostAfter: durationPtr(time.Second)},
		{GPU: 2, XID: 79, At: durationPtr(time.Second)},
		{GPU: 0, XID: 74, At: durationPtr(time.Second)},
		{GPU: 5, XID: 48, At: durationPtr(time.Second)},
		{GPU: 7, XID: 94, At: durationPtr(time.Second)},
	}}, 0)
	regs := &registrations{}
	r := newReaderWith(t, wrappedSim{s, regs.wrap}, Options{Groups: groups(snapshot.GroupXID), Now: s.Now})
	regs.waitFor(t, 8)
	// The watcher notices a moment after the instant, as it would on a
	// real host: the clock jumps past it.
	s.SetElapsed(1500 * time.Millisecond)
	want := map[int]uint64{0: 74, 2: 79, 5: 48, 7: 94}
	var snap *snapshot.Snapshot
	testenv.Eventually(t, 10*time.Second, func() error {
		snap = read(t, r)
		for gpu, xid := range want {
			if d := snap.Devices[gpu]; d.XIDEvents.Value != 1 || d.XIDLastCode.Value != xid {
				return fmt.Errorf("gpu %d: %d XIDs, last %d; want its XID %d", gpu, d.XIDEvents.Value, d.XIDLastCode.Value, xid)
			}
		}
		return nil
	})
	for _, gpu := range []int{1, 4, 6} {
		if n := snap.Devices[gpu].XIDEvents.Value; n != 0 {
			t.Errorf("gpu %d: %d XIDs, want 0", gpu, n)
		}
	}
	if err := snap.Groups[snapshot.GroupXID].Err; err != nil {
		t.Errorf("xid group error: %v", err)
	}
}
