package exporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// allOn enables every metric, default-off ones included.
var allOn = &MetricFilter{Enable: []string{"*"}}

func newExporter(t testing.TB, s *snapshot.Snapshot, opts Options) *Exporter {
	t.Helper()
	e, err := New(&fixedSource{snap: s}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// gather runs the client_golang path: Registry.Gather.
func gather(t testing.TB, c prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// textGather runs the direct path, WriteText, and parses it back.
func textGather(t testing.TB, e *Exporter) []*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	if err := e.WriteText(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return parseText(t, buf.Bytes())
}

func parseText(t testing.TB, text []byte) []*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	byName, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	var mfs []*dto.MetricFamily
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	sort.Slice(mfs, func(i, j int) bool { return mfs[i].GetName() < mfs[j].GetName() })
	return mfs
}

// series flattens families to `name{a="x",b="y"}` → value, labels sorted.
func series(mfs []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[seriesKey(mf.GetName(), m.GetLabel())] = metricValue(m)
		}
	}
	return out
}

func seriesKey(name string, lps []*dto.LabelPair) string {
	pairs := make([]string, 0, len(lps))
	for _, lp := range lps {
		pairs = append(pairs, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

func familyNames(mfs []*dto.MetricFamily) []string {
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// both runs a check on the client_golang path and on the text path.
func both(t *testing.T, e *Exporter, check func(t *testing.T, mfs []*dto.MetricFamily)) {
	t.Run("collect", func(t *testing.T) { check(t, gather(t, e)) })
	t.Run("text", func(t *testing.T) { check(t, textGather(t, e)) })
}

func TestEveryCatalogMetricIsProduced(t *testing.T) {
	for v := range DCGMVersionNames {
		for _, pid := range []bool{false, true} {
			t.Run(fmt.Sprintf("dcgm=%s/pid_labels=%v", DCGMVersion(v), pid), func(t *testing.T) {
				everyCatalogMetricIsProduced(t, Compat{Native: true, DCGM: true, DCGMVersion: DCGMVersion(v)}, pid)
			})
		}
	}
}

// everyCatalogMetricIsProduced checks every metric the schemes c select.
func everyCatalogMetricIsProduced(t *testing.T, c Compat, pid bool) {
	e := newExporter(t, fullSnapshot(8, 18), Options{Metrics: allOn, PIDLabels: pid, Compat: c})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		got := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			got[mf.GetName()] = mf
		}
		for _, m := range catalog {
			if !c.selects(m) {
				continue
			}
			mf, ok := got[m.Name]
			if !ok {
				t.Errorf("catalog metric %s not produced from the full snapshot", m.Name)
				continue
			}
			want := append([]string(nil), m.Labels...)
			if pid {
				want = append(want, m.OptInLabels...)
			}
			sort.Strings(want)
			for _, s := range mf.GetMetric() {
				var names []string
				for _, lp := range s.GetLabel() {
					names = append(names, lp.GetName())
				}
				// Labels written only with a value may be missing.
				for i, l := range m.Labels {
					if m.omitEmpty&(1<<i) != 0 && !slices.Contains(names, l) {
						names = append(names, l)
					}
				}
				sort.Strings(names)
				if !slices.Equal(names, want) {
					t.Errorf("%s has labels %v, catalog says %v", m.Name, names, want)
					break
				}
			}
			wantType := dto.MetricType_GAUGE
			if m.Type == typeCounter {
				wantType = dto.MetricType_COUNTER
			}
			if mf.GetType() != wantType {
				t.Errorf("%s has type %v, catalog says %s", m.Name, mf.GetType(), m.Type)
			}
		}
		for name := range got {
			if lookupMetric(name) == nil {
				t.Errorf("produced metric %s is not in the catalog", name)
			}
		}
	})
}

func TestDefaultsLeaveOptInMetricsOut(t *testing.T) {
	e := newExporter(t, fullSnapshot(2, 2), Options{})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		names := familyNames(mfs)
		for _, m := range catalog {
			if m.Compat != "" {
				continue // only with Options.Compat; see compat_test.go
			}
			if got := slices.Contains(names, m.Name); got != m.Default {
				t.Errorf("%s produced=%v, default=%v", m.Name, got, m.Default)
			}
		}
	})
}

