package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The report tests load a known history into a real Prometheus (and a real
// VictoriaMetrics) and check `gpuwatch report` against figures computed by
// hand from that history.
//
// The history: three days at a 5-minute resolution on two nodes.
//   node-a GPU 0: pod research/trainer-0 (process of bob) days 1-2, 80 % busy, 400 W, 40 GiB; day 3 idle, 70 W.
//   node-a GPU 1: pod users/idle-notebook all three days, idle, 60 W, 2 GiB.
//   node-b GPU 0: Slurm job 1001 (alice, physics, gpu) day 1, 50 % busy, 300 W, 20 GiB; then idle, 50 W.
//   node-b GPU 1: compose service lab/notebook (process of carol) day 3, 25 % busy, 150 W, 4 GiB; before, idle, 50 W.

const (
	reportStep  = 5 * time.Minute
	stepsPerDay = 288
	reportDays  = 3
)

type gpuState struct{ util, watts, memGiB float64 }

type fixtureGPU struct {
	instance, gpu, uuid string
	state               func(day int) gpuState
	alloc               func(day int) string // allocation series labels (with name), "" when none
	proc                func(day int) string // process labels, "" when none
}

var reportFixture = []fixtureGPU{
	{"node-a:9410", "0", "GPU-a0", func(d int) gpuState {
		if d < 2 {
			return gpuState{0.8, 400, 40}
		}
		return gpuState{0, 70, 0}
	}, func(d int) string {
		if d < 2 {
			return `gpu_kubernetes_allocation_info{mig_uuid="",namespace="research",pod="trainer-0",container="pytorch"`
		}
		return ""
	}, func(d int) string {
		if d < 2 {
			return `user="bob",container="trainer",pod="trainer-0",namespace="research",slurm_job="",compose_project="",compose_service=""`
		}
		return ""
	}},
	{"node-a:9410", "1", "GPU-a1", func(int) gpuState { return gpuState{0, 60, 2} },
		func(int) string {
			return `gpu_kubernetes_allocation_info{mig_uuid="",namespace="users",pod="idle-notebook",container="jupyter"`
		}, func(int) string { return "" }},
	{"node-b:9410", "0", "GPU-b0", func(d int) gpuState {
		if d == 0 {
			return gpuState{0.5, 300, 20}
		}
		return gpuState{0, 50, 0}
	}, func(d int) string {
		if d == 0 {
			return `gpu_slurm_job_info{job_id="1001",user="alice",account="physics",partition="gpu"`
		}
		return ""
	}, func(d int) string {
		if d == 0 {
			return `user="alice",container="",pod="",namespace="",slurm_job="1001",compose_project="",compose_service=""`
		}
		return ""
	}},
	{"node-b:9410", "1", "GPU-b1", func(d int) gpuState {
		if d == 2 {
			return gpuState{0.25, 150, 4}
		}
		return gpuState{0, 50, 0}
	}, func(int) string { return "" }, func(d int) string {
		if d == 2 {
			return `user="carol",container="jupyter",pod="",namespace="",slurm_job="",compose_project="lab",compose_service="notebook"`
		}
		return ""
	}},
}

// writeReportHistory writes the fixture in the OpenMetrics text format that
// promtool backfills, samples k = 1..864 at start + k×5m, sample k holding
// the state of the 5 minutes that end there.
func writeReportHistory(t *testing.T, path string, start time.Time) {
	t.Helper()
	var b strings.Builder
	family := func(name, typ string, series func(g fixtureGPU, day int) (string, float64, bool)) {
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, typ)
		for _, g := range reportFixture {
			// One series at a time, in time order, as OpenMetrics wants.
			byLabels := map[string][]string{}
			var order []string
			for k := 1; k <= reportDays*stepsPerDay; k++ {
				day := (k - 1) / stepsPerDay
				labels, v, ok := series(g, day)
				if !ok {
					continue
				}
				if _, seen := byLabels[labels]; !seen {
					order = append(order, labels)
				}
				ts := start.Add(time.Duration(k) * reportStep).Unix()
				byLabels[labels] = append(byLabels[labels], fmt.Sprintf("%s %g %d\n", labels, v, ts))
			}
			for _, l := range order {
				b.WriteString(strings.Join(byLabels[l], ""))
			}
		}
	}
	devLabels := func(g fixtureGPU) string {
		return fmt.Sprintf(`job="gpuwatch",instance=%q,gpu=%q,uuid=%q`, g.instance, g.gpu, g.uuid)
	}
	gauge := func(name string, value func(gpuState) float64) {
		family(name, "gauge", func(g fixtureGPU, day int) (string, float64, bool) {
			return name + "{" + devLabels(g) + "}", value(g.state(day)), true
		})
	}
	gauge("gpu_up", func(gpuState) float64 { return 1 })
	gauge("gpu_utilization_ratio", func(s gpuState) float64 { return s.util })
	gauge("gpu_power_usage_watts", func(s gpuState) float64 { return s.watts })
	gauge("gpu_memory_used_bytes", func(s gpuState) float64 { return s.memGiB * (1 << 30) })
	for _, info := range []string{"gpu_kubernetes_allocation_info", "gpu_slurm_job_info"} {
		family(info, "gauge", func(g fixtureGPU, day int) (string, float64, bool) {
			a := g.alloc(day)
			if !strings.HasPrefix(a, info+"{") {
				return "", 0, false
			}
			return a + "," + devLabels(g) + "}", 1, true
		})
	}
	family("gpu_process_memory_used_bytes", "gauge", func(g fixtureGPU, day int) (string, float64, bool) {
		p := g.proc(day)
		return "gpu_process_memory_used_bytes{" + devLabels(g) + "," + p + "}", g.state(day).memGiB * (1 << 30), p != ""
	})
	family("gpu_process_sm_utilization_ratio", "gauge", func(g fixtureGPU, day int) (string, float64, bool) {
		p := g.proc(day)
		return "gpu_process_sm_utilization_ratio{" + devLabels(g) + "," + p + "}", g.state(day).util, p != ""
	})
	b.WriteString("# EOF\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reportHistoryStart is midnight UTC four days ago: inside any retention,
// on the 5-minute grid that subqueries align to.
func reportHistoryStart() time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -4)
}

