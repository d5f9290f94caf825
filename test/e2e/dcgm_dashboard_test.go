package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// dashboard12239 is every query of dcgm-exporter's reference dashboard
// (grafana/dcgm-exporter-dashboard.json, Grafana.com 12239): the panel
// title, its PromQL with the Hostname and gpu variables set to "All", and the
// labels its legend uses.
var dashboard12239 = []struct {
	panel, expr string
	legend      []string
}{
	{"GPU Temperature", `max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)`, []string{"Hostname", "gpu"}},
	{"GPU Avg. Temp", `avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})`, nil},
	{"GPU Power Usage", `max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)`, []string{"Hostname", "gpu"}},
	{"GPU Power Total", `sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))`, nil},
	{"GPU SM Clocks", `max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000) by (Hostname, UUID, gpu)`, []string{"Hostname", "gpu", "UUID"}},
	{"GPU Utilization", `max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
	{"Tensor Core Utilization", `max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
	{"GPU Framebuffer Mem Used", `max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)`, []string{"Hostname", "gpu"}},
}

// TestDCGMDashboardAndAdapterQueries scrapes gpuwatch --compat=dcgm,native
// (dgx-h100, a pod holding GPU 1 through a kubelet pod-resources API) with a
// real Prometheus labelled as a ServiceMonitor target is, then runs the
// dashboard's variable and panel queries and the Prometheus Adapter rule
// that scales a Deployment on DCGM_FI_DEV_GPU_UTIL.
func TestDCGMDashboardAndAdapterQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	uuids := gpuUUIDs(t, "dgx-h100")
	kubeletSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{
			PodResources: []*podresourcesv1.PodResources{
				{Name: "trainer-0", Namespace: "research", Containers: []*podresourcesv1.ContainerResources{{
					Name:    "pytorch",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuids[1]}}},
				}}},
			},
		}})
	})
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100", "--compat=dcgm,native", "--compat.hostname=gpu-node-1",
		"--path.procfs="+t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=",
		"--kubelet.pod-resources-socket="+kubeletSocket)

	dir := t.TempDir()
	promPort := testenv.FreePort(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	// A ServiceMonitor target carries the exporter pod's own namespace and
	// pod labels; with honor_labels false, Prometheus renames the series'
	// namespace and pod to exported_namespace and exported_pod, which is
	// why the usual adapter rule selects on those.
	writeFile(t, promConfig, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpuwatch
    honor_labels: false
    static_configs:
      - targets: [%q]
        labels: {namespace: gpu-monitoring, pod: gpuwatch-x7k2p}
`, base[len("http://"):]))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	startProcess(t, promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promURL[len("http://"):])
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape gpuwatch", func() bool {
		v, ok := promQuery(t, promURL, `up{job="gpuwatch"}`)
		return ok && v == 1
	})

	// The dashboard's variables: label_values(DCGM_FI_DEV_FB_FREE, Hostname)
	// and label_values(DCGM_FI_DEV_FB_FREE{Hostname=~"$Hostname"}, gpu).
	if got := promLabelValues(t, promURL, "Hostname", `DCGM_FI_DEV_FB_FREE`); strings.Join(got, ",") != "gpu-node-1" {
		t.Errorf("$Hostname values = %v, want [gpu-node-1]", got)
	}
	if got := promLabelValues(t, promURL, "gpu", `DCGM_FI_DEV_FB_FREE{Hostname=~".+"}`); len(got) != 8 {
		t.Errorf("$gpu values = %v, want the 8 GPUs", got)
	}

	all := strings.NewReplacer(`"$Hostname"`, `".+"`, `"$gpu"`, `".+"`)
	for _, p := range dashboard12239 {
		expr := all.Replace(p.expr)
		var result []map[string]string
		testenv.WaitFor(t, 15*time.Second, "panel "+p.panel, func() bool {
			result = promVector(t, promURL, expr)
			return len(result) > 0
		})
		for _, series := range result {
			for _, l := range p.legend {
				if series[l] == "" {
					t.Errorf("panel %q: series %v lacks the legend label %s", p.panel, series, l)
				}
			}
		}
	}
	// GPU 7 runs MIG: its framebuffer panel shows one line per GPU instance.
	if mig := promVector(t, promURL, `DCGM_FI_DEV_FB_USED{gpu="7", GPU_I_ID!=""}`); len(mig) == 0 || mig[0]["GPU_I_PROFILE"] == "" {
		t.Errorf("no per-GPU-instance DCGM_FI_DEV_FB_USED for the MIG GPU: %v", mig)
	}

	// The Prometheus Adapter rule most HPA guides give for dcgm-exporter:
	//   seriesQuery: DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}
	//   resources: {overrides: {exported_namespace: {resource: namespace}, exported_pod: {resource: pod}}}
	//   metricsQuery: avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
	series := promSeriesLabels(t, promURL, `DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}`)
	if len(series) != 1 || series[0]["exported_namespace"] != "research" || series[0]["exported_pod"] != "trainer-0" || series[0]["container"] != "pytorch" {
		t.Fatalf("adapter seriesQuery found %v, want the one series of research/trainer-0", series)
	}
	hpa := promVector(t, promURL, `avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="research",exported_pod=~"trainer-0"}) by (exported_pod)`)
	if len(hpa) != 1 || hpa[0]["exported_pod"] != "trainer-0" {
		t.Errorf("adapter metricsQuery = %v, want one value for trainer-0", hpa)
	}
	// The percent is the native ratio times 100, sample for sample.
	if v, ok := promQuery(t, promURL, `max(abs(DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=""} - on(gpu) group_left 100 * gpu_utilization_ratio))`); !ok || v > 1e-9 {
		t.Errorf("DCGM_FI_DEV_GPU_UTIL differs from 100 × gpu_utilization_ratio by %v (present %v)", v, ok)
	}
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
