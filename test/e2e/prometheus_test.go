//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// everyGroup names one metric per metric group the core issue promises, each
// with the labels of one series that dgx-h100 must expose.
var everyGroup = []struct {
	name   string
	labels map[string]string
}{
	{"gpu_up", map[string]string{"gpu": "0"}},
	{"gpu_info", map[string]string{"gpu": "0"}},
	{"gpu_utilization_ratio", map[string]string{"gpu": "0"}},
	{"gpu_memory_used_bytes", map[string]string{"gpu": "0"}},
	{"gpu_bar1_memory_used_bytes", map[string]string{"gpu": "0"}},
	{"gpu_temperature_celsius", map[string]string{"gpu": "0"}},
	{"gpu_power_usage_watts", map[string]string{"gpu": "0"}},
	{"gpu_energy_joules_total", map[string]string{"gpu": "0"}},
	{"gpu_clock_hertz", map[string]string{"gpu": "0", "clock": "sm"}},
	{"gpu_clock_event_active", map[string]string{"gpu": "0"}},
	{"gpu_pcie_transmit_bytes_total", map[string]string{"gpu": "0"}},
	{"gpu_ecc_errors_total", map[string]string{"gpu": "0"}},
	{"gpu_remapped_rows", map[string]string{"gpu": "0"}},
	{"gpu_nvlink_transmit_bytes_total", map[string]string{"gpu": "0", "link": "17"}},
	{"gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": "79"}},
	{"gpu_gpm_sm_active_ratio", map[string]string{"gpu": "0"}},
	// GPU 7 runs in MIG mode: per-instance identity, memory and GPM (Hopper).
	{"gpu_mig_info", map[string]string{"gpu": "7", "gpu_instance": "1", "profile": "3g.40gb"}},
	{"gpu_mig_memory_used_bytes", map[string]string{"gpu": "7", "gpu_instance": "1"}},
	{"gpu_mig_gpm_sm_active_ratio", map[string]string{"gpu": "7", "gpu_instance": "1"}},
	{"gpu_process_memory_used_bytes", map[string]string{"gpu": "0"}},
	{"gpuwatch_collector_success", map[string]string{"collector": "nvlink"}},
}

// TestPrometheusScrapesSimulatedDGX starts the built binary on the dgx-h100
// profile and a real Prometheus scraping it, then checks through PromQL that
// every metric group arrives with the values the exporter serves.
func TestPrometheusScrapesSimulatedDGX(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, "profile: dgx-h100\npin_time: 1h\nfaults:\n  - {gpu: 2, xid: 79, at: 1h}\n")

	// BAR1 is off by default; turning it on here also proves --metrics.config.
	metricsConfig := filepath.Join(dir, "metrics.yaml")
	writeFile(t, metricsConfig, "enable: [\"gpu_bar1_memory_*\"]\n")

	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+simConfig, "--metrics.config="+metricsConfig)

	// The XID reader runs on its own goroutine; wait until it has counted,
	// and until the first GPM window (a second) has closed.
	var exposed map[string]float64
	testenv.WaitFor(t, 15*time.Second, "gpu_xid_errors_total and GPM on /metrics", func() bool {
		fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		_, ok := testenv.Sample(fams, "gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": "79"})
		if _, gpm := testenv.Sample(fams, "gpu_gpm_sm_active_ratio", map[string]string{"gpu": "0"}); !ok || !gpm {
			return false
		}
		exposed = map[string]float64{}
		for _, g := range everyGroup {
			v, ok := testenv.Sample(fams, g.name, g.labels)
			if !ok {
				t.Fatalf("/metrics lacks %s%v", g.name, g.labels)
			}
			exposed[g.name] = v
		}
		return true
	})

	promPort := testenv.FreePort(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpuwatch
    static_configs:
      - targets: [%q]
`, base[len("http://"):]))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	testenv.StartProcess(t, nil, promBin,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promURL[len("http://"):],
	)

	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape gpuwatch", func() bool {
		v, ok := promQuery(t, promURL, `up{job="gpuwatch"}`)
		return ok && v == 1
	})
	for _, g := range everyGroup {
		q := g.name + selector(g.labels)
		var got float64
		testenv.WaitFor(t, 10*time.Second, "PromQL "+q, func() bool {
			v, ok := promQuery(t, promURL, q)
			got = v
			return ok
		})
		if want := exposed[g.name]; math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("PromQL %s = %v, exporter served %v", q, got, want)
		}
	}
	// The simulated fleet is eight GPUs, all up.
	if v, ok := promQuery(t, promURL, `sum(gpu_up)`); !ok || v != 8 {
		t.Errorf("sum(gpu_up) = %v (present %v), want 8", v, ok)
	}
	if v, ok := promQuery(t, promURL, `count(gpu_nvlink_up{gpu="0"})`); !ok || v != 18 {
		t.Errorf("H100 SXM NVLink count = %v, want 18", v)
	}
}

func selector(labels map[string]string) string {
	s := "{"
	first := true
	for k, v := range labels {
		if !first {
			s += ","
		}
		first = false
		s += k + "=" + strconv.Quote(v)
	}
	return s + "}"
}

// promQuery runs an instant query and returns the first sample's value.
func promQuery(t *testing.T, promURL, query string) (float64, bool) {
	t.Helper()
	resp, err := httpGetNoFail(promURL + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, false
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil || r.Status != "success" || len(r.Data.Result) == 0 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
