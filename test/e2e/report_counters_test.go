//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// writeCounterHistory writes two hours of one GPU, every minute from start:
// the gauges a scrape samples and the accounting counters. alice runs
// throughout at 50 % SM; bob's job runs 30 s between two scrapes at 80 %,
// so the gauges never see it, and only the counters (new owner at 0, then
// 30 s) count it. Energy: alice 250 W, idle 50 W, bob 1500 J.
func writeCounterHistory(t *testing.T, path string, start time.Time) {
	t.Helper()
	const dev = `job="gpuwatch",instance="node-a:9410",gpu="0",uuid="GPU-a"`
	owner := func(user string) string {
		return dev + `,user="` + user + `",container="",compose_project="",compose_service="",pod="",namespace="",slurm_job="",mig_uuid=""`
	}
	var b strings.Builder
	series := func(name, typ, labels string, from, to int, value func(minute int) float64) {
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, typ)
		for m := from; m <= to; m++ {
			fmt.Fprintf(&b, "%s{%s} %g %d\n", name, labels, value(m), start.Add(time.Duration(m)*time.Minute).Unix())
		}
	}
	const end = 120
	series("gpu_up", "gauge", dev, 0, end, func(int) float64 { return 1 })
	series("gpu_utilization_ratio", "gauge", dev, 0, end, func(int) float64 { return 0.5 })
	series("gpu_power_usage_watts", "gauge", dev, 0, end, func(int) float64 { return 300 })
	series("gpu_process_memory_used_bytes", "gauge", owner("alice"), 0, end, func(int) float64 { return 1 << 30 })
	series("gpu_process_sm_utilization_ratio", "gauge", owner("alice"), 0, end, func(int) float64 { return 0.5 })
	// Counters are in seconds and joules since gpuwatch started, at start.
	elapsed := func(m int) float64 { return float64(m * 60) }
	series("gpu_idle_energy_joules", "counter", dev, 0, end, func(m int) float64 { return 50 * elapsed(m) })
	series("gpu_process_seconds", "counter", owner("alice"), 0, end, elapsed)
	series("gpu_process_sm_seconds", "counter", owner("alice"), 0, end, func(m int) float64 { return 0.5 * elapsed(m) })
	series("gpu_process_energy_joules", "counter", owner("alice"), 0, end, func(m int) float64 { return 250 * elapsed(m) })
	// bob: first seen at minute 60 (0, the hold), 30 s from minute 61 on.
	bob := func(total float64) func(int) float64 {
		return func(m int) float64 {
			if m == 60 {
				return 0
			}
			return total
		}
	}
	series("gpu_process_seconds", "counter", owner("bob"), 60, end, bob(30))
	series("gpu_process_sm_seconds", "counter", owner("bob"), 60, end, bob(24))
	series("gpu_process_energy_joules", "counter", owner("bob"), 60, end, bob(1500))
	b.WriteString("# EOF\n")
	// OpenMetrics counters are named without _total in # TYPE and with it
	// on the samples.
	text := b.String()
	for _, name := range []string{"gpu_idle_energy_joules", "gpu_process_seconds", "gpu_process_sm_seconds", "gpu_process_energy_joules"} {
		text = strings.ReplaceAll(text, "\n"+name+"{", "\n"+name+"_total{")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

type counterReport struct {
	Basis   string `json:"basis"`
	Sources string `json:"basis_note"`
	Rows    []struct {
		Owner     map[string]string `json:"owner"`
		Allocated float64           `json:"allocated_gpu_hours"`
		Used      float64           `json:"used_gpu_hours"`
		Energy    float64           `json:"energy_kwh_summed"`
		CO2e      *float64          `json:"co2e_kg"`
	} `json:"rows"`
	Fleet struct {
		Energy float64  `json:"energy_kwh_summed"`
		CO2e   *float64 `json:"co2e_kg"`
	} `json:"fleet"`
}

// TestReportUsesCountersWhenTheyCoverTheRange: over a range the counters
// cover, the report's hours and energy are the counters' (bob's 30 s job,
// which no scrape saw, included) and it says so; over a range that begins
// before them, it uses the gauges and says that.
func TestReportUsesCountersWhenTheyCoverTheRange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	tsdb := backfill(t, start, writeCounterHistory)
	url := "http://" + startPrometheusOn(t, tsdb)
	testenv.WaitFor(t, 60*time.Second, "Prometheus to load the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 1
	})
	checkCounterReport(t, url, start)
}

