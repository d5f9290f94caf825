package exporter

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

func TestDriverSeries(t *testing.T) {
	snap := fullSnapshot(1, 0)
	snap.Driver.Limits = append(snap.Driver.Limits, snapshot.DriverLimit{Group: "gpm", Reason: "unavailable: no GPM, GPM per MIG instance"})
	e := newExporter(t, snap, Options{})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		for key, want := range map[string]float64{
			`gpuwatch_driver_info{branch="R550",library="/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.90.07",version="550.90.07"}`: 1,
			`gpuwatch_driver_limited_group{group="pcie",reason="partial: no PCIe traffic counters"}`:                                1,
			`gpuwatch_driver_limited_group{group="gpm",reason="unavailable: no GPM, GPM per MIG instance"}`:                         1,
			`gpu_power_limit_min_watts{gpu="0",uuid="` + snap.Devices[0].UUID + `"}`:                                                200,
			`gpu_mig_mode_pending{gpu="0",uuid="` + snap.Devices[0].UUID + `"}`:                                                     0,
		} {
			if got, ok := s[key]; !ok || got != want {
				t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
			}
		}
		n := 0
		for key := range s {
			if strings.HasPrefix(key, "gpuwatch_driver_limited_group{") {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%d limited-group series, want 2", n)
		}
	})

	// A driver that limits nothing has no limited-group series.
	snap = fullSnapshot(1, 0)
	snap.Driver.Limits = nil
	for key := range series(gather(t, newExporter(t, snap, Options{}))) {
		if strings.HasPrefix(key, "gpuwatch_driver_limited_group") {
			t.Errorf("unexpected %s", key)
		}
	}
}

// A driver that cannot list processes has no gpu_processes count at all,
// rather than a count of 0 that would read as "idle".
func TestNoProcessCountWhenTheDriverCannotListProcesses(t *testing.T) {
	snap := fullSnapshot(1, 0)
	snap.Processes = nil
	snap.Driver.Limits = []snapshot.DriverLimit{{Group: snapshot.GroupProcesses, Unavailable: true, Reason: "unavailable: no compute processes"}}
	for key := range series(gather(t, newExporter(t, snap, Options{}))) {
		if strings.HasPrefix(key, "gpu_processes{") {
			t.Errorf("unexpected %s", key)
		}
	}
	snap.Driver.Limits = nil
	if _, ok := series(gather(t, newExporter(t, snap, Options{})))[`gpu_processes{gpu="0",uuid="`+snap.Devices[0].UUID+`"}`]; !ok {
		t.Errorf("no gpu_processes with a driver that lists processes")
	}
}
