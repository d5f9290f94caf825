//go:build cgo

package nvmlbackend

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
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
	r := newModeReader(t, s, Options{Groups: map[string]bool{snapshot.GroupProcesses: true}, Now: s.Now}, readMode{processSamples: true})
	var snaps []*snapshot.Snapshot
	var copies [][]snapshot.ProcessSample
	var procCopies [][]snapshot.Process
	var groupCopies []map[string]snapshot.GroupStatus
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
		if n := len(snaps); n > 0 && !reflect.DeepEqual(snaps[n-1].Groups, groupCopies[n-1]) {
			t.Errorf("at %s: the previous snapshot's group status changed", e)
		}
		if _, ok := snap.Groups[snapshot.GroupProcesses]; !ok || len(snap.Groups) != 1 {
			t.Errorf("at %s: group status %v, want the processes group's alone", e, snap.Groups)
		}
		if !slices.ContainsFunc(snap.Processes, func(p snapshot.Process) bool { return p.PID == 300 }) {
			t.Errorf("at %s: PID 300 not listed", e)
		}
		snaps = append(snaps, snap)
		copies = append(copies, slices.Clone(got))
		procCopies = append(procCopies, slices.Clone(snap.Processes))
		groupCopies = append(groupCopies, maps.Clone(snap.Groups))
		// A read's durations differ from the last one's: a status map
		// shared by two snapshots in turn would show.
		time.Sleep(time.Millisecond)
	}
	// (From the copies: the snapshots themselves are reused by now.)
	if len(copies[0]) != 0 || len(copies[2]) == 0 || len(copies[4]) != 0 {
		t.Fatal("want no samples at 2 s and 10 s, some at 6 s: the test shows nothing")
	}
}

// A slow GPU's late reading, served by the next reads of the accounting's
// reader while its own next read runs, keeps its processes and samples
// (run with -race: a buffer written while a reading that holds it is
// served shows as a race).
func TestAccountingReadersLateReadingsKeepTheirBuffers(t *testing.T) {
	s, err := sim.New(sim.Config{Profile: "dgx-h100", Faults: []sim.Fault{{GPU: 1, SlowCalls: durationPtr(10 * time.Millisecond)}}})
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]bool{snapshot.GroupInfo: true, snapshot.GroupPower: true, snapshot.GroupProcesses: true, snapshot.GroupMIG: true, snapshot.GroupGPM: true}
	r := newModeReader(t, s, Options{Groups: groups, Now: s.Now, StartTimeout: 5 * time.Second, DownAfter: time.Minute}, readMode{processSamples: true, gpmOnlyMIG: true})
	type kept struct {
		snap    *snapshot.Snapshot
		procs   []snapshot.Process
		samples [][]snapshot.ProcessSample
	}
	keep := func(snap *snapshot.Snapshot) kept {
		k := kept{snap: snap, procs: slices.Clone(snap.Processes)}
		for _, d := range snap.Devices {
			k.samples = append(k.samples, slices.Clone(d.ProcessSamples))
		}
		return k
	}
	// Until GPU 1's first (slow) read has completed.
	testenv.Eventually(t, 30*time.Second, func() error {
		if d := readBy(t, r, 30*time.Millisecond).Devices[1]; !d.Up {
			return fmt.Errorf("GPU 1 down (%s)", d.DownReason)
		}
		return nil
	})
	var prev *kept
	late, newer := 0, 0
	var lastAge time.Duration
	// Reads every 10 ms, until GPU 1 was served late from three of its
	// readings (a slow read completed, then the next one, then another).
	testenv.Eventually(t, 60*time.Second, func() error {
		snap := readBy(t, r, 30*time.Millisecond)
		if prev != nil {
			if !reflect.DeepEqual(prev.snap.Processes, prev.procs) {
				t.Fatal("the previous snapshot's processes changed")
			}
			for i, d := range prev.snap.Devices {
				if !slices.Equal(d.ProcessSamples, prev.samples[i]) {
					t.Fatalf("the previous snapshot's GPU %d samples changed", i)
				}
			}
		}
		k := keep(snap)
		prev = &k
		d := snap.Devices[1]
		if !d.Up {
			t.Fatalf("GPU 1 down (%s) though its reads complete", d.DownReason)
		}
		for _, p := range snap.Processes {
			if p.GPU == 1 && p.GPUUUID != d.UUID {
				t.Fatalf("GPU 1's reading lists a process of %s", p.GPUUUID)
			}
		}
		if d.ReadingAge > 30*time.Millisecond {
			late++
			if d.ReadingAge < lastAge {
				newer++
			}
			lastAge = d.ReadingAge
		}
		if newer < 3 {
			return fmt.Errorf("GPU 1 served late %d times, from %d newer readings", late, newer)
		}
		return nil
	})
	t.Logf("GPU 1 served late %d times, from %d newer readings", late, newer)
}

// The MIG instances of the accounting's reader take turns in two buffers
// too: a snapshot's instances stand until the read after the next one,
// each read's are its own (an instance's memory moves when a process
// starts in it), and nothing of an earlier read is left in them.
func TestAccountingReadersMIGInstancesStandUntilTheReadAfterNext(t *testing.T) {
	s := newSim(t, sim.Config{Profile: "dgx-h100", Privileged: true, Processes: []sim.ProcessSpec{
		{GPU: 7, PID: 701, UsedMemoryBytes: 1 << 30, SMUtilization: 0.6, GPUInstance: new(1), ComputeInstance: new(0)},
		{GPU: 7, PID: 702, UsedMemoryBytes: 2 << 30, GPUInstance: new(5), ComputeInstance: new(0), Start: durationPtr(5 * time.Second)},
	}}, 0)
	r := newModeReader(t, s, Options{Groups: groups(snapshot.GroupMIG, snapshot.GroupProcesses), Now: s.Now}, readMode{processSamples: true})
	var prev *snapshot.Snapshot
	var prevCopy []snapshot.MIGInstance
	var used []uint64
	for e := 2 * time.Second; e <= 10*time.Second; e += 2 * time.Second {
		s.SetElapsed(e)
		snap, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		noGroupErrors(t, snap)
		migs := snap.Devices[7].MIGInstances
		if len(migs) == 0 {
			t.Fatalf("at %s: no MIG instances on GPU 7", e)
		}
		var sum uint64
		for _, m := range migs {
			if m.UUID == "" || m.Profile == "" || !m.GPUInstanceProfileID.Valid {
				t.Errorf("at %s: instance %+v incomplete", e, m)
			}
			sum += m.MemoryUsed.Value
		}
		used = append(used, sum)
		if prev != nil && !reflect.DeepEqual(prev.Devices[7].MIGInstances, prevCopy) {
			t.Errorf("at %s: the previous snapshot's MIG instances changed", e)
		}
		prev, prevCopy = snap, slices.Clone(migs)
	}
	if used[0] >= used[len(used)-1] {
		t.Errorf("MIG memory used per read %v: want it to grow when PID 702 starts at 5 s", used)
	}
}
