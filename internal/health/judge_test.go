package health

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

var t0 = time.Date(2026, 12, 2, 12, 3, 4, 0, time.UTC)

// host is a snapshot source: n healthy GPUs with every reading the checks use.
type host struct {
	now     time.Time
	devices []snapshot.Device
}

func newHost(n int) *host {
	h := &host{now: t0}
	for i := range n {
		d := snapshot.Device{Index: i, UUID: "GPU-" + string(rune('a'+i)), Up: true}
		d.ECC.VolatileUncorrected = snapshot.Some[uint64](0)
		d.ECC.RemappedRowsFailure = snapshot.Some(false)
		d.ECC.RemappedRowsPending = snapshot.Some(false)
		d.NVLinks = []snapshot.NVLink{{Link: 0, Active: true}, {Link: 1, Active: true}}
		d.ClockEvents = []snapshot.ClockEvent{{Reason: "hw_slowdown"}, {Reason: "sw_power_cap", Active: true}}
		d.XIDEvents = snapshot.Some[uint64](0)
		h.devices = append(h.devices, d)
	}
	return h
}

// snap is the host's reading after d has passed.
func (h *host) snap(d time.Duration) *snapshot.Snapshot {
	h.now = h.now.Add(d)
	devs := make([]snapshot.Device, len(h.devices))
	copy(devs, h.devices)
	return &snapshot.Snapshot{Time: h.now, Devices: devs}
}

func (h *host) xid(gpu int, code uint64) {
	d := &h.devices[gpu]
	for i := range d.XIDErrors {
		if d.XIDErrors[i].XID == code {
			d.XIDErrors[i].Count++
			return
		}
	}
	d.XIDErrors = append(d.XIDErrors, snapshot.XIDCount{XID: code, Count: 1})
}

func check(t *testing.T, g snapshot.GPUHealth, name string) snapshot.HealthCheck {
	t.Helper()
	for _, c := range g.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("GPU %d has no check %s: %+v", g.GPU, name, g.Checks)
	return snapshot.HealthCheck{}
}

func wantStatus(t *testing.T, h *snapshot.Health, gpu int, status, reason string) {
	t.Helper()
	g := h.GPUs[gpu]
	if g.Status != status || !strings.Contains(g.Reason, reason) {
		t.Fatalf("GPU %d: %s %q, want %s containing %q", gpu, g.Status, g.Reason, status, reason)
	}
}

func TestHealthyHost(t *testing.T) {
	j := NewJudge(DefaultPolicy())
	h := j.Judge(newHost(2).snap(0))
	if h.Status != snapshot.HealthOK || h.Reason != "" || len(h.GPUs) != 2 {
		t.Fatalf("health = %+v", h)
	}
	var names []string
	for _, c := range h.GPUs[0].Checks {
		if c.Status != snapshot.HealthOK || c.Reason != "" || !c.Since.IsZero() {
			t.Errorf("check %+v on a healthy GPU", c)
		}
		names = append(names, c.Name)
	}
	want := "gpu_lost responding xid ecc_uncorrectable row_remap_failure row_remap_pending nvlink_down hw_slowdown"
	if strings.Join(names, " ") != want {
		t.Errorf("checks = %s, want %s", strings.Join(names, " "), want)
	}
	if len(h.Node) != 1 || h.Node[0].Name != CheckGPUCount || h.Node[0].Status != snapshot.HealthOK {
		t.Errorf("node = %+v", h.Node)
	}
}

// TestAbsentReadingsAreNoCheck: a check whose reading is absent is left
// out, not passed.
func TestAbsentReadingsAreNoCheck(t *testing.T) {
	j := NewJudge(DefaultPolicy())
	s := &snapshot.Snapshot{Time: t0, Devices: []snapshot.Device{{Index: 0, UUID: "GPU-x", Up: true}}}
	g := j.Judge(s).GPUs[0]
	for _, c := range g.Checks {
		switch c.Name {
		case CheckGPULost, CheckResponding, CheckXID:
		default:
			t.Errorf("check %s without its reading", c.Name)
		}
	}
}

