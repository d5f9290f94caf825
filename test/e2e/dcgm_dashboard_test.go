//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
	"github.com/gpuwatch/gpuwatch/internal/testenv/chartenv"
)

// dcgmUpstreamDir holds dcgm-exporter's released files (release, commit and
// license in its README.md).
var dcgmUpstreamDir = filepath.Join("..", "..", "internal", "exporter", "testdata", "dcgm-exporter")

// grafanaDashboard is the part of a Grafana dashboard JSON the test runs:
// each panel's queries and each templating variable's query.
type grafanaDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

// releasedDashboard reads dcgm-exporter's released dashboard (Grafana.com
// 12239, grafana/dcgm-exporter-dashboard.json at the pinned release).
func releasedDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dcgmUpstreamDir, "dcgm-exporter-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dcgm-exporter-dashboard.json: %v", err)
	}
	return d
}

var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardVariables returns the dashboard's query variables as Grafana's
// label_values(SELECTOR, LABEL), by name.
func dashboardVariables(t *testing.T, d grafanaDashboard) map[string][2]string {
	t.Helper()
	vars := map[string][2]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q)
		}
		if !v.IncludeAll {
			t.Fatalf("variable %s has no All option; the test selects All", v.Name)
		}
		vars[v.Name] = [2]string{m[1], m[2]}
	}
	return vars
}

// grafanaRegex is how Grafana's Prometheus data source interpolates a
// multi-value variable: each value regex-escaped for use inside a PromQL
// string (a backslash doubled, so 127.0.0.1 becomes 127\\.0\\.0\\.1),
// several joined as (a|b).
func grafanaRegex(values []string) string {
	esc := make([]string, len(values))
	for i, v := range values {
		esc[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
	}
	if len(esc) == 1 {
		return esc[0]
	}
	return "(" + strings.Join(esc, "|") + ")"
}

// dcgmDashboardHost is one gpuwatch the test's Prometheus scrapes: its
// simulated profile, the pods its kubelet reports, and the panels of the
// released dashboard that stay empty there, per GPU ("*": every GPU), with
// the reason.
type dcgmDashboardHost struct {
	profile string
	pods    func(t *testing.T) []*podresourcesv1.PodResources
	empty   map[string][]string
}

var dcgmDashboardHosts = []dcgmDashboardHost{
	{
		profile: "dgx-h100",
		pods: func(t *testing.T) []*podresourcesv1.PodResources {
			return []*podresourcesv1.PodResources{pod("research", "trainer-0", "pytorch", "nvidia.com/gpu", gpuUUIDs(t, "dgx-h100")[1])}
		},
		// GPU 7 runs MIG: NVML (and so DCGM) has no whole-GPU
		// utilization in MIG mode; its tensor activity comes per GPU
		// instance (GPM).
		empty: map[string][]string{"GPU Utilization": {"7"}},
	},
	{
		profile: "dgx-a100-mig",
		pods: func(t *testing.T) []*podresourcesv1.PodResources {
			return []*podresourcesv1.PodResources{
				pod("serving", "infer-0", "vllm", "nvidia.com/mig-1g.10gb", migUUID(t, "dgx-a100-mig", "0", "7")),
				pod("research", "trainer-a", "pytorch", "nvidia.com/gpu", gpuUUIDs(t, "dgx-a100-mig")[5]),
			}
		},
		empty: map[string][]string{
			// No whole-GPU utilization in MIG mode (GPUs 0-3), as above.
			"GPU Utilization": {"0", "1", "2", "3"},
			// DCGM reads tensor activity on Ampere with its profiling
			// module; NVML has it only from Hopper on (GPM). A known gap,
			// in docs/dcgm-compat.md and `gpuwatch doctor --compat=dcgm`.
			"Tensor Core Utilization": {"*"},
		},
	},
	{
		profile: "rtx4090",
		pods: func(t *testing.T) []*podresourcesv1.PodResources {
			return []*podresourcesv1.PodResources{pod("render", "blender-0", "blender", "nvidia.com/gpu", gpuUUIDs(t, "rtx4090")[0])}
		},
		// GeForce: no profiling metrics from DCGM nor NVML.
		empty: map[string][]string{"Tensor Core Utilization": {"*"}},
	},
}

func pod(namespace, name, container, resource, device string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Name: name, Namespace: namespace, Containers: []*podresourcesv1.ContainerResources{{
		Name:    container,
		Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: []string{device}}},
	}}}
}

