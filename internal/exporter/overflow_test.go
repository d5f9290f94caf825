package exporter

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The per-owner sum of process memory is checked for
// overflow. Two processes of alice that each claim 2^63 bytes used to sum
// to 0 bytes; the owner's memory series is left out instead, and the
// other owners' are kept.
func TestProcessMemorySumOverflowLeavesTheSeriesOut(t *testing.T) {
	snap := fullSnapshot(1, 0)
	var alice int
	for i := range snap.Processes {
		if snap.Processes[i].Owner.User == "alice" {
			snap.Processes[i].UsedMemory = someU(1 << 63)
			alice++
		}
	}
	if alice < 2 {
		t.Fatalf("the fixture has %d processes of alice, want 2 or more", alice)
	}
	e := newExporter(t, snap, Options{})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		var bob bool
		for key := range s {
			if !strings.HasPrefix(key, "gpu_process_memory_used_bytes{") {
				continue
			}
			if strings.Contains(key, `user="alice"`) {
				t.Errorf("%s = %v: an overflowed sum exported", key, s[key])
			}
			bob = bob || strings.Contains(key, `user="bob"`)
		}
		if !bob {
			t.Error("the other owners' memory series are gone too")
		}
	})
}
