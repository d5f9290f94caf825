//go:build cgo

package nvmlbackend

import (
	"slices"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// reconfigurableMIG is a MIG-enabled fake GPU whose MIG devices can be
// destroyed and created between reads: a destroyed one's handle answers
// INVALID_ARGUMENT, as a handle to nothing.
type reconfigurableMIG struct {
	mu        sync.Mutex
	migs      []*mock.Device
	destroyed map[*mock.Device]bool
}

func newReconfigurableMIG(h *fakeHost) (*reconfigurableMIG, *mock.Device) {
	g := &reconfigurableMIG{destroyed: map[*mock.Device]bool{}}
	g.migs = []*mock.Device{g.instance(h, 1, 0, "3g.40gb"), g.instance(h, 2, 0, "1c.3g.40gb")}
	parent := newFakeH100(h, 0, func(d *mock.Device) {
		d.GetMigModeFunc = func() (int, int, nvml.Return) {
			return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
		}
		d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if i < len(g.migs) {
				return g.migs[i], nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
		d.GpmMigSampleGetFunc = func(gi int, s nvml.GpmSample) nvml.Return {
			g.mu.Lock()
			alive := false
			for _, m := range g.migs {
				if id, _ := m.GetGpuInstanceId(); id == gi {
					alive = true
				}
			}
			g.mu.Unlock()
			if !alive {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			return h.takeSample(s)
		}
	})
	return g, parent
}

func (g *reconfigurableMIG) instance(h *fakeHost, gi, ci int, profile string) *mock.Device {
	d := newFakeMIGDevice(h, 0, gi, ci, profile, nil)
	memory := d.GetMemoryInfoFunc
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		g.mu.Lock()
		gone := g.destroyed[d]
		g.mu.Unlock()
		if gone {
			return nvml.Memory{}, nvml.ERROR_INVALID_ARGUMENT
		}
		return memory()
	}
	return d
}

func (g *reconfigurableMIG) destroy(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.destroyed[g.migs[i]] = true
	g.migs = slices.Delete(g.migs, i, i+1)
}

func (g *reconfigurableMIG) create(h *fakeHost, gi, ci int, profile string) {
	d := g.instance(h, gi, ci, profile)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.migs = append(g.migs, d)
}

func migUUIDs(d snapshot.Device) []string {
	var out []string
	for _, m := range d.MIGInstances {
		out = append(out, m.UUID)
	}
	return out
}

// The accounting's reader lists a MIG GPU's MIG devices once every
// ListProcessesEvery reads and takes the last list in between; a call on
// a destroyed instance fails, and the next read lists them again. An
// instance created meanwhile is read from the next list on. The scrapes'
// reader lists them at every read.
func TestAccountingReaderListsMIGDevicesEveryFewReads(t *testing.T) {
	h := newFakeHost()
	g, parent := newReconfigurableMIG(h)
	h.devices = []nvml.Device{parent}
	groups := map[string]bool{snapshot.GroupInfo: true, snapshot.GroupMIG: true, snapshot.GroupGPM: true, snapshot.GroupProcesses: true}
	r := newModeReader(t, h, Options{Groups: groups, Now: steppingClock()}, readMode{processSamples: true, gpmOnlyMIG: true, countersOnly: true, listEvery: 8, listSteady: 32})
	// Counted from here: New lists them too, to prime GPM.
	primed := h.log.count("Device.GetMaxMigDeviceCount")
	lists := func() int { return h.log.count("Device.GetMaxMigDeviceCount") - primed }

	for i := range 8 {
		snap := read(t, r)
		noGroupErrors(t, snap)
		if got, want := migUUIDs(snap.Devices[0]), []string{"MIG-0-1-0", "MIG-0-2-0"}; !slices.Equal(got, want) {
			t.Fatalf("read %d: MIG instances %v, want %v", i+1, got, want)
		}
		if i > 0 {
			// The GPU instances' memory and GPM are read at every read.
			want(t, "mig1.memory_used", snap.Devices[0].MIGInstances[1].MemoryUsed, 2*gib)
		}
	}
	if n := lists(); n != 1 {
		t.Errorf("8 reads listed the MIG devices %d times, want once", n)
	}
	read(t, r) // the ninth: listed again
	if n := lists(); n != 2 {
		t.Errorf("9 reads listed the MIG devices %d times, want twice", n)
	}

	// An instance made now is read from the next list on.
	g.create(h, 3, 0, "1g.10gb")
	for range 7 {
		if got := migUUIDs(read(t, r).Devices[0]); len(got) != 2 {
			t.Fatalf("before the next list: MIG instances %v, want the two listed", got)
		}
	}
	if got, want := migUUIDs(read(t, r).Devices[0]), []string{"MIG-0-1-0", "MIG-0-2-0", "MIG-0-3-0"}; !slices.Equal(got, want) {
		t.Errorf("at the next list: MIG instances %v, want %v", got, want)
	}

	// A destroyed one fails the read that still has it; the next lists
	// them again.
	before := lists()
	g.destroy(0)
	failed := read(t, r)
	if failed.Groups[snapshot.GroupMIG].Err == nil {
		t.Errorf("the read after the destruction: no MIG group error")
	}
	after := read(t, r)
	noGroupErrors(t, after)
	if got, want := migUUIDs(after.Devices[0]), []string{"MIG-0-2-0", "MIG-0-3-0"}; !slices.Equal(got, want) {
		t.Errorf("the read after that: MIG instances %v, want %v", got, want)
	}
	if n := lists() - before; n != 1 {
		t.Errorf("listed %d times over the two reads, want once (the second)", n)
	}
}

// The scrapes' reader lists the MIG devices at every read.
func TestScrapeReaderListsMIGDevicesAtEveryRead(t *testing.T) {
	h := newFakeHost()
	_, parent := newReconfigurableMIG(h)
	h.devices = []nvml.Device{parent}
	r := newReaderWith(t, h, Options{Groups: AllGroups(), Now: steppingClock()})
	primed := h.log.count("Device.GetMaxMigDeviceCount")
	for range 3 {
		noGroupErrors(t, read(t, r))
	}
	if n := h.log.count("Device.GetMaxMigDeviceCount") - primed; n != 3 {
		t.Errorf("3 reads listed the MIG devices %d times, want 3", n)
	}
}
