package healthlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newWatcher(buf *bytes.Buffer, c *clock) *Watcher {
	return New(Options{
		Logger:   slog.New(slog.NewTextHandler(buf, nil)),
		Interval: time.Minute,
		Now:      c.now,
		Hints:    map[string]string{"kubelet": "--kubelet.pod-resources-socket=/nowhere"},
	})
}

func snap(devices ...snapshot.Device) *snapshot.Snapshot {
	return &snapshot.Snapshot{Devices: devices, AttributionErrors: map[string]uint64{"procfs": 0, "kubelet": 0}}
}

func up(i int) snapshot.Device {
	return snapshot.Device{Index: i, UUID: fmt.Sprint("GPU-", i), Up: true}
}
func lost(i int) snapshot.Device {
	return snapshot.Device{Index: i, UUID: fmt.Sprint("GPU-", i), DownReason: "gpu_is_lost"}
}

// lines returns the log lines written since the last call.
func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	buf.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func expect(t *testing.T, buf *bytes.Buffer, want ...string) {
	t.Helper()
	got := lines(buf)
	if len(got) != len(want) {
		t.Fatalf("log lines = %q, want %d matching %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], "level=WARN") || !strings.Contains(got[i], w) {
			t.Errorf("line %d = %q, want a warning containing %q", i, got[i], w)
		}
	}
}

func TestGPULostAndBack(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{time.Unix(0, 0)}
	w := newWatcher(&buf, c)
	w.Observe(snap(up(0), up(1)), nil)
	expect(t, &buf)
	w.Observe(snap(up(0), lost(1)), nil)
	expect(t, &buf, `msg="GPU is down" gpu=1 uuid=GPU-1 reason=gpu_is_lost`)
	w.Observe(snap(up(0), lost(1)), nil) // still down: said already
	expect(t, &buf)
	c.advance(2 * time.Minute)
	w.Observe(snap(up(0), up(1)), nil)
	expect(t, &buf, `msg="GPU is back" gpu=1 uuid=GPU-1 was=gpu_is_lost`)
}

func TestFlappingGPUIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{time.Unix(0, 0)}
	w := newWatcher(&buf, c)
	w.Observe(snap(up(0)), nil)
	for range 5 {
		c.advance(time.Second)
		w.Observe(snap(lost(0)), nil)
		c.advance(time.Second)
		w.Observe(snap(up(0)), nil)
	}
	expect(t, &buf, "GPU is down", "GPU is back")
	c.advance(time.Minute)
	w.Observe(snap(lost(0)), nil)
	expect(t, &buf, `"GPU is down" gpu=0 uuid=GPU-0 reason=gpu_is_lost repeats_held_back=4`)
}

func TestXIDWarns(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{time.Unix(0, 0)}
	w := newWatcher(&buf, c)
	d := up(2)
	w.Observe(snap(d), nil)
	expect(t, &buf)
	d.XIDErrors = []snapshot.XIDCount{{XID: 79, Count: 1}}
	w.Observe(snap(d), nil)
	expect(t, &buf, "gpu=2 uuid=GPU-2 new=1 since_start=1×79")
	w.Observe(snap(d), nil)
	expect(t, &buf)
}

func TestFailingSourceWarnsWithTheFlagToCheck(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{time.Unix(0, 0)}
	w := newWatcher(&buf, c)
	s := snap(up(0))
	s.AttributionErrors["kubelet"] = 3
	w.Observe(s, nil)
	expect(t, &buf, "owner_source=kubelet failures=3 since_start=3 check=\"--kubelet.pod-resources-socket=/nowhere\"")
	s.AttributionErrors["kubelet"] = 5
	c.advance(10 * time.Second)
	w.Observe(s, nil)
	expect(t, &buf) // within the interval
	s.AttributionErrors["kubelet"] = 6
	c.advance(time.Minute)
	w.Observe(s, nil)
	expect(t, &buf, "owner_source=kubelet failures=1 since_start=6 check=\"--kubelet.pod-resources-socket=/nowhere\" repeats_held_back=1")
}

func TestTimeouts(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{time.Unix(0, 0)}
	w := newWatcher(&buf, c)
	w.Observe(snap(up(0), snapshot.Device{Index: 1, DownReason: "not_answering"}), nil)
	expect(t, &buf, "GPU did not answer for three --collection.timeout")
	w.Observe(nil, fmt.Errorf("reading: %w", context.DeadlineExceeded))
	expect(t, &buf, "GPU collection timed out")
}

func TestDescribe(t *testing.T) {
	a, b := up(0), up(1)
	a.Info.Name, b.Info.Name = "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"
	b.Info.MIGMode = "enabled"
	s := snap(a, b, lost(2))
	s.DriverVersion = "550.90.07"
	s.Driver.Branch = "R550"
	s.Driver.Limits = []snapshot.DriverLimit{{Group: "gpm"}}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("found", Describe(s)...)
	want := `gpus=3 models="2× NVIDIA H100 80GB HBM3" driver=550.90.07 branch=R550 driver_limits=gpm mig_gpu_indexes=1 down="2 (gpu_is_lost)"`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("got %s, want %s", buf.String(), want)
	}
}
