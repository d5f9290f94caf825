//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

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

type reportJSON struct {
	Totals struct {
		Allocated float64 `json:"allocated_gpu_hours"`
		Energy    float64 `json:"energy_kwh_summed"`
	} `json:"totals"`
	Fleet struct {
		GPUs       int     `json:"gpus"`
		Unmeasured int     `json:"gpus_without_utilization"`
		Util       float64 `json:"mean_utilization_per_gpu"`
		Idle       float64 `json:"idle_gpu_hours"`
		Energy     float64 `json:"energy_kwh_summed"`
	} `json:"fleet"`
	Server string   `json:"server"`
	Notes  []string `json:"notes"`
}

// row figures in the JSON's order, for compact expectations: utilization per
// GPU, memory and energy summed over the owner's GPUs; na where the JSON
// has null (no reading).
type figures struct {
	alloc, used, mean, p95, peakGiB, meanGiB, kwh, idle, duration, unmeasured float64
}

// na stands for a figure the report shows as absent (JSON null).
const na = -1.0

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
		f := func(k string) float64 {
			v, present := r[k]
			if present && v == nil {
				return na
			}
			x, _ := v.(float64)
			return x
		}
		gib := func(k string) float64 {
			if v := f(k); v != na {
				return v / (1 << 30)
			}
			return na
		}
		got[strings.Join(parts, "/")] = figures{f("allocated_gpu_hours"), f("used_gpu_hours"), f("mean_utilization_per_gpu"), f("p95_utilization_per_gpu"),
			gib("peak_memory_bytes_summed"), gib("mean_memory_bytes_summed"), f("energy_kwh_summed"), f("idle_allocated_gpu_hours"), f("duration_hours"), f("unmeasured_gpu_hours")}
	}
	return got
}

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
			{"GPU-h without a utilization reading", g.unmeasured, w.unmeasured},
		} {
			if !testenv.Near(c.got, c.want, tol) {
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
		"research": {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0, 0},
		"users":    {72, 0, 0, 0, 2, 2, 4.32, 72, 0, 0},
	},
	"pod": {
		"research/trainer-0":  {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0, 0},
		"users/idle-notebook": {72, 0, 0, 0, 2, 2, 4.32, 72, 0, 0},
	},
	"job":     {"1001/alice/physics/gpu": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 24, 0}},
	"account": {"physics": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 0, 0}},
	"user": {
		"bob":   {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0, 0},
		"alice": {24, 12, 0.5, 0.5, 20, 20, 7.2, 0, 0, 0},
		"carol": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0, 0},
	},
	"container": {
		"node-a:9410/trainer": {48, 38.4, 0.8, 0.8, 40, 40, 19.2, 0, 0, 0},
		"node-b:9410/jupyter": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0, 0},
	},
	"compose_service": {"lab/notebook": {24, 6, 0.25, 0.25, 4, 4, 3.6, 0, 0, 0}},
	// Nodes: held = any pod, job or process; memory is the whole node's.
	"node": {
		"node-a:9410": {120, 38.4, 0.32, 0.4, 42, (42.0*576 + 2*288) / 864, 23.52, 72, 0, 0},
		"node-b:9410": {48, 18, 0.375, 0.5, 20, (20.0*288 + 4*288) / 864, 10.8, 0, 0, 0},
	},
}

// TestReportAgainstPrometheus: every --by against the backfilled history,
// figure by figure, and the fleet summary.
func TestReportAgainstPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	url := sharedHistoryPrometheus(t, start)
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
	if r.Fleet.GPUs != 4 || !testenv.Near(r.Fleet.Util, (0.325+0.2+0.0625)/3, tol) || !testenv.Near(r.Fleet.Idle, 192, tol) || !testenv.Near(r.Fleet.Energy, 40.8, tol) {
		t.Errorf("fleet = %+v, want 4 GPUs, mean utilization 0.1958, 192 idle GPU-hours, 40.8 kWh", r.Fleet)
	}
	if !testenv.Near(r.Totals.Allocated, 120, tol) || !testenv.Near(r.Totals.Energy, 23.52, tol) {
		t.Errorf("totals = %+v, want 120 GPU-h and 23.52 kWh", r.Totals)
	}
}

