package exporter

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/labelvalue"
)

// TestHugeOwnerNamesAreBounded: owner names come from runtimes, kubelets
// and Slurm; a 900 KB container name used to become a 900 KB label, which
// Prometheus's label_value_length_limit rejects with the whole scrape.
func TestHugeOwnerNamesAreBounded(t *testing.T) {
	huge := strings.Repeat("c", 900<<10)
	s := fullSnapshot(2, 0)
	for i := range s.Processes {
		s.Processes[i].Owner.Container.Name = huge + string(rune('a'+i%2))
		s.Processes[i].Owner.Pod.Name = huge
		s.Processes[i].Owner.Command = huge
	}
	for i := range s.Allocations {
		s.Allocations[i].Pod.Name, s.Allocations[i].Slurm.Account = huge, huge
	}
	e := newExporter(t, s, Options{Metrics: allOn, PIDLabels: true})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		truncated := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if len(lp.GetValue()) > labelvalue.MaxBytes {
						t.Fatalf("%s{%s=...} is %d bytes long", mf.GetName(), lp.GetName(), len(lp.GetValue()))
					}
					if labelvalue.Truncated(lp.GetValue()) {
						truncated++
					}
				}
			}
		}
		if truncated == 0 {
			t.Error("no label value is marked as truncated")
		}
	})
}
