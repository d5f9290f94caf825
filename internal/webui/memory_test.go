package webui

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// fullHistory records a full day at the most samples --ui.history and
// --ui.interval allow (86 400, at 1 s) of a DGX-like host: 8 GPUs, one
// process of each of owners owners on each GPU in turn. A collection is
// recorded every step seconds (1 for every one); memory does not depend
// on it, as each series holds a fixed number of buckets. It returns the
// heap the recorder holds.
func fullHistory(tb testing.TB, owners int, step time.Duration) (*Recorder, uint64) {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := newTestRecorder(tb, &fakeSource{}, time.Second, maxSamples*time.Second)
	s := &snapshot.Snapshot{}
	for i := range 8 {
		s.Devices = append(s.Devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Up: true,
			Utilization: snapshot.Utilization{GPU: snapshot.Some(0.5)}, Memory: snapshot.Memory{Used: snapshot.Some[uint64](1 << 30)},
			Power: snapshot.Power{Usage: snapshot.Some(300.0)}, Temperature: snapshot.Temperature{GPU: snapshot.Some(50.0)}})
	}
	for i := range owners {
		s.Processes = append(s.Processes, snapshot.Process{GPU: i % 8, PID: uint32(i), UsedMemory: snapshot.Some[uint64](1 << 30),
			SMUtilization: snapshot.Some(0.3), Owner: snapshot.Owner{Slurm: snapshot.SlurmJob{JobID: strconv.Itoa(4000 + i)}}})
	}
	start := time.Unix(1_700_000_000, 0)
	for at := time.Duration(0); at < maxSamples*time.Second; at += step {
		s.Time = start.Add(at)
		rec.Record(s, nil)
	}
	rec.latest = nil // the snapshot is the pipeline's, not the history's
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(rec)
	return rec, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}

// TestHistoryMemoryBound: 8 GPUs and the most owners (64) over the
// longest window hold under 4 MiB. Memory is deterministic here
// (fixed-size rings), unlike time.
func TestHistoryMemoryBound(t *testing.T) {
	rec, heap := fullHistory(t, MaxOwners, 29*time.Second)
	h := rec.History()
	if len(h.GPUs) != 8 || len(h.Owners) != MaxOwners || len(h.GPUs[0].TimeMilli) < 590 || len(h.Owners[0].TimeMilli) < 590 {
		t.Fatalf("history not full: %d GPUs, %d owners, %d points", len(h.GPUs), len(h.Owners), len(h.GPUs[0].TimeMilli))
	}
	if heap > 4<<20 {
		t.Errorf("history of 8 GPUs and 64 owners over a day at 1 s holds %.1f MiB; budget 4 MiB", float64(heap)/(1<<20))
	}
	t.Logf("history heap: %.2f MiB", float64(heap)/(1<<20))
}

// BenchmarkHistoryJSON is the cost of serving /api/v1/history at the
// maximum setting (86 400 samples: a day at 1 s) for 8 GPUs and 64
// owners: the whole history (what a page loads once), and ?since= the
// previous collection (what an open page asks every interval). The
// history is encoded at every iteration, as after each collection.
func BenchmarkHistoryJSON(b *testing.B) {
	rec, heap := fullHistory(b, MaxOwners, time.Second)
	b.ReportMetric(float64(heap)/(1<<20), "MiB-held")
	full, err := rec.HistoryJSON(-1)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec.historyJSON = nil // encode anew, as after a collection
			if _, err := rec.HistoryJSON(-1); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(full)), "bytes")
	})
	since := *rec.History().NewestMilli - 1000
	part, _ := rec.HistoryJSON(since)
	b.Run("since", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rec.HistoryJSON(since); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(part)), "bytes")
	})
}

// BenchmarkRecord is the cost of recording one collection of 8 GPUs and
// 64 owners at the maximum window.
func BenchmarkRecord(b *testing.B) {
	rec, _ := fullHistory(b, MaxOwners, 600*time.Second)
	snap := &snapshot.Snapshot{}
	for i := range 8 {
		snap.Devices = append(snap.Devices, snapshot.Device{Index: i, Up: true, Utilization: snapshot.Utilization{GPU: snapshot.Some(0.5)}})
	}
	for i := range MaxOwners {
		snap.Processes = append(snap.Processes, snapshot.Process{GPU: i % 8, UsedMemory: snapshot.Some[uint64](1 << 30),
			Owner: snapshot.Owner{Slurm: snapshot.SlurmJob{JobID: strconv.Itoa(4000 + i)}}})
	}
	at := time.Unix(1_700_100_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Second)
		snap.Time = at
		rec.Record(snap, nil)
	}
}
