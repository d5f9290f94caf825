//go:build cgo

package sim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The exporter builds one simulator per process, so what counts is the live
// heap New adds in a fresh process: its own allocations plus any
// process-wide cache it fills on first use (reflect's func layouts were
// such a cache). Live heap counts about twice in peak RSS, because Go's GC
// lets the heap grow to twice what is live.

// liveHeapProfileEnv, when set, makes TestLiveHeapChild measure that profile
// and print the result: the parent test runs it in a fresh process.
const liveHeapProfileEnv = "GPUWATCH_SIM_LIVE_HEAP_PROFILE"

// liveHeapAfterNew is the live heap, in bytes, that New(profile) adds.
func liveHeapAfterNew(tb testing.TB, profile string) uint64 {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := New(Config{Profile: profile})
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// TestLiveHeapChild is the measuring half of TestLiveHeapAfterNew; it does
// nothing unless that test started it.
func TestLiveHeapChild(t *testing.T) {
	profile := os.Getenv(liveHeapProfileEnv)
	if profile == "" {
		return
	}
	fmt.Printf("live-heap-bytes %d\n", liveHeapAfterNew(t, profile))
}

// liveHeapCeiling is the most live heap New may add in a fresh process:
// a bound the generated method sets (one func value a handle) keep with
// room, and the reflect-based safety net and the moq mocks before them
// did not (bench/RESULTS.md, "Figures moved out of code comments").
var liveHeapCeiling = map[string]uint64{
	"dgx-h100": 16 << 10,
	"large":    64 << 10,
}

// New must stay small in a fresh process (the exporter's peak RSS depends
// on it). Each profile is measured in its own process, so no earlier test
// has warmed a cache that New would otherwise fill.
func TestLiveHeapAfterNew(t *testing.T) {
	if os.Getenv(liveHeapProfileEnv) != "" {
		return
	}
	for _, profile := range []string{"dgx-h100", "large"} {
		t.Run(profile, func(t *testing.T) {
			got := childLiveHeap(t, profile)
			t.Logf("New(%s) adds %d bytes (%.1f KiB) of live heap in a fresh process", profile, got, float64(got)/1024)
			if ceiling := liveHeapCeiling[profile]; got > ceiling {
				t.Errorf("New(%s) adds %d bytes of live heap, more than %d", profile, got, ceiling)
			}
		})
	}
}

// childLiveHeap runs TestLiveHeapChild for profile in a fresh test process.
func childLiveHeap(t *testing.T, profile string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLiveHeapChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), liveHeapProfileEnv+"="+profile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "live-heap-bytes "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("child process printed %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("child process printed no measurement:\n%s", out)
	return 0
}

// BenchmarkNewLiveHeap reports the live heap of one more simulator in a
// process that has built some already (caches warm): live-B/op.
func BenchmarkNewLiveHeap(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		b.Run(profile, func(b *testing.B) {
			var total uint64
			n := 0
			for b.Loop() {
				total += liveHeapAfterNew(b, profile)
				n++
			}
			b.ReportMetric(float64(total)/float64(n), "live-B/op")
		})
	}
}
