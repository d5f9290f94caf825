package health

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestFailSummary: the judge's own verdicts, summed up without times or
// counts, so that a repeated XID or a later run gives the same text.
func TestFailSummary(t *testing.T) {
	h := newHost(4)
	j := NewJudge(DefaultPolicy())
	report := func(d time.Duration) Report {
		s := h.snap(d)
		s.Health = j.Judge(s)
		return NewReport(s)
	}
	if got := report(0).FailSummary(); got != "" {
		t.Errorf("healthy host: %q, want empty", got)
	}
	h.xid(3, 79)
	h.xid(3, 13) // an application XID: never named
	first := report(time.Minute).FailSummary()
	if want := "GPU 3 XID 79 (GPU has fallen off the bus)"; first != want {
		t.Errorf("XID 79 on GPU 3: %q, want %q", first, want)
	}
	h.xid(3, 79)
	if again := report(time.Hour).FailSummary(); again != first {
		t.Errorf("after a second XID 79 an hour later: %q, want the same %q", again, first)
	}

	h.devices[1].ECC.VolatileUncorrected = snapshot.Some[uint64](2)
	h.devices[1].ECC.RemappedRowsPending = snapshot.Some(true)
	h.devices[2].Up, h.devices[2].DownReason = false, "gpu_is_lost"
	h.devices[0].ClockEvents = []snapshot.ClockEvent{{Reason: "hw_slowdown", Active: true}} // warns only
	got := report(time.Minute).FailSummary()
	want := "GPU 1 ecc_uncorrectable, row_remap_pending; GPU 2 gpu_lost; GPU 3 XID 79 (GPU has fallen off the bus)"
	if got != want {
		t.Errorf("three failed GPUs: %q, want %q", got, want)
	}

	// A GPU gone from the count fails the node.
	h.devices = h.devices[:3]
	got = report(time.Minute).FailSummary()
	if want := "GPU 1 ecc_uncorrectable, row_remap_pending; GPU 2 gpu_lost; node gpu_count"; got != want {
		t.Errorf("a GPU missing: %q, want %q", got, want)
	}
}

// TestFailSummaryIsOneLine: what a report from elsewhere (a serve's
// /api/v1/health) carries cannot add a line or a control character.
func TestFailSummaryIsOneLine(t *testing.T) {
	r := Report{Status: "fail", GPUs: []GPUReport{{GPU: 0, Status: "fail",
		Checks: []CheckReport{{Name: "xid\nReason=forged\x1b[2J", Status: "fail"}, {Name: "xid", Status: "fail", Reason: "XID 79 (at x): y"}}}}}
	if got, want := r.FailSummary(), "GPU 0 xid Reason=forged [2J, XID 79 (GPU has fallen off the bus)"; got != want {
		t.Errorf("FailSummary = %q, want %q", got, want)
	}
}
