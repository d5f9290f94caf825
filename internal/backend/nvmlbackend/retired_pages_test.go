//go:build cgo

package nvmlbackend

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// A driver whose retired-page count keeps growing, through the simulator.
// test/e2e/sick_driver_test.go runs the same faults through the fake
// libnvidia-ml.so.1 and the real cgo path. Page retirement is a Volta
// (and earlier) feature: the v100 profile.

var retiredPagesFaults = []string{sim.RetiredPagesDoubling, sim.RetiredPagesOneMore}

func TestSimRetiredPagesThatNeverFitAreAnECCErrorForThatGPUOnly(t *testing.T) {
	for _, size := range retiredPagesFaults {
		t.Run(size, func(t *testing.T) {
			s := newSim(t, sim.Config{Profile: "v100", Faults: []sim.Fault{{GPU: 0, RetiredPagesSize: size}}}, time.Minute)
			r := newSimReader(t, s, AllGroups())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			snap, err := r.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := snap.Devices[0]
			if !d.Up || !d.Temperature.GPU.Valid || !d.Power.Usage.Valid || !d.Memory.Used.Valid {
				t.Errorf("gpu 0: up=%v (%s), temperature %+v, power %+v, memory %+v; the rest of the GPU must still be served",
					d.Up, d.DownReason, d.Temperature.GPU, d.Power.Usage, d.Memory.Used)
			}
			wantAbsent(t, "single-bit retired pages", d.ECC.RetiredPagesSingleBit)
			wantAbsent(t, "double-bit retired pages", d.ECC.RetiredPagesDoubleBit)
			if !d.ECC.RetiredPagesPending.Valid || !d.ECC.VolatileCorrected.Valid || !d.ECC.AggregateUncorrected.Valid {
				t.Errorf("gpu 0's other ECC readings are gone: %+v", d.ECC)
			}
			err = snap.Groups[snapshot.GroupECC].Err
			if !errors.Is(err, nvml.ERROR_INSUFFICIENT_SIZE) || !strings.HasPrefix(err.Error(), "gpu 0: GetRetiredPages(") ||
				!strings.Contains(err.Error(), "its retired pages are unknown") {
				t.Errorf("ecc group error = %v, want gpu 0's insufficient_size saying its retired pages are unknown", err)
			}
			if pids := processPIDs(snap, 0); len(pids) != 1 || pids[0] != 12877 {
				t.Errorf("gpu 0 lists processes %v, want the profile's pid 12877", pids)
			}
			for name, st := range snap.Groups {
				if name != snapshot.GroupECC && st.Err != nil {
					t.Errorf("group %s: %v; only ecc may fail", name, st.Err)
				}
			}
		})
	}
}

// countingRetiredPages records a handle's sized retired-page calls.
type countingRetiredPages struct {
	nvml.Device
	mu         sync.Mutex
	capacities []uint32
}

func (c *countingRetiredPages) RetiredPagesSized(cause nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return) {
	c.mu.Lock()
	c.capacities = append(c.capacities, capacity)
	c.mu.Unlock()
	return c.Device.(interface {
		RetiredPagesSized(nvml.PageRetirementCause, uint32) ([]uint64, uint32, nvml.Return)
	}).RetiredPagesSized(cause, capacity)
}

func (c *countingRetiredPages) calls() []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint32(nil), c.capacities...)
}

func readCountingRetiredPages(t *testing.T, cfg sim.Config) (*snapshot.Snapshot, []uint32) {
	t.Helper()
	s := newSim(t, cfg, time.Minute)
	counted := &countingRetiredPages{}
	lib := wrappedSim{s, func(d nvml.Device) nvml.Device { counted.Device = d; return counted }}
	r := newReaderWith(t, lib, Options{Groups: groups(snapshot.GroupECC), Now: s.Now})
	return read(t, r), counted.calls()
}

