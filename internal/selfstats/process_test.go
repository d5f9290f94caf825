package selfstats

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestProcessMetricsArePlausible(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewProcessCollector())
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if m.Counter != nil {
			got[mf.GetName()] = m.GetCounter().GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	if got["process_resident_memory_bytes"] < 1<<20 || got["process_virtual_memory_bytes"] < got["process_resident_memory_bytes"] {
		t.Errorf("memory readings implausible: %v", got)
	}
	if got["process_open_fds"] < 3 || got["process_max_fds"] < got["process_open_fds"] {
		t.Errorf("fd readings implausible: %v", got)
	}
	if got["process_start_time_seconds"] < 1.6e9 {
		t.Errorf("start time implausible: %v", got["process_start_time_seconds"])
	}
	if _, ok := got["process_cpu_seconds_total"]; !ok {
		t.Error("no CPU time")
	}
}

// The names and types must match client_golang's own process collector so
// that existing dashboards and alerts keep working.
func TestSameNamesAsClientGolang(t *testing.T) {
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	ours.MustRegister(NewProcessCollector())
	theirs.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o, _ := ours.Gather()
	th, _ := theirs.Gather()
	types := map[string]string{}
	for _, mf := range th {
		types[mf.GetName()] = mf.GetType().String()
	}
	for _, mf := range o {
		if want, ok := types[mf.GetName()]; !ok || want != mf.GetType().String() {
			t.Errorf("%s (%s) has no twin in client_golang's collector (%v)", mf.GetName(), mf.GetType(), strings.Join(keys(types), ", "))
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