func TestXIDFailsUntilReset(t *testing.T) {
	h := newHost(4)
	j := NewJudge(DefaultPolicy())
	j.Judge(h.snap(0))
	h.xid(2, 79)
	v := j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 2, snapshot.HealthFail, "GPU 2 (GPU-c): XID 79 (at 2026-12-02T12:04:04Z): GPU has fallen off the bus; drain the node and reboot it")
	if v.Status != snapshot.HealthFail || !strings.HasPrefix(v.Reason, "GPU 2 ") {
		t.Errorf("node = %s %q", v.Status, v.Reason)
	}
	if c := check(t, v.GPUs[2], CheckXID); !c.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("since = %s", c.Since)
	}
	wantStatus(t, v, 1, snapshot.HealthOK, "")
	// It is remembered: the count does not grow, the verdict stays.
	v = j.Judge(h.snap(time.Hour))
	wantStatus(t, v, 2, snapshot.HealthFail, "XID 79 (at 2026-12-02T12:04:04Z)")
	// A second one, and an application XID beside it.
	h.xid(2, 79)
	h.xid(2, 13)
	v = j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 2, snapshot.HealthFail, "XID 79 (2 times, last at 2026-12-02T13:05:04Z)")
	if strings.Contains(v.GPUs[2].Reason, "XID 13") || strings.Contains(v.GPUs[2].Reason, "also XID") {
		t.Errorf("an application XID is named: %q", v.GPUs[2].Reason)
	}
	// The GPU drops out (a reset) and answers again: cleared.
	h.devices[2].Up, h.devices[2].DownReason = false, "gpu_is_lost"
	v = j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 2, snapshot.HealthFail, "lost (gpu_is_lost)")
	if !strings.Contains(v.GPUs[2].Reason, "(also: xid)") {
		t.Errorf("reason = %q, want the XID named too", v.GPUs[2].Reason)
	}
	h.devices[2].Up, h.devices[2].DownReason = true, ""
	v = j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 2, snapshot.HealthOK, "")
	// The watcher's counts do not go back: only a new event counts.
	h.xid(2, 48)
	v = j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 2, snapshot.HealthFail, "XID 48 (at 2026-12-02T13:08:04Z): double-bit ECC error")
	if strings.Contains(v.GPUs[2].Reason, "79") {
		t.Errorf("the XID before the reset is still named: %q", v.GPUs[2].Reason)
	}
}

func TestXIDClasses(t *testing.T) {
	h := newHost(3)
	j := NewJudge(DefaultPolicy())
	h.xid(0, 13) // application
	h.xid(1, 555)
	h.xid(2, 31)
	h.xid(2, 92)
	v := j.Judge(h.snap(0))
	wantStatus(t, v, 0, snapshot.HealthOK, "")
	wantStatus(t, v, 1, snapshot.HealthWarn, "XID 555 (at 2026-12-02T12:03:04Z): not in gpuwatch's XID table; look the code up in NVIDIA's XID catalog")
	wantStatus(t, v, 2, snapshot.HealthWarn, "XID 92")
	if v.Status != snapshot.HealthWarn {
		t.Errorf("node = %s", v.Status)
	}
	// A policy that ignores 555 and fails 13.
	p, err := ParsePolicy([]byte("xid: {ignore: [555], fail: [13]}\n"), "p")
	if err != nil {
		t.Fatal(err)
	}
	v = NewJudge(p).Judge(h.snap(0))
	wantStatus(t, v, 0, snapshot.HealthFail, "XID 13")
	wantStatus(t, v, 1, snapshot.HealthOK, "")
}