func TestAbsentReadingsProduceNoSeries(t *testing.T) {
	e := newExporter(t, sparseSnapshot(), Options{Metrics: allOn})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		var gpu0 []string
		for key, v := range series(mfs) {
			if strings.Contains(key, `gpu="0"`) {
				gpu0 = append(gpu0, fmt.Sprintf("%s %g", key, v))
			}
		}
		sort.Strings(gpu0)
		u := `uuid="GPU-4090-0000"`
		owner := `compose_project="",compose_service="",container="",gpu="0",namespace="",pod="",slurm_job="",user="",` + u
		want := []string{
			`gpu_info{architecture="ada",brand="geforce",compute_capability="",compute_mode="",cuda_driver_version="12.4",driver_version="550.90.07",ecc_mode="",gpu="0",mig_mode="",name="NVIDIA GeForce RTX 4090",pci_bus_id="",persistence_mode="",serial="",` + u + `,vbios_version=""} 1`,
			`gpu_memory_total_bytes{gpu="0",` + u + `} 2.5769803776e+10`,
			`gpu_power_usage_watts{gpu="0",` + u + `} 300`,
			`gpu_process_memory_used_bytes{` + owner + `} 1.073741824e+09`,
			`gpu_processes{gpu="0",` + u + `} 1`,
			`gpu_reading_age_seconds{gpu="0",` + u + `} 0`,
			`gpu_temperature_celsius{gpu="0",` + u + `} 55`,
			`gpu_up{gpu="0",` + u + `} 1`,
			`gpu_utilization_ratio{gpu="0",` + u + `} 0.5`,
		}
		if !slices.Equal(gpu0, want) {
			t.Errorf("series of the sparse GPU:\n got %s\nwant %s", strings.Join(gpu0, "\n     "), strings.Join(want, "\n     "))
		}
	})
}

// A down GPU has gpu_up 0 and its XID counts, nothing else.
func TestDownGPUHasOnlyUpZeroAndItsXIDs(t *testing.T) {
	e := newExporter(t, sparseSnapshot(), Options{Metrics: allOn, PIDLabels: true})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		var lost []string
		for key, v := range series(mfs) {
			if strings.Contains(key, `gpu="1"`) || strings.Contains(key, "GPU-lost") {
				lost = append(lost, fmt.Sprintf("%s %g", key, v))
			}
		}
		slices.Sort(lost)
		want := []string{
			`gpu_up{gpu="1",uuid="GPU-lost-0001"} 0`,
			`gpu_xid_errors_total{gpu="1",uuid="GPU-lost-0001",xid="79"} 1`,
			`gpu_xid_events_total{gpu="1",uuid="GPU-lost-0001"} 1`,
			`gpu_xid_last_code{gpu="1",uuid="GPU-lost-0001"} 79`,
		}
		if !slices.Equal(lost, want) {
			t.Errorf("series of the lost GPU: got %v, want %v", lost, want)
		}
		// The other GPUs keep every series: the full H100 next to it.
		s := series(mfs)
		if len(s) < 100 {
			t.Errorf("only %d series in all: the healthy GPUs lost theirs too", len(s))
		}
		for key := range s {
			if strings.Contains(key, `pid="8"`) || strings.Contains(key, `pid="9"`) {
				t.Errorf("process of a lost or unknown GPU exported: %s", key)
			}
		}
	})
}

// escapingSnapshot has label values that need every kind of escaping.
func escapingSnapshot() *snapshot.Snapshot {
	s := sparseSnapshot()
	s.Devices = s.Devices[:1]
	s.Devices[0].Info.Name = "quote\" back\\slash\nnewline ünïcødé 日本"
	s.Processes = []snapshot.Process{{GPU: 0, PID: 1, UsedMemory: someU(5), Owner: snapshot.Owner{
		User: "bad\xffutf8", Command: "a\"b\\c\nd", Container: snapshot.Container{Name: "é\"\\"},
	}}}
	return s
}