// TestReportAgainstVictoriaMetrics: the same history imported into a real
// VictoriaMetrics, the same command, the same figures.
func TestReportAgainstVictoriaMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts VictoriaMetrics; skipped with -short")
	}
	start := reportHistoryStart()
	history := filepath.Join(t.TempDir(), "history.om")
	writeReportHistory(t, history, start)
	url := startVictoriaMetrics(t)
	importPrometheusText(t, url, history)
	testenv.WaitFor(t, 30*time.Second, "VictoriaMetrics to serve the history", func() bool {
		v, ok := promQuery(t, url, fmt.Sprintf(`count(gpu_up @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 4
	})
	checkReport(t, url, start, 1e-9)
}

// startVictoriaMetrics starts an empty VictoriaMetrics with the extra flags
// and returns its URL.
func startVictoriaMetrics(t *testing.T, extra ...string) string {
	t.Helper()
	vmBin := testenv.RequireTool(t, "victoria-metrics", "victoria-metrics")
	url := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	// The staleness interval plays Prometheus's lookback: shorter than the
	// sample interval, so a series ends at its last sample.
	testenv.StartProcess(t, nil, vmBin, append([]string{"-storageDataPath=" + filepath.Join(t.TempDir(), "vm"), "-httpListenAddr=" + url[len("http://"):],
		"-retentionPeriod=1y", "-search.maxStalenessInterval=4m", "-search.disableCache", "-loggerLevel=ERROR"}, extra...)...)
	testenv.WaitFor(t, 30*time.Second, "VictoriaMetrics to answer", func() bool {
		_, err := httpGetNoFail(url + "/health")
		return err == nil
	})
	return url
}

// importPrometheusText sends the OpenMetrics history to VictoriaMetrics'
// Prometheus text import, whose timestamps are milliseconds.
func importPrometheusText(t *testing.T, url, history string) {
	t.Helper()
	data, err := os.ReadFile(history)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		b.WriteString(line[:i+1] + line[i+1:] + "000\n")
	}
	resp, err := http.Post(url+"/api/v1/import/prometheus", "text/plain", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("import: %s", resp.Status)
	}
	if _, err := httpGetNoFail(url + "/internal/force_flush"); err != nil {
		t.Fatal(err)
	}
}

// TestReportFormats renders one report in every format: the table and
// markdown a person reads, the CSV a spreadsheet reads (owner names that look
// like formulas are defused), and the HTML page, which headless Chromium
// loads without a console error, sorts on a click, and screenshots into
// the test output directory ($REPORT_SCREENSHOT_DIR or the test's temp dir).
func TestReportFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	url := sharedHistoryPrometheus(t, start)
	args := []string{"--prometheus.url=" + url, "--from=" + start.Format(time.RFC3339), "--to=" + start.Add(reportDays*24*time.Hour).Format(time.RFC3339), "--by=pod"}

	table, code := runReport(t, append(args, "--format=table")...)
	if code != 0 || !strings.Contains(table, "research") || !strings.Contains(table, "TOTAL") || !strings.Contains(table, "Fleet: 4 GPUs") {
		t.Errorf("table (exit %d):\n%s", code, table)
	}
	t.Logf("table:\n%s", table)
	md, code := runReport(t, append(args, "--format=markdown")...)
	if code != 0 || !strings.Contains(md, "| research | trainer-0 | 48.0 | 38.4 | 80.0 |") {
		t.Errorf("markdown (exit %d):\n%s", code, md)
	}
	csvOut, code := runReport(t, append(args, "--format=csv")...)
	if code != 0 || !strings.HasPrefix(csvOut, "namespace,pod,allocated_gpu_hours,") || !strings.Contains(csvOut, "users,idle-notebook,72,0,") {
		t.Errorf("csv (exit %d):\n%s", code, csvOut)
	}

	dir := os.Getenv("REPORT_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	page := filepath.Join(dir, "report.html")
	if out, code := runReport(t, append(args, "--format=html", "--output="+page)...); code != 0 {
		t.Fatalf("html: exit %d\n%s", code, out)
	}
	checkHTMLReport(t, page, filepath.Join(dir, "report.png"))
}

func checkHTMLReport(t *testing.T, page, png string) {
	t.Helper()
	b := newBrowser(t)
	var rows int
	var first, afterClick string
	var bars int
	b.run(t,
		chromedp.Navigate("file://"+page),
		chromedp.WaitVisible("#owners"),
		chromedp.Evaluate(`document.querySelectorAll("#owners tbody tr").length`, &rows),
		chromedp.Evaluate(`document.querySelectorAll("svg rect.used").length`, &bars),
		chromedp.Text(`#owners tbody tr:first-child td:nth-child(2)`, &first),
		// Sort by GPU-h allocated, ascending: the smaller allocation first.
		chromedp.Click(`#owners thead th:nth-child(3)`),
		chromedp.Text(`#owners tbody tr:first-child td:nth-child(2)`, &afterClick),
	)
	b.screenshot(t, png)
	if rows != 2 || bars != 2 {
		t.Errorf("the page shows %d rows and %d chart bars, want 2 and 2", rows, bars)
	}
	if first != "idle-notebook" || afterClick != "trainer-0" {
		t.Errorf("first pod %q, after sorting by GPU-h allocated ascending %q; want idle-notebook then trainer-0", first, afterClick)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// TestReportErrors: bad input and unreachable or unwilling servers end in
// one clear line and a non-zero exit.
func TestReportErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	url := sharedHistoryPrometheus(t, start)
	from, to := "--from="+start.Format(time.RFC3339), "--to="+start.Add(24*time.Hour).Format(time.RFC3339)
	closed := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	exporter, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=h100")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unreachable", []string{"--prometheus.url=" + closed, "--last=1d"}, "cannot reach the server"},
		{"not a URL", []string{"--prometheus.url=prometheus:9090", "--last=1d"}, "want http://HOST:PORT"},
		{"a gpuwatch, not Prometheus", []string{"--prometheus.url=" + exporter, "--last=1d"}, "this is a gpuwatch exporter, not Prometheus: point --prometheus.url at the Prometheus"},
		{"inverted range", []string{"--prometheus.url=" + url, "--from=" + start.Add(time.Hour).Format(time.RFC3339), "--to=" + start.Format(time.RFC3339)}, "must be before --to"},
		{"malformed time", []string{"--prometheus.url=" + url, "--from=yesterday", to}, "--from=yesterday: want RFC 3339"},
		{"malformed duration", []string{"--prometheus.url=" + url, "--last=a week"}, "--last=a week: want a positive duration"},
		{"no range", []string{"--prometheus.url=" + url}, "a range is needed"},
		{"unknown by", []string{"--prometheus.url=" + url, from, to, "--by=team"}, `unknown --by "team" (one of: account, compose_service, container, gpu, job, namespace, node, partition, pod, user)`},
		{"unknown format", []string{"--prometheus.url=" + url, from, to, "--format=pdf"}, "--format=pdf: one of table, csv, json, markdown, html"},
		{"no data", []string{"--prometheus.url=" + url, "--from=" + start.AddDate(0, 0, -2).Format(time.RFC3339), "--to=" + start.AddDate(0, 0, -1).Format(time.RFC3339)}, "looked for gpu_up samples"},
		{"no allocations of that kind", []string{"--prometheus.url=" + url, "--from=" + start.Add(48*time.Hour).Format(time.RFC3339), "--to=" + start.Add(72*time.Hour).Format(time.RFC3339), "--by=job"}, "no gpu_slurm_job_info series"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runReport(t, c.args...)
			if code == 0 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("exit %d, output:\n%s\nwant one line containing %q", code, out, c.want)
			}
		})
	}
}