func TestRecordedXIDs(t *testing.T) {
	h := newHost(2)
	j := NewJudge(DefaultPolicy())
	before := t0.Add(-time.Hour)
	j.RecordXID("GPU-b", 119, before)
	j.RecordXID("GPU-b", 119, before.Add(time.Minute))
	v := j.Judge(h.snap(0))
	wantStatus(t, v, 1, snapshot.HealthFail, "XID 119 (2 times, last at 2026-12-02T11:04:04Z): GSP firmware RPC timeout")
	if c := check(t, v.GPUs[1], CheckXID); !c.Since.Equal(before) {
		t.Errorf("since = %s, want %s", c.Since, before)
	}
	// The watcher's own count is not confused with the logged ones.
	h.xid(1, 119)
	v = j.Judge(h.snap(time.Minute))
	wantStatus(t, v, 1, snapshot.HealthFail, "XID 119 (3 times, last at 2026-12-02T12:04:04Z)")
}

// TestSilentGPUIsUnknownThenFails: a GPU that does not answer is unknown,
// not failed, until the unresponsive window has passed.
func TestSilentGPUIsUnknownThenFails(t *testing.T) {
	h := newHost(2)
	j := NewJudge(DefaultPolicy())
	j.Judge(h.snap(0))
	h.devices[0] = snapshot.Device{Index: 0, UUID: "GPU-a", DownReason: "not_answering"}
	v := j.Judge(h.snap(time.Second))
	wantStatus(t, v, 0, snapshot.HealthUnknown, "GPU 0 (GPU-a): did not answer in time")
	if v.Status != snapshot.HealthUnknown {
		t.Errorf("node = %s", v.Status)
	}
	v = j.Judge(h.snap(DefaultUnresponsiveWindow - time.Second))
	wantStatus(t, v, 0, snapshot.HealthUnknown, "did not answer")
	v = j.Judge(h.snap(time.Second))
	wantStatus(t, v, 0, snapshot.HealthFail, "has not answered for 5m0s; reset the GPU or reboot the node")
	h.devices[0] = newHost(1).devices[0]
	v = j.Judge(h.snap(time.Second))
	wantStatus(t, v, 0, snapshot.HealthOK, "")
}

func TestMemoryChecks(t *testing.T) {
	cases := []struct {
		name, check, reason string
		set                 func(*snapshot.ECC)
	}{
		{"uncorrectable", CheckECCUncorrectable, "3 uncorrectable ECC error(s) since the driver loaded", func(e *snapshot.ECC) { e.VolatileUncorrected = snapshot.Some[uint64](3) }},
		{"remap failure", CheckRowRemapFailure, "row remapping failed", func(e *snapshot.ECC) { e.RemappedRowsFailure = snapshot.Some(true) }},
		{"remap pending", CheckRowRemapPending, "waits for a GPU reset", func(e *snapshot.ECC) { e.RemappedRowsPending = snapshot.Some(true) }},
		{"retired pending", CheckRetiredPagesPending, "waits for a driver reload", func(e *snapshot.ECC) { e.RetiredPagesPending = snapshot.Some(true) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(1)
			j := NewJudge(DefaultPolicy())
			j.Judge(h.snap(0))
			saved := h.devices[0].ECC
			c.set(&h.devices[0].ECC)
			v := j.Judge(h.snap(time.Minute))
			wantStatus(t, v, 0, snapshot.HealthFail, c.reason)
			if got := check(t, v.GPUs[0], c.check); got.Status != snapshot.HealthFail || !got.Since.Equal(t0.Add(time.Minute)) {
				t.Errorf("check = %+v", got)
			}
			// Remembered while it holds, with its first time.
			v = j.Judge(h.snap(time.Minute))
			if got := check(t, v.GPUs[0], c.check); !got.Since.Equal(t0.Add(time.Minute)) {
				t.Errorf("since = %s", got.Since)
			}
			// A policy that turns the check off.
			p, err := ParsePolicy([]byte("checks: {"+c.check+": off}\n"), "p")
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, NewJudge(p).Judge(h.snap(0)), 0, snapshot.HealthOK, "")
			// Cleared with its condition.
			h.devices[0].ECC = saved
			wantStatus(t, j.Judge(h.snap(time.Minute)), 0, snapshot.HealthOK, "")
		})
	}
}

