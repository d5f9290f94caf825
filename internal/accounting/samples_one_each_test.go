package accounting

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// oneEachScenario is a random run of reads of one GPU whose driver gives
// one sample per process: processes come and go (more than the slots keep,
// so they are pruned), some reads are lists (one with an MPS server),
// some are served again or carry samples read before. With double, one
// read gives a process two samples (a buffered driver from then on).
func oneEachScenario(seed uint64, double bool) []*snapshot.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	var out []*snapshot.Snapshot
	alive := map[uint32]bool{}
	next := uint32(1000)
	var last []snapshot.ProcessSample
	for tick := range 120 {
		now := start.Add(time.Duration(tick) * 2 * time.Second)
		for range rng.IntN(6) {
			alive[next] = true
			next++
		}
		for pid := range alive {
			if rng.IntN(25) == 0 {
				delete(alive, pid)
			}
		}
		pids := make([]uint32, 0, len(alive))
		for pid := range alive {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		dev := snapshot.Device{Index: 0, UUID: "GPU-1", Up: true, ProcessesNotListed: tick%5 != 0}
		s := &snapshot.Snapshot{Time: now}
		switch {
		case tick%17 == 9 && last != nil: // served again
			dev.ProcessSamples = last
		default:
			var samples []snapshot.ProcessSample
			for _, pid := range pids {
				if rng.IntN(4) == 0 {
					continue // idle this read
				}
				at := now.Add(-time.Duration(rng.IntN(1900)) * time.Millisecond)
				if rng.IntN(40) == 0 {
					at = now.Add(-time.Hour) // read before
				}
				samples = append(samples, snapshot.ProcessSample{PID: pid, TimeMicros: uint64(at.UnixMicro()), SM: float64(rng.IntN(101)) / 100})
			}
			if double && tick == 61 && len(samples) > 0 {
				samples[0].TimeMicros = uint64(now.Add(-100 * time.Millisecond).UnixMicro())
				samples = append(samples, snapshot.ProcessSample{PID: samples[0].PID, TimeMicros: samples[0].TimeMicros + 1000, SM: 0.3})
			}
			dev.ProcessSamples, last = samples, samples
		}
		if !dev.ProcessesNotListed {
			for i, pid := range pids {
				p := snapshot.Process{GPU: 0, GPUUUID: "GPU-1", PID: pid, Owner: snapshot.Owner{User: fmt.Sprintf("u%d", pid%7)}}
				if i == 0 && tick%10 == 0 {
					p.Owner.Command = "/usr/bin/nvidia-cuda-mps-server"
				}
				s.Processes = append(s.Processes, p)
			}
		}
		s.Devices = []snapshot.Device{dev}
		out = append(out, s)
	}
	return out
}

// The one-sample-each path integrates as smFromSamples' general path does,
// to the bit, whatever the reads (random runs, a buffered read among them).
func TestOneSampleEachIntegratesAsTheGeneralPath(t *testing.T) {
	run := func(reads []*snapshot.Snapshot, oneEach bool) (*snapshot.Accounting, *deviceTrack) {
		oneSampleEachPath = oneEach
		defer func() { oneSampleEachPath = true }()
		a, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range reads {
			a.Observe(s)
		}
		return a.Totals(), a.st.devs["GPU-1"]
	}
	for seed := range uint64(20) {
		for _, double := range []bool{false, true} {
			reads := oneEachScenario(seed, double)
			want, wantTrack := run(reads, false)
			got, gotTrack := run(reads, true)
			if len(got.Owners) != len(want.Owners) || len(got.Owners) == 0 {
				t.Fatalf("seed %d: %d owners, want %d (not 0)", seed, len(got.Owners), len(want.Owners))
			}
			for i := range want.Owners {
				g, w := got.Owners[i], want.Owners[i]
				if g.Key != w.Key || g.SMSeconds != w.SMSeconds || g.Seconds != w.Seconds {
					t.Errorf("seed %d double %v: owner %d: %+v %v %v; general path %+v %v %v", seed, double, i, g.Key, g.SMSeconds, g.Seconds, w.Key, w.SMSeconds, w.Seconds)
				}
			}
			if gotTrack.period != wantTrack.period || gotTrack.newest != wantTrack.newest || gotTrack.buffered != wantTrack.buffered || gotTrack.servedAgain != wantTrack.servedAgain {
				t.Errorf("seed %d double %v: period %v newest %d buffered %v served again %v; general path %v %d %v %v", seed, double,
					gotTrack.period, gotTrack.newest, gotTrack.buffered, gotTrack.servedAgain, wantTrack.period, wantTrack.newest, wantTrack.buffered, wantTrack.servedAgain)
			}
			if double != gotTrack.buffered {
				t.Errorf("seed %d: buffered %v after a read with a process sampled twice %v", seed, gotTrack.buffered, double)
			}
		}
	}
}