// TestReportTLSAndBasicAuth: a Prometheus behind TLS and basic auth (its
// exporter-toolkit web config) answers the report only with the right
// credentials and CA, given as a Prometheus-style HTTP client config.
func TestReportTLSAndBasicAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	start := reportHistoryStart()
	dir := t.TempDir()
	cert, key, _ := writeSelfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	writeFile(t, web, fmt.Sprintf("tls_server_config: {cert_file: %q, key_file: %q}\nbasic_auth_users: {report: %q}\n", cert, key, hash))
	url := "https://" + startPrometheusOn(t, backfillHistory(t, start), "--web.config.file="+web)
	good := filepath.Join(dir, "client.yml")
	writeFile(t, good, fmt.Sprintf("basic_auth: {username: report, password: s3cret}\ntls_config: {ca_file: %q}\n", cert))
	wrong := filepath.Join(dir, "wrong.yml")
	writeFile(t, wrong, fmt.Sprintf("basic_auth: {username: report, password: guess}\ntls_config: {ca_file: %q}\n", cert))
	args := []string{"--prometheus.url=" + url, "--from=" + start.Format(time.RFC3339), "--to=" + start.Add(reportDays*24*time.Hour).Format(time.RFC3339), "--by=namespace", "--format=json"}

	var out string
	var code int
	testenv.WaitFor(t, 60*time.Second, "the report through TLS and basic auth", func() bool {
		out, code = runReport(t, append(args, "--prometheus.http-config="+good)...)
		return code == 0
	})
	checkFigures(t, "namespace", decodeReport(t, out), reportExpectations["namespace"], 1e-9)

	if out, code := runReport(t, append(args, "--prometheus.http-config="+wrong)...); code == 0 || !strings.Contains(out, "refused the credentials") {
		t.Errorf("a wrong password: exit %d\n%s", code, out)
	}
	if out, code := runReport(t, args...); code == 0 || !strings.Contains(out, "certificate") {
		t.Errorf("no CA: exit %d\n%s", code, out)
	}
	missing := filepath.Join(dir, "absent.yml")
	if out, code := runReport(t, append(args, "--prometheus.http-config="+missing)...); code == 0 || !strings.Contains(out, missing) {
		t.Errorf("a missing client config: exit %d\n%s", code, out)
	}
}

