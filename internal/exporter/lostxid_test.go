package exporter

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestLostGPUKeepsItsXIDSeries: XID 79 says a GPU fell off the bus; the
// GPU is lost right after. Its XID counters used to vanish with it, so an
// alert evaluated after the loss never saw the XID.
func TestLostGPUKeepsItsXIDSeries(t *testing.T) {
	s := fullSnapshot(2, 0)
	lost := snapshot.Device{Index: 0, UUID: s.Devices[0].UUID, DownReason: "lost",
		XIDErrors: []snapshot.XIDCount{{XID: 79, Count: 1}}}
	s.Devices[0] = lost
	e := newExporter(t, s, Options{})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		got := series(mfs)
		upKey := `gpu_up{gpu="0",uuid="` + lost.UUID + `"}`
		if v, ok := got[upKey]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", upKey, v, ok)
		}
		xidKey := `gpu_xid_errors_total{gpu="0",uuid="` + lost.UUID + `",xid="79"}`
		if v, ok := got[xidKey]; !ok || v != 1 {
			t.Errorf("%s = %v (present %v), want 1: the lost GPU's XID series vanished", xidKey, v, ok)
		}
		for k := range got {
			if strings.HasPrefix(k, "gpu_temperature_celsius{gpu=\"0\"") {
				t.Errorf("a lost GPU still reports readings: %s", k)
			}
		}
	})
}