func (h dcgmDashboardHost) emptyOn(panel, gpu string) bool {
	g := h.empty[panel]
	return slices.Contains(g, "*") || (gpu != "" && slices.Contains(g, gpu))
}

// emptyEverywhere: the panel is expected empty on every GPU of the host.
func (h dcgmDashboardHost) emptyEverywhere(panel string, gpus []string) bool {
	for _, g := range gpus {
		if !h.emptyOn(panel, g) {
			return false
		}
	}
	return true
}

// TestDCGMDashboardAndAdapterQueries runs the queries and variables of
// dcgm-exporter's released dashboard (Grafana 12239), as released, and the
// usual Prometheus Adapter rules, against a real Prometheus scraping
// gpuwatch --compat=dcgm,native on an H100 DGX, an A100 DGX with MIG and a
// GeForce card, each behind a kubelet that allocated GPUs or MIG instances
// to pods. Every instance, every GPU of it, and every pod is chosen alone,
// as well as All; every panel returns data except those listed as empty on
// that GPU in dcgmDashboardHosts.
func TestDCGMDashboardAndAdapterQueries(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	dash := releasedDashboard(t)
	vars := dashboardVariables(t, dash)
	if vars["instance"][1] != "instance" || vars["gpu"][1] != "gpu" {
		t.Fatalf("the released dashboard's variables are %v, want instance and gpu", vars)
	}

	targets := map[string][2]string{}           // address → exporter pod, node
	instances := map[string]dcgmDashboardHost{} // by instance label: the node's name
	podsOf := map[string][]*podresourcesv1.PodResources{}
	for _, h := range dcgmDashboardHosts {
		pods := h.pods(t)
		socket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
			podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{PodResources: pods}})
		})
		base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile="+h.profile, "--compat=dcgm,native", "--compat.hostname=node-"+h.profile,
			"--path.procfs="+t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=",
			"--kubelet.pod-resources-socket="+socket)
		instance := "node-" + h.profile
		instances[instance] = h
		podsOf[instance] = pods
		targets[strings.TrimPrefix(base, "http://")] = [2]string{"gpuwatch-" + h.profile, instance}
	}

	// Scraped as the chart's ServiceMonitor makes prometheus-operator
	// scrape it (compat=dcgm,native, monitorTargetLabels auto): instance is
	// the node's name, and the DCGM_FI_* series get dcgm-exporter's chart's
	// exported_pod and exported_namespace, which the usual adapter rule
	// selects on.
	job := chartenv.ChartScrapeJob(t, "gpuwatch", targets, "compat=dcgm\\,native")
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "scrape_timeout": "1s"},
		"scrape_configs": []any{job},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, string(cfg))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartProcess(t, nil, promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promURL[len("http://"):])
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape the three gpuwatch", func() bool {
		v, ok := promQuery(t, promURL, `count(up{job="gpuwatch"} == 1)`)
		return ok && v == float64(len(dcgmDashboardHosts))
	})

	// $instance: label_values(DCGM_FI_DEV_GPU_TEMP, instance).
	var allInstances []string
	testenv.WaitFor(t, 30*time.Second, "$instance to list every target", func() bool {
		allInstances = promLabelValues(t, promURL, vars["instance"][1], vars["instance"][0])
		return len(allInstances) == len(instances)
	})
	for _, inst := range allInstances {
		if _, ok := instances[inst]; !ok {
			t.Fatalf("$instance lists %q, not a target", inst)
		}
	}
	allGPUs := promLabelValues(t, promURL, vars["gpu"][1], vars["gpu"][0])

	// panelSeries runs every query of a panel with the variables set to
	// the given values and returns the series.
	panelSeries := func(title string, exprs []string, inst, gpu []string) []map[string]string {
		r := strings.NewReplacer(`$instance`, grafanaRegex(inst), `$gpu`, grafanaRegex(gpu))
		var out []map[string]string
		for _, e := range exprs {
			out = append(out, promVector(t, promURL, r.Replace(e))...)
		}
		return out
	}
	panels := map[string][]string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			panels[p.Title] = append(panels[p.Title], tg.Expr)
		}
	}
	if len(panels) != 8 {
		t.Fatalf("the released dashboard has %d panels with queries, want 8: %v", len(panels), panels)
	}

	// All instances, all GPUs: every panel has data somewhere.
	for title, exprs := range panels {
		testenv.WaitFor(t, 15*time.Second, "panel "+title+" with All selected", func() bool {
			return len(panelSeries(title, exprs, allInstances, allGPUs)) > 0
		})
	}
	for inst, h := range instances {
		gpus := promLabelValues(t, promURL, "gpu", fmt.Sprintf(`DCGM_FI_DEV_GPU_TEMP{instance=%q}`, inst))
		if len(gpus) == 0 {
			t.Fatalf("%s: no GPU", h.profile)
		}
		for title, exprs := range panels {
			// This instance alone, all GPUs.
			got := panelSeries(title, exprs, []string{inst}, allGPUs)
			if want := !h.emptyEverywhere(title, gpus); (len(got) > 0) != want {
				t.Errorf("%s, instance alone: panel %q has %d series, want data: %v", h.profile, title, len(got), want)
			}
			for _, s := range got {
				if s["instance"] != "" && s["instance"] != inst {
					t.Errorf("%s: panel %q shows instance %s", h.profile, title, s["instance"])
				}
			}
			// Each GPU alone.
			for _, g := range gpus {
				got := panelSeries(title, exprs, []string{inst}, []string{g})
				if want := !h.emptyOn(title, g); (len(got) > 0) != want {
					t.Errorf("%s GPU %s alone: panel %q has %d series, want data: %v", h.profile, g, title, len(got), want)
				}
				for _, s := range got {
					if s["gpu"] != "" && s["gpu"] != g {
						t.Errorf("%s GPU %s alone: panel %q shows GPU %s", h.profile, g, title, s["gpu"])
					}
				}
			}
		}
		// The legend is "GPU {{gpu}}": every graph series has a gpu.
		for _, s := range panelSeries("GPU Temperature", panels["GPU Temperature"], []string{inst}, allGPUs) {
			if s["gpu"] == "" {
				t.Errorf("%s: a GPU Temperature series without gpu: %v", h.profile, s)
			}
		}
		// Each pod alone, through the Prometheus Adapter rule most HPA
		// guides give for dcgm-exporter:
		//   seriesQuery: DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}
		//   metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
		// and, for MIG instances (which have no GPU_UTIL), the
		// framebuffer.
		for _, p := range podsOf[inst] {
			c := p.Containers[0]
			// Every field carries the pod, a MIG instance's pod too
			// (dcgm-exporter's per-GPU-instance shape).
			if temp := promVector(t, promURL, fmt.Sprintf(`DCGM_FI_DEV_GPU_TEMP{instance=%q,exported_pod=%q}`, inst, p.Name)); len(temp) != 1 {
				t.Errorf("%s pod %s: DCGM_FI_DEV_GPU_TEMP has %d series, want 1: %v", h.profile, p.Name, len(temp), temp)
			}
			metric := "DCGM_FI_DEV_GPU_UTIL"
			if strings.HasPrefix(c.Devices[0].ResourceName, "nvidia.com/mig-") {
				metric = "DCGM_FI_DEV_FB_USED"
			}
			sel := fmt.Sprintf(`{instance=%q,exported_namespace=%q,exported_pod=%q}`, inst, p.Namespace, p.Name)
			series := promSeriesLabels(t, promURL, metric+sel)
			if len(series) != 1 || series[0]["exported_container"] != c.Name {
				t.Errorf("%s pod %s/%s: %s%s = %v, want one series with exported_container %s", h.profile, p.Namespace, p.Name, metric, sel, series, c.Name)
			}
			hpa := promVector(t, promURL, fmt.Sprintf(`avg(%s{exported_namespace=%q,exported_pod=~%q}) by (exported_pod)`, metric, p.Namespace, regexp.QuoteMeta(p.Name)))
			if len(hpa) != 1 || hpa[0]["exported_pod"] != p.Name {
				t.Errorf("%s pod %s: adapter metricsQuery = %v, want one value", h.profile, p.Name, hpa)
			}
		}
	}
	// The adapter's seriesQuery lists exactly the pods the kubelets report.
	var wantPods, gotPods []string
	for _, pods := range podsOf {
		for _, p := range pods {
			if !strings.HasPrefix(p.Containers[0].Devices[0].ResourceName, "nvidia.com/mig-") {
				wantPods = append(wantPods, p.Namespace+"/"+p.Name)
			}
		}
	}
	for _, s := range promSeriesLabels(t, promURL, `DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}`) {
		gotPods = append(gotPods, s["exported_namespace"]+"/"+s["exported_pod"])
	}
	slices.Sort(wantPods)
	slices.Sort(gotPods)
	if !slices.Equal(slices.Compact(gotPods), wantPods) {
		t.Errorf("adapter seriesQuery finds pods %v, want %v", gotPods, wantPods)
	}
	// The percent is the native ratio times 100, sample for sample.
	if v, ok := promQuery(t, promURL, `max(abs(DCGM_FI_DEV_GPU_UTIL{exported_pod=""} - on(instance, gpu) group_left 100 * gpu_utilization_ratio))`); !ok || v > 1e-9 {
		t.Errorf("DCGM_FI_DEV_GPU_UTIL differs from 100 × gpu_utilization_ratio by %v (present %v)", v, ok)
	}
}