// TestReportCountersAgainstVictoriaMetrics: the same history and figures
// from VictoriaMetrics, whose MetricsQL runs the counters' queries too.
func TestReportCountersAgainstVictoriaMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts VictoriaMetrics; skipped with -short")
	}
	// Not at midnight: VictoriaMetrics answers an instant query at a day's
	// first millisecond without the samples stamped there, and the
	// counters' coverage is read at the range's start, their first sample.
	start := reportHistoryStart().Add(time.Hour)
	history := filepath.Join(t.TempDir(), "history.om")
	writeCounterHistory(t, history, start)
	// VictoriaMetrics' default flags: --by=user's counter queries are longer
	// than its default bound on a query's text, and the report resends them
	// in MetricsQL's WITH form.
	url := startVictoriaMetrics(t)
	importPrometheusText(t, url, history)
	testenv.WaitFor(t, 30*time.Second, "VictoriaMetrics to serve the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 1
	})
	checkCounterReport(t, url, start)
}

// checkCounterReport checks the reports over writeCounterHistory's
// history (from start) on the server at url.
func checkCounterReport(t *testing.T, url string, start time.Time) {
	t.Helper()
	report := func(from time.Time) counterReport {
		out, code := runReport(t, "--prometheus.url="+url, "--by=user", "--format=json", "--carbon-intensity=400",
			"--from="+fmt.Sprint(from.Unix()), "--to="+fmt.Sprint(start.Add(120*time.Minute).Unix()), "--step=1m")
		if code != 0 {
			t.Fatalf("report exited %d:\n%s", code, out)
		}
		var r counterReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r
	}

	r := report(start)
	if r.Basis != "counters" || !strings.Contains(r.Sources, "accounting counters") {
		t.Errorf("basis %q, sources %q: want the counters, which cover the range", r.Basis, r.Sources)
	}
	// In the minute bob's job ran beside alice, they shared the GPU: its
	// minute is split by their SM seconds in it (alice 30, bob 24), so
	// their hours add up to the GPU's two hours.
	bobHeld := 60 * 24.0 / 54
	want := map[string][3]float64{ // GPU-h held, SM-h, kWh
		"alice": {2 - bobHeld/3600, 1, 250 * 7200 / 3.6e6},
		"bob":   {bobHeld / 3600, 24.0 / 3600, 1500 / 3.6e6},
	}
	for _, row := range r.Rows {
		w, ok := want[row.Owner["user"]]
		if !ok {
			t.Errorf("unexpected row %v", row.Owner)
			continue
		}
		delete(want, row.Owner["user"])
		if !testenv.Near(row.Allocated, w[0], 1e-6) || !testenv.Near(row.Used, w[1], 1e-6) || !testenv.Near(row.Energy, w[2], 1e-6) {
			t.Errorf("%s: held %g h, SM %g h, %g kWh; want %v", row.Owner["user"], row.Allocated, row.Used, row.Energy, w)
		}
		if row.CO2e == nil || !testenv.Near(*row.CO2e, row.Energy*0.4, 1e-9) {
			t.Errorf("%s: CO2e %v kg, want %g (400 g/kWh)", row.Owner["user"], row.CO2e, row.Energy*0.4)
		}
	}
	if len(want) != 0 {
		t.Errorf("no row for %v", want)
	}
	fleetKWh := (250*7200 + 50*7200 + 1500) / 3.6e6
	if !testenv.Near(r.Fleet.Energy, fleetKWh, 1e-6) || r.Fleet.CO2e == nil {
		t.Errorf("fleet %g kWh (CO2e %v), want %g: the owners' and the idle energy", r.Fleet.Energy, r.Fleet.CO2e, fleetKWh)
	}

	// An hour earlier, before the counters began: the gauges, which never
	// saw bob.
	r = report(start.Add(-time.Hour))
	if r.Basis != "gauges" || !strings.Contains(r.Sources, "sampled gauges") {
		t.Errorf("basis %q, sources %q: want the gauges (the counters began after the range)", r.Basis, r.Sources)
	}
	for _, row := range r.Rows {
		if row.Owner["user"] == "bob" {
			t.Errorf("bob in a gauge report: %+v", row)
		}
	}
}
