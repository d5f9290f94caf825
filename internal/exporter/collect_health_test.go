package exporter

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestHealthSeries: the verdicts as series, per GPU. A failed GPU is 0, an
// ok or warning one 1 (with gpu_health_warning saying which), an unknown one
// has no gpu_health_status at all; each check the GPU's readings allowed is
// a gpu_health_check_failing series.
func TestHealthSeries(t *testing.T) {
	s := fullSnapshot(4, 0)
	s.Devices[1].XIDErrors = []snapshot.XIDCount{{XID: 79, Count: 1}}
	s.Devices[2].XIDErrors = []snapshot.XIDCount{{XID: 555, Count: 1}}
	s.Devices[3] = snapshot.Device{Index: 3, UUID: s.Devices[3].UUID, DownReason: "not_answering"}
	s.Health = health.NewJudge(health.DefaultPolicy()).Judge(s)
	e := newExporter(t, s, Options{})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		status := seriesByGPU(mfs, "gpu_health_status", "")
		want := map[string]float64{"0": 1, "1": 0, "2": 1}
		if len(status) != len(want) {
			t.Errorf("gpu_health_status = %v, want %v (none for the unknown GPU 3)", status, want)
		}
		for gpu, v := range want {
			if got, ok := status[gpu]; !ok || got != v {
				t.Errorf("gpu_health_status{gpu=%s} = %v (present %v), want %v", gpu, got, ok, v)
			}
		}
		warn := seriesByGPU(mfs, "gpu_health_warning", "")
		if warn["0"] != 0 || warn["1"] != 0 || warn["2"] != 1 || len(warn) != 3 {
			t.Errorf("gpu_health_warning = %v", warn)
		}
		xid := seriesByGPU(mfs, "gpu_health_check_failing", "xid")
		if xid["0"] != 0 || xid["1"] != 1 || xid["2"] != 1 || xid["3"] != 0 {
			t.Errorf("gpu_health_check_failing{check=xid} = %v", xid)
		}
		responding := seriesByGPU(mfs, "gpu_health_check_failing", "responding")
		if responding["3"] != 1 || responding["0"] != 0 {
			t.Errorf("gpu_health_check_failing{check=responding} = %v", responding)
		}
		if ecc := seriesByGPU(mfs, "gpu_health_check_failing", "ecc_uncorrectable"); len(ecc) != 3 {
			t.Errorf("ecc_uncorrectable on %v: want the three GPUs that answered", ecc)
		}
		node := seriesByGPU(mfs, "gpuwatch_health_node_check_failing", "gpu_count")
		if v, ok := node[""]; !ok || v != 0 {
			t.Errorf("gpuwatch_health_node_check_failing{check=gpu_count} = %v", node)
		}
	})
	// Without the health stage, no health series at all.
	s.Health = nil
	both(t, newExporter(t, s, Options{}), func(t *testing.T, mfs []*dto.MetricFamily) {
		for _, mf := range mfs {
			switch mf.GetName() {
			case "gpu_health_status", "gpu_health_warning", "gpu_health_check_failing", "gpuwatch_health_node_check_failing":
				t.Errorf("%s without the health stage", mf.GetName())
			}
		}
	})
}

// seriesByGPU maps gpu label → value of the metric's series, those with
// label check=check when check is not "".
func seriesByGPU(mfs []*dto.MetricFamily, name, check string) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if check != "" && labels["check"] != check {
				continue
			}
			out[labels["gpu"]] = metricValue(m)
		}
	}
	return out
}