func TestLabelValuesAreEscaped(t *testing.T) {
	e := newExporter(t, escapingSnapshot(), Options{PIDLabels: true})
	want := `
# HELP gpu_process_memory_used_bytes GPU memory used by the owner's processes on the GPU (summed per owner; per process with pid labels).
# TYPE gpu_process_memory_used_bytes gauge
gpu_process_memory_used_bytes{command="a\"b\\c\nd",compose_project="",compose_service="",container="é\"\\",gpu="0",namespace="",pid="1",pod="",slurm_job="",user="bad` + "\uFFFD" + `utf8",uuid="GPU-4090-0000"} 5
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "gpu_process_memory_used_bytes"); err != nil {
		t.Error(err)
	}
	// The text path escapes the same way: its output parses to the same values.
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		key := `gpu_info{architecture="ada",brand="geforce",compute_capability="",compute_mode="",cuda_driver_version="12.4",driver_version="550.90.07",ecc_mode="",gpu="0",mig_mode="",name="quote\" back\\slash\nnewline ünïcødé 日本",pci_bus_id="",persistence_mode="",serial="",uuid="GPU-4090-0000",vbios_version=""}`
		if _, ok := s[key]; !ok {
			t.Errorf("gpu_info with escaped name missing; have %v", keysWithPrefix(s, "gpu_info"))
		}
	})
	// And the exact bytes of the direct writer.
	var buf bytes.Buffer
	if err := e.WriteText(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	line := `gpu_process_memory_used_bytes{gpu="0",uuid="GPU-4090-0000",user="bad` + "\uFFFD" + `utf8",container="é\"\\",compose_project="",compose_service="",pod="",namespace="",slurm_job="",pid="1",command="a\"b\\c\nd"} 5` + "\n"
	if !strings.Contains(buf.String(), line) {
		t.Errorf("text output lacks %q:\n%s", line, buf.String())
	}
}

func keysWithPrefix(m map[string]float64, prefix string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func TestDisabledCollectorHasNoSeries(t *testing.T) {
	e := newExporter(t, fullSnapshot(2, 18), Options{Metrics: allOn, Collectors: map[string]bool{snapshot.GroupNVLink: false, snapshot.GroupECC: false}})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		for key := range series(mfs) {
			if strings.HasPrefix(key, "gpu_nvlink_") || strings.HasPrefix(key, "gpu_ecc_") || strings.HasPrefix(key, "gpu_remapped_") ||
				strings.Contains(key, `collector="nvlink"`) || strings.Contains(key, `collector="ecc"`) {
				t.Errorf("series of a disabled collector: %s", key)
			}
		}
		if s := series(mfs); s[`gpuwatch_collector_success{collector="power"}`] != 1 || s[`gpu_power_usage_watts{gpu="0",uuid="`+fullSnapshot(1, 0).Devices[0].UUID+`"}`] == 0 {
			t.Error("enabled collectors lost their series")
		}
	})
}

func TestUnknownCollectorIsAnError(t *testing.T) {
	_, err := New(&fixedSource{}, Options{Collectors: map[string]bool{"nvlinks": true}})
	if err == nil || !strings.Contains(err.Error(), `"nvlinks"`) {
		t.Errorf("New with an unknown collector: err = %v", err)
	}
}

func TestMetricFilterTurnsMetricsOnAndOff(t *testing.T) {
	f, err := ParseMetricFilter("metrics.yml", []byte("disable: [\"gpu_nvlink_*\", gpu_info]\nenable: [gpu_nvlink_up, \"gpu_bar1_*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newExporter(t, fullSnapshot(2, 18), Options{Metrics: f})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		names := familyNames(mfs)
		for _, name := range []string{"gpu_nvlink_up", "gpu_bar1_memory_total_bytes", "gpu_bar1_memory_free_bytes", "gpu_up", "gpu_power_usage_watts"} {
			if !slices.Contains(names, name) {
				t.Errorf("%s should be on", name)
			}
		}
		for _, name := range []string{"gpu_nvlink_transmit_bytes_total", "gpu_nvlink_errors_total", "gpu_info"} {
			if slices.Contains(names, name) {
				t.Errorf("%s should be off", name)
			}
		}
	})
}

func TestProcessesAggregatePerOwner(t *testing.T) {
	snap := fullSnapshot(2, 0)
	e := newExporter(t, snap, Options{})
	uuid0 := snap.Devices[0].UUID
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		alice := `compose_project="lab",compose_service="trainer",container="trainer",gpu="0",namespace="",pod="",slurm_job="",user="alice",uuid="` + uuid0 + `"}`
		bob := `compose_project="",compose_service="",container="a1b2c3d4e5f6",gpu="0",namespace="research",pod="llm-0",slurm_job="",user="bob",uuid="` + uuid0 + `"}`
		carol := `compose_project="",compose_service="",container="",gpu="0",namespace="",pod="",slurm_job="4242",user="carol",uuid="` + uuid0 + `"}`
		checks := map[string]float64{
			"gpu_process_memory_used_bytes{" + alice:        2 << 30, // two processes of 1 GiB
			"gpu_process_sm_utilization_ratio{" + alice:     0.2,
			"gpu_process_memory_utilization_ratio{" + alice: 0.1,
			"gpu_process_memory_used_bytes{" + bob:          2 << 30,
			"gpu_process_memory_used_bytes{" + carol:        3 << 30,
			`gpu_processes{gpu="0",uuid="` + uuid0 + `"}`:   6,
		}
		for key, want := range checks {
			if got, ok := s[key]; !ok || math.Abs(got-want) > 1e-9 {
				t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
			}
		}
		// One series per owner and GPU: 5 owners on each of 2 GPUs.
		if n := len(keysWithPrefix(s, "gpu_process_memory_used_bytes{")); n != 10 {
			t.Errorf("%d gpu_process_memory_used_bytes series, want 10 (5 owners × 2 GPUs)", n)
		}
	})
}

func TestPIDLabelsGiveOneSeriesPerProcess(t *testing.T) {
	snap := fullSnapshot(2, 0)
	e := newExporter(t, snap, Options{PIDLabels: true})
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		mem := keysWithPrefix(s, "gpu_process_memory_used_bytes{")
		if len(mem) != len(snap.Processes) {
			t.Errorf("%d per-process series, want %d", len(mem), len(snap.Processes))
		}
		key := `gpu_process_memory_used_bytes{command="python train.py",compose_project="lab",compose_service="trainer",container="trainer",gpu="0",namespace="",pid="1000",pod="",slurm_job="",user="alice",uuid="` + snap.Devices[0].UUID + `"}`
		if s[key] != 1<<30 {
			t.Errorf("%s = %v, want 1 GiB", key, s[key])
		}
	})
	off := newExporter(t, snap, Options{})
	for key := range series(gather(t, off)) {
		if strings.Contains(key, "pid=") || strings.Contains(key, "command=") {
			t.Errorf("pid label without PIDLabels: %s", key)
		}
	}
}

func TestSnapshotErrorKeepsScrapeAlive(t *testing.T) {
	src := &fixedSource{err: errors.New("nvml: timeout")}
	e, err := New(src, Options{Collectors: map[string]bool{snapshot.GroupMIG: false}})
	if err != nil {
		t.Fatal(err)
	}
	both(t, e, func(t *testing.T, mfs []*dto.MetricFamily) {
		s := series(mfs)
		for key, v := range s {
			switch {
			case strings.HasPrefix(key, "gpuwatch_collector_success{"):
				if v != 0 {
					t.Errorf("%s = %v, want 0", key, v)
				}
			case key == "gpuwatch_snapshot_duration_seconds{}":
			default:
				t.Errorf("unexpected series after a failed snapshot: %s", key)
			}
		}
		if n := len(keysWithPrefix(s, "gpuwatch_collector_success{")); n != len(snapshot.AllGroups)-1 {
			t.Errorf("%d collector_success series, want one per enabled collector (%d)", n, len(snapshot.AllGroups)-1)
		}
	})
}

func TestCollectorStatusSeries(t *testing.T) {
	snap := fullSnapshot(1, 0)
	delete(snap.Groups, snapshot.GroupXID) // the backend did not read it
	e := newExporter(t, snap, Options{})
	s := series(gather(t, e))
	checks := map[string]float64{
		`gpuwatch_collector_success{collector="power"}`:           1,
		`gpuwatch_collector_duration_seconds{collector="power"}`:  snap.Groups[snapshot.GroupPower].Duration.Seconds(),
		`gpuwatch_collector_success{collector="gpm"}`:             0,
		`gpuwatch_collector_success{collector="xid"}`:             0,
		`gpuwatch_attribution_errors_total{source="docker"}`:      3,
		`gpuwatch_attribution_errors_total{source="slurm"}`:       0,
		`gpuwatch_collector_duration_seconds{collector="memory"}`: snap.Groups[snapshot.GroupMemory].Duration.Seconds(),
	}
	for key, want := range checks {
		if got, ok := s[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if _, ok := s[`gpuwatch_collector_duration_seconds{collector="xid"}`]; ok {
		t.Error("duration of a group the backend did not read")
	}
}

func TestOneSnapshotPerCollect(t *testing.T) {
	src := &fixedSource{snap: fullSnapshot(2, 2)}
	e, err := New(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gather(t, e)
	textGather(t, e)
	if src.calls.Load() != 2 {
		t.Errorf("Source.Snapshot called %d times for two scrapes", src.calls.Load())
	}
}

func TestLint(t *testing.T) {
	for _, pid := range []bool{false, true} {
		e := newExporter(t, fullSnapshot(8, 18), Options{Metrics: allOn, PIDLabels: pid})
		problems, err := testutil.CollectAndLint(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint (pid labels %v): %s: %s", pid, p.Metric, p.Text)
		}
	}
}

func TestDescribeMatchesCollect(t *testing.T) {
	// A pedantic registry fails Gather when a collected metric was not
	// described or is inconsistent with its descriptor.
	for _, pid := range []bool{false, true} {
		e := newExporter(t, fullSnapshot(2, 2), Options{Metrics: allOn, PIDLabels: pid})
		gather(t, e)
	}
}

// TestConcurrentScrapes runs both outputs at once on one Exporter; run with
// -race it checks that pooled emitters are never shared.
func TestConcurrentScrapes(t *testing.T) {
	e := newExporter(t, fullSnapshot(4, 18), Options{Metrics: allOn})
	var want bytes.Buffer
	if err := e.WriteText(context.Background(), &want); err != nil {
		t.Fatal(err)
	}
	wantSeries := countSeries(want.Bytes())
	done := make(chan error)
	for w := range 8 {
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				if w%2 == 0 {
					var buf bytes.Buffer
					err = e.WriteText(context.Background(), &buf)
					if n := countSeries(buf.Bytes()); err == nil && n != wantSeries {
						err = fmt.Errorf("scrape %d has %d series, want %d", i, n, wantSeries)
					}
				} else {
					reg := prometheus.NewRegistry()
					reg.MustRegister(e)
					_, err = reg.Gather()
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestAllocationsAreDeduplicatedAndJoinable(t *testing.T) {
	var b strings.Builder
	e := newExporter(t, fullSnapshot(2, 0), Options{})
	if err := e.WriteText(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if n := strings.Count(text, `gpu_kubernetes_allocation_info{gpu="0"`); n != 1 {
		t.Errorf("time-sliced pod allocation exported %d times, want once", n)
	}
	for _, want := range []string{
		`mig_uuid="MIG-1b2c3d4e-0001-5f60-8a9b-0123456789ab",namespace="users",pod="nb-\"x\"",container="jupyter"} 1`,
		`job_id="4242",user="carol",account="chem",partition="gpu"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %s", want)
		}
	}
}
