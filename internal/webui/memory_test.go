package webui

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// fullHistory records an hour at 1 s of a DGX-like host: 8 GPUs, 16
// processes of 8 owners, and returns the heap the recorder holds.
func fullHistory(tb testing.TB) (*Recorder, uint64) {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := NewRecorder(&fakeSource{}, time.Second, time.Hour)
	s := &snapshot.Snapshot{}
	for i := range 8 {
		s.Devices = append(s.Devices, snapshot.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Up: true,
			Utilization: snapshot.Utilization{GPU: snapshot.Some(0.5)}, Memory: snapshot.Memory{Used: snapshot.Some[uint64](1 << 30)},
			Power: snapshot.Power{Usage: snapshot.Some(300.0)}, Temperature: snapshot.Temperature{GPU: snapshot.Some(50.0)}})
	}
	for i := range 16 {
		s.Processes = append(s.Processes, snapshot.Process{GPU: i % 8, PID: uint32(i), UsedMemory: snapshot.Some[uint64](1 << 30),
			SMUtilization: snapshot.Some(0.3), Owner: snapshot.Owner{User: fmt.Sprintf("user%d", i%8)}})
	}
	start := time.Unix(1_700_000_000, 0)
	for i := range 3600 {
		s.Time = start.Add(time.Duration(i) * time.Second)
		rec.Record(s, nil)
	}
	rec.latest = nil // the snapshot is the pipeline's, not the history's
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(rec)
	return rec, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}

// TestHistoryMemoryBound: the budget, 8 GPUs × 1 h at 1 s under
// 20 MiB. Memory is deterministic here (fixed-size rings), unlike time.
func TestHistoryMemoryBound(t *testing.T) {
	rec, heap := fullHistory(t)
	h := rec.History()
	if len(h.GPUs) != 8 || len(h.GPUs[0].TimeMilli) != 3600 || len(h.Owners) != 8 || len(h.Owners[0].TimeMilli) != 3600 {
		t.Fatalf("history not full: %d GPUs, %d owners", len(h.GPUs), len(h.Owners))
	}
	if heap > 20<<20 {
		t.Errorf("history of 8 GPUs and 8 owners over 1 h at 1 s holds %.1f MiB; budget 20 MiB", float64(heap)/(1<<20))
	}
	t.Logf("history heap: %.2f MiB", float64(heap)/(1<<20))
}

// BenchmarkHistoryMemory reports the heap of a full hour at 1 s
// (8 GPUs, 8 owners) and the cost of serving /api/v1/history from it.
func BenchmarkHistoryMemory(b *testing.B) {
	rec, heap := fullHistory(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = rec.History()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-held")
}