// migUUID returns the MIG UUID of a simulated profile's GPU instance.
func migUUID(t *testing.T, profile, gpu, gpuInstance string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gpu.prom")
	if msg, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile="+profile, "--output="+out); code != 0 {
		t.Fatalf("textfile: %s", msg)
	}
	data, _ := os.ReadFile(out)
	for _, m := range testenv.ParseMetrics(t, string(data))["gpu_mig_info"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["gpu"] == gpu && l["gpu_instance"] == gpuInstance {
			return l["mig_uuid"]
		}
	}
	t.Fatalf("%s has no GPU instance %s on GPU %s", profile, gpuInstance, gpu)
	return ""
}

// promVector runs an instant query and returns each result's labels.
func promVector(t *testing.T, promURL, query string) []map[string]string {
	t.Helper()
	body, err := httpGetNoFail(promURL + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s %s", query, err, r.Error, body)
	}
	out := make([]map[string]string, len(r.Data.Result))
	for i, s := range r.Data.Result {
		out[i] = s.Metric
	}
	return out
}

// promSeriesLabels is /api/v1/series, which the adapter's seriesQuery uses.
func promSeriesLabels(t *testing.T, promURL, match string) []map[string]string {
	t.Helper()
	body, err := httpGetNoFail(promURL + "/api/v1/series?match[]=" + url.QueryEscape(match))
	if err != nil {
		t.Fatalf("series %s: %v", match, err)
	}
	var r struct {
		Status string              `json:"status"`
		Data   []map[string]string `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("series %s: %v %s", match, err, body)
	}
	return r.Data
}

// promLabelValues is Grafana's label_values(SELECTOR, LABEL).
func promLabelValues(t *testing.T, promURL, label, match string) []string {
	t.Helper()
	body, err := httpGetNoFail(promURL + "/api/v1/label/" + label + "/values?match[]=" + url.QueryEscape(match))
	if err != nil {
		t.Fatalf("label values %s: %v", label, err)
	}
	var r struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("label values %s: %v %s", label, err, body)
	}
	return r.Data
}

// TestDoctorDCGMDashboard: `gpuwatch doctor --compat=dcgm` names the panels
// of the released dashboard that stay empty, and on which GPUs: the same
// ones TestDCGMDashboardAndAdapterQueries finds empty in a real Prometheus
// (dcgmDashboardHosts). An empty panel is a fact of the GPU: doctor stays
// healthy. Without --compat=dcgm it says nothing about the dashboard.
func TestDoctorDCGMDashboard(t *testing.T) {
	t.Parallel()
	dash := releasedDashboard(t)
	for _, h := range dcgmDashboardHosts {
		t.Run(h.profile, func(t *testing.T) {
			args := []string{"--backend=sim", "--sim.profile=" + h.profile, "--slurm.jobs=false",
				"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket="}
			r, out, code := runDoctor(t, append(args, "--compat=dcgm,native")...)
			if code != 0 || !r.Healthy {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			gpus := gpuUUIDs(t, h.profile)
			for _, p := range dash.Panels {
				st, why := r.status("dcgm dashboard: " + p.Title)
				var missing []string
				for i := range gpus {
					if h.emptyOn(p.Title, itoa(i)) {
						missing = append(missing, itoa(i))
					}
				}
				switch {
				case len(missing) == 0 && st != "ok":
					t.Errorf("panel %q: %s (%s), want ok", p.Title, st, why)
				case len(missing) == len(gpus) && (st != "fail" || !strings.Contains(why, "empty")):
					t.Errorf("panel %q: %s (%s), want empty", p.Title, st, why)
				case len(missing) > 0 && len(missing) < len(gpus) && (st != "fail" || !strings.Contains(why, "none on GPU "+strings.Join(missing, ","))):
					t.Errorf("panel %q: %s (%s), want none on GPU %s", p.Title, st, why, strings.Join(missing, ","))
				}
			}
			r, _, _ = runDoctor(t, args...)
			if st, _ := r.status("dcgm dashboard: GPU Temperature"); st != "absent" {
				t.Errorf("without --compat=dcgm doctor reports the dashboard: %s", st)
			}
		})
	}
}