func TestSimRetiredPagesCallsAndBufferAreBounded(t *testing.T) {
	for _, size := range retiredPagesFaults {
		t.Run(size, func(t *testing.T) {
			_, capacities := readCountingRetiredPages(t, sim.Config{Profile: "v100", Faults: []sim.Fault{{GPU: 0, RetiredPagesSize: size}}})
			// Two causes, retiredPageTries calls each.
			if n := len(capacities); n == 0 || n > 2*retiredPageTries {
				t.Errorf("%d retired-page calls in one read (%v), want 1..%d", n, capacities, 2*retiredPageTries)
			}
			for _, c := range capacities {
				if c > maxRetiredPages {
					t.Errorf("a buffer of %d pages was offered, over the bound of %d", c, maxRetiredPages)
				}
			}
		})
	}
}

func TestSimRetiredPagesAreOneCountQueryPerCause(t *testing.T) {
	// A GPU with no retired page, nearly every one: one query per cause,
	// with no buffer, and the counts are 0, not absent.
	snap, capacities := readCountingRetiredPages(t, sim.Config{Profile: "v100"})
	noGroupErrors(t, snap)
	if len(capacities) != 2 || capacities[0] != 0 || capacities[1] != 0 {
		t.Errorf("retired-page calls offered %v entries, want one count query (0) per cause", capacities)
	}
	want(t, "single-bit retired pages", snap.Devices[0].ECC.RetiredPagesSingleBit, 0)
	want(t, "double-bit retired pages", snap.Devices[0].ECC.RetiredPagesDoubleBit, 0)
}

// scriptedRetiredPages answers RetiredPagesSized from have, the pages the
// driver has at each call (the last repeats), and records the capacities.
type scriptedRetiredPages struct {
	nvml.Device
	have       []uint32
	capacities []uint32
}

func (s *scriptedRetiredPages) RetiredPagesSized(_ nvml.PageRetirementCause, capacity uint32) ([]uint64, uint32, nvml.Return) {
	n := s.have[min(len(s.capacities), len(s.have)-1)]
	s.capacities = append(s.capacities, capacity)
	if n > capacity {
		return nil, n, nvml.ERROR_INSUFFICIENT_SIZE
	}
	return make([]uint64, n), n, nvml.SUCCESS
}

func TestCountRetiredPagesConfirmsTheCountInABoundedExchange(t *testing.T) {
	for _, c := range []struct {
		name  string
		have  []uint32
		count uint64
		calls int
	}{
		{"none retired: the query alone", []uint32{0}, 0, 1},
		{"three retired: the query, then a buffer that holds them", []uint32{3}, 3, 2},
		{"a page retired between the calls", []uint32{3, 4}, 4, 2},
		{"pages retired faster than the first buffer grew", []uint32{3, 20, 30}, 30, 3},
		{"more than the bound: a bounded error", []uint32{1 << 20}, 0, 2},
		{"a count that doubles on every call", []uint32{2, 40, 800, 16000, 320000}, 0, retiredPageTries},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := &scriptedRetiredPages{have: c.have}
			count, ret, tooLong := countRetiredPages(dev, nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
			fits := c.count == uint64(c.have[min(c.calls, len(c.have))-1])
			switch {
			case fits && (ret != nvml.SUCCESS || tooLong != nil || count != c.count):
				t.Errorf("count %d, %v, tooLong %+v; want %d", count, ret, tooLong, c.count)
			case !fits && (ret != nvml.ERROR_INSUFFICIENT_SIZE || tooLong == nil):
				t.Errorf("count %d, %v, tooLong %+v; want a bounded INSUFFICIENT_SIZE", count, ret, tooLong)
			}
			if len(dev.capacities) != c.calls || dev.capacities[0] != 0 {
				t.Errorf("calls offered %v entries, want %d calls, the first a count query (0)", dev.capacities, c.calls)
			}
			for _, capacity := range dev.capacities {
				if capacity > maxRetiredPages {
					t.Errorf("offered %d entries, over the bound of %d", capacity, maxRetiredPages)
				}
			}
		})
	}
}