func TestNVLinkDown(t *testing.T) {
	h := newHost(1)
	h.devices[0].NVLinks = []snapshot.NVLink{{Link: 0, Active: true}, {Link: 1}, {Link: 2, Active: true}}
	j := NewJudge(DefaultPolicy())
	wantStatus(t, j.Judge(h.snap(0)), 0, snapshot.HealthOK, "") // link 1 never up: not a fault
	h.devices[0].NVLinks = []snapshot.NVLink{{Link: 0}, {Link: 1}, {Link: 2}}
	wantStatus(t, j.Judge(h.snap(time.Second)), 0, snapshot.HealthFail, "NVLink 0, 2 down after being up")
	h.devices[0].NVLinks = []snapshot.NVLink{{Link: 0, Active: true}, {Link: 1}, {Link: 2, Active: true}}
	wantStatus(t, j.Judge(h.snap(time.Second)), 0, snapshot.HealthOK, "")
}

func TestHWSlowdownNeedsTheWindow(t *testing.T) {
	h := newHost(1)
	j := NewJudge(DefaultPolicy())
	h.devices[0].ClockEvents = []snapshot.ClockEvent{{Reason: "hw_thermal_slowdown", Active: true}}
	wantStatus(t, j.Judge(h.snap(0)), 0, snapshot.HealthOK, "")
	wantStatus(t, j.Judge(h.snap(DefaultSlowdownWindow-time.Second)), 0, snapshot.HealthOK, "")
	v := j.Judge(h.snap(time.Second))
	wantStatus(t, v, 0, snapshot.HealthWarn, "hardware slowdown (hw_thermal_slowdown) for 5m0s; check cooling and power")
	if c := check(t, v.GPUs[0], CheckHWSlowdown); !c.Since.Equal(t0) {
		t.Errorf("since = %s", c.Since)
	}
	// A break in the run starts the window again.
	h.devices[0].ClockEvents = []snapshot.ClockEvent{{Reason: "hw_thermal_slowdown"}}
	wantStatus(t, j.Judge(h.snap(time.Second)), 0, snapshot.HealthOK, "")
	h.devices[0].ClockEvents = []snapshot.ClockEvent{{Reason: "hw_slowdown", Active: true}}
	wantStatus(t, j.Judge(h.snap(time.Minute)), 0, snapshot.HealthOK, "")
}

func TestGPUCount(t *testing.T) {
	h := newHost(4)
	j := NewJudge(DefaultPolicy())
	j.Judge(h.snap(0))
	h.devices = h.devices[:3]
	v := j.Judge(h.snap(time.Minute))
	if v.Status != snapshot.HealthFail || !strings.Contains(v.Reason, "node: 3 GPU(s) found, 4 expected") {
		t.Fatalf("node = %s %q", v.Status, v.Reason)
	}
	// An expected count from the policy applies from the first snapshot.
	p, _ := DefaultPolicy().WithExpectGPUs(8)
	v = NewJudge(p).Judge(h.snap(0))
	if v.Status != snapshot.HealthFail || !strings.Contains(v.Reason, "3 GPU(s) found, 8 expected") {
		t.Fatalf("node = %s %q", v.Status, v.Reason)
	}
	// No GPU at the first snapshot sets no expectation.
	j = NewJudge(DefaultPolicy())
	if v := j.Judge(&snapshot.Snapshot{Time: t0}); v.Status != snapshot.HealthOK || len(v.Node) != 0 {
		t.Errorf("no GPU = %+v", v)
	}
}

// TestEnrich: the judge is a pipeline enricher that sets Snapshot.Health.
func TestEnrich(t *testing.T) {
	s := newHost(1).snap(0)
	NewJudge(DefaultPolicy()).Enrich(t.Context(), s)
	if s.Health == nil || s.Health.Status != snapshot.HealthOK {
		t.Fatalf("health = %+v", s.Health)
	}
}