// reportMemoryRules are the recorded series of
// deploy/prometheus/recording.yml that the report reads per --by in place
// of its raw memory join (docs/reports.md); it reads no other rule.
var reportMemoryRules = map[string]string{
	"pod":             "namespace_pod:gpu_memory_used_bytes:sum",
	"namespace":       "namespace:gpu_memory_used_bytes:sum",
	"job":             "slurm_job:gpu_memory_used_bytes:sum",
	"account":         "slurm_account:gpu_memory_used_bytes:sum",
	"user":            "user:gpu_process_memory_used_bytes:sum",
	"container":       "instance_container:gpu_process_memory_used_bytes:sum",
	"compose_service": "compose_service:gpu_process_memory_used_bytes:sum",
}

// TestReportUsesRecordingRules: with the shipped recording rules the report
// reads evaluated over the history (backfilled by promtool from the rules
// file itself), the report reads memory from them, names the rule, and
// gives the same figures as from the raw series.
func TestReportUsesRecordingRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	start := reportHistoryStart()
	end := start.Add(reportDays * 24 * time.Hour)
	url := sharedHistoryPrometheus(t, start)
	// promtool writes a block per rule and two hours, most of its time,
	// so it backfills only the rules the report reads; each view's
	// sources below must name its rule.
	rules := filepath.Join(t.TempDir(), "recording.yml")
	writeShippedRules(t, rules, slices.Collect(maps.Values(reportMemoryRules)))
	rulesDir := filepath.Join(t.TempDir(), "rules-blocks")
	// Prometheus offsets a group's evaluations from the interval's grid
	// by a hash of the group's name and file. Evaluated every minute, a
	// rule has a sample within the lookback of every report step whatever
	// that offset, and each sample within the lookback of a raw one; at
	// the fixture's interval, an offset under a minute or over the
	// lookback would miss one or the other.
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "rules", "--start="+start.Format(time.RFC3339),
		"--end="+end.Format(time.RFC3339), "--eval-interval=1m", "--output-dir="+rulesDir, "--url="+url, rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool create-blocks-from rules: %v\n%s", err, out)
	}
	// A second Prometheus on the raw blocks plus the rules' blocks.
	both := backfillHistory(t, start)
	entries, err := os.ReadDir(rulesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 26 { // a block's ULID
			if err := os.CopyFS(filepath.Join(both, e.Name()), os.DirFS(filepath.Join(rulesDir, e.Name()))); err != nil {
				t.Fatal(err)
			}
		}
	}
	url2 := "http://" + startPrometheusOn(t, both)
	testenv.WaitFor(t, 60*time.Second, "Prometheus to load the recorded history", func() bool {
		v, ok := promQuery(t, url2, fmt.Sprintf(`count(namespace_pod:gpu_memory_used_bytes:sum @ %d)`, start.Add(time.Hour).Unix()))
		return ok && v == 2
	})
	args := []string{"--prometheus.url=" + url2, "--from=" + start.Format(time.RFC3339), "--to=" + end.Format(time.RFC3339), "--format=json"}
	// promtool cannot backfill a rule that reads another rule's output
	// (namespace: and slurm_account: memory sum namespace_pod: and
	// slurm_job:), so those two find their rules absent and fall back
	// to the raw series: the fallback is tested too.
	fromRules := map[string]bool{"pod": true, "job": true, "user": true, "container": true, "compose_service": true}
	for by, rule := range reportMemoryRules {
		out, code := runReport(t, append(args, "--by="+by)...)
		if code != 0 {
			t.Fatalf("--by=%s: exit %d\n%s", by, code, out)
		}
		var src struct{ Sources string }
		_ = json.Unmarshal([]byte(out), &src)
		want := "raw series"
		if fromRules[by] {
			want = "recording rule " + rule + " (deploy/prometheus/recording.yml)"
		}
		if src.Sources != want {
			t.Errorf("--by=%s: sources %q, want %q", by, src.Sources, want)
		}
		checkFigures(t, by, decodeReport(t, out), reportExpectations[by], 1e-9)
		if !fromRules[by] {
			continue // on the raw series already
		}
		raw, code := runReport(t, append(args, "--by="+by, "--no-rules")...)
		if code != 0 || !strings.Contains(raw, `"sources": "raw series"`) {
			t.Errorf("--by=%s --no-rules: exit %d\n%s", by, code, raw)
		}
	}
}

// writeShippedRules writes to path the recording rules of
// deploy/prometheus/recording.yml named in records, as they are there, in
// their groups; it fails the test when one is not there.
func writeShippedRules(t *testing.T, path string, records []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "recording.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("deploy/prometheus/recording.yml: %v", err)
	}
	want := map[string]bool{}
	for _, r := range records {
		want[r] = true
	}
	var groups []map[string]any
	for _, g := range file.Groups {
		rules, _ := g["rules"].([]any)
		var kept []any
		for _, r := range rules {
			if record, _ := r.(map[string]any)["record"].(string); want[record] {
				kept = append(kept, r)
				delete(want, record)
			}
		}
		if kept != nil {
			g["rules"] = kept
			groups = append(groups, g)
		}
	}
	for r := range want {
		t.Fatalf("deploy/prometheus/recording.yml has no rule %s", r)
	}
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(out))
}