// startPrometheusWithHistory backfills the fixture and starts Prometheus on it.
// The lookback is shorter than the sample interval, so a series counts at
// exactly the steps that have a sample (the end of an allocation is exact).
func startPrometheusWithHistory(t *testing.T, start time.Time) string {
	t.Helper()
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	dir := t.TempDir()
	history := filepath.Join(dir, "history.om")
	writeReportHistory(t, history, start)
	tsdb := filepath.Join(dir, "tsdb")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", history, tsdb).CombinedOutput(); err != nil {
		t.Fatalf("promtool backfill: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, "global: {scrape_interval: 1m}\n")
	port := testenv.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProcess(t, promBin, "--config.file="+cfg, "--storage.tsdb.path="+tsdb, "--storage.tsdb.retention.time=30d",
		"--query.lookback-delta=4m", "--web.listen-address="+url[len("http://"):])
	waitFor(t, 60*time.Second, "Prometheus to load the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 4
	})
	return url
}

type reportJSON struct {
	Totals struct {
		Allocated float64 `json:"allocated_gpu_hours"`
		Energy    float64 `json:"energy_kwh"`
	} `json:"totals"`
	Fleet struct {
		GPUs   int     `json:"gpus"`
		Util   float64 `json:"mean_utilization"`
		Idle   float64 `json:"idle_gpu_hours"`
		Energy float64 `json:"energy_kwh"`
	} `json:"fleet"`
}

// row figures in the JSON's order, for compact expectations.
type figures struct {
	alloc, used, mean, p95, peakGiB, meanGiB, kwh, idle, duration float64
}

func runReport(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runGpuwatch(t, append([]string{"report"}, args...)...)
}

func decodeReport(t *testing.T, out string) map[string]figures {
	t.Helper()
	var raw struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]figures{}
	for _, r := range raw.Rows {
		owner := r["owner"].(map[string]any)
		var parts []string
		for _, k := range []string{"instance", "namespace", "pod", "job_id", "user", "account", "partition", "container", "compose_project", "compose_service", "gpu", "uuid"} {
			if v, ok := owner[k].(string); ok && v != "" {
				parts = append(parts, v)
			}
		}
		f := func(k string) float64 { v, _ := r[k].(float64); return v }
		got[strings.Join(parts, "/")] = figures{f("allocated_gpu_hours"), f("used_gpu_hours"), f("mean_utilization"), f("p95_utilization"),
			f("peak_memory_bytes") / (1 << 30), f("mean_memory_bytes") / (1 << 30), f("energy_kwh"), f("idle_allocated_hours"), f("duration_hours")}
	}
	return got
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func checkFigures(t *testing.T, by string, got map[string]figures, want map[string]figures, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("--by=%s: owners %v, want %v", by, keys(got), keys(want))
	}
	for owner, w := range want {
		g, ok := got[owner]
		if !ok {
			t.Errorf("--by=%s: no row for %s (rows: %v)", by, owner, keys(got))
			continue
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"allocated GPU-h", g.alloc, w.alloc}, {"used GPU-h", g.used, w.used}, {"mean utilization", g.mean, w.mean},
			{"p95 utilization", g.p95, w.p95}, {"peak GiB", g.peakGiB, w.peakGiB}, {"mean GiB", g.meanGiB, w.meanGiB},
			{"kWh", g.kwh, w.kwh}, {"idle-allocated h", g.idle, w.idle}, {"duration h", g.duration, w.duration},
		} {
			if !near(c.got, c.want, tol) {
				t.Errorf("--by=%s %s: %s = %v, want %v", by, owner, c.name, c.got, c.want)
			}
		}
	}
}

func keys(m map[string]figures) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// reportExpectations are the hand-computed figures of the fixture, per --by.
var reportExpectations = map[string]map[string]figures{
	"namespace": {
		"research": {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0},
		"users":    {72, 0, 0, 0, 2, 2, 4.32, 72, 0},
	},
	"pod": {
		"research/trainer-0":  {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0},
		"users/idle-notebook": {72, 0, 0, 0, 2, 2, 4.32, 72, 0},
	},
	"job":     {"1001/alice/physics/gpu": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 24}},
	"account": {"physics": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 0}},
	"user": {
		"bob":   {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0},
		"alice": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 0},
		"carol": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0},
	},
	"container": {
		"node-a:9410/trainer": {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0},
		"node-b:9410/jupyter": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0},
	},
	"compose_service": {"lab/notebook": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0}},
	// Nodes: held = any pod, job or process; memory is the whole node's.
	"node": {
		"node-a:9410": {120, 38.4, 0.32, 0.4, 42, (42.0*576 + 2*288) / 864, 23.52, 72, 0},
		"node-b:9410": {48, 18, 0.375, 0.5, 20, (20.0*288 + 4*288) / 864, 10.8, 0, 0},
	},
}

// TestReportAgainstPrometheus: every --by against the backfilled history,
// figure by figure, and the fleet summary.
func TestReportAgainstPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	url := startPrometheusWithHistory(t, start)
	checkReport(t, url, start, 1e-9)
}

func checkReport(t *testing.T, url string, start time.Time, tol float64) {
	t.Helper()
	rangeArgs := []string{"--prometheus.url=" + url, "--from=" + start.Format(time.RFC3339), "--to=" + start.Add(reportDays*24*time.Hour).Format(time.RFC3339)}
	for by, want := range reportExpectations {
		out, code := runReport(t, append(rangeArgs, "--by="+by, "--format=json")...)
		if code != 0 {
			t.Errorf("--by=%s: exit %d\n%s", by, code, out)
			continue
		}
		checkFigures(t, by, decodeReport(t, out), want, tol)
	}
	out, code := runReport(t, append(rangeArgs, "--by=namespace", "--format=json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var r reportJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Fleet.GPUs != 4 || !near(r.Fleet.Util, (0.325+0.2+0.0625)/3, tol) || !near(r.Fleet.Idle, 192, tol) || !near(r.Fleet.Energy, 40.8, tol) {
		t.Errorf("fleet = %+v, want 4 GPUs, mean utilization 0.1958, 192 idle GPU-hours, 40.8 kWh", r.Fleet)
	}
	if !near(r.Totals.Allocated, 120, tol) || !near(r.Totals.Energy, 23.52, tol) {
		t.Errorf("totals = %+v, want 120 GPU-h and 23.52 kWh", r.Totals)
	}
}
