package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
	"github.com/gpuwatch/gpuwatch/internal/testenv/chartenv"
)

// TestChartDCGMTargetLabels renders the chart's ServiceMonitor, translates
// its relabelings into a Prometheus scrape configuration with the target
// labels the operator adds, and scrapes gpuwatch --compat=dcgm,native with a
// real Prometheus. With monitorTargetLabels auto (so dcgm-exporter, since
// compat includes dcgm), the DCGM_FI_* series carry what dcgm-exporter's
// chart gives them (exported_pod, exported_namespace, exported_container
// and the exporter pod's labels), so adapter rules written for it find
// them; the native series keep the GPU's owner as pod and namespace. With
// drop, DCGM_FI_* series keep pod and namespace too.
func TestChartDCGMTargetLabels(t *testing.T) {
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	for _, mode := range []string{"auto", "drop"} {
		t.Run(mode, func(t *testing.T) {
			dir := shortTempDir(t)
			socket := filepath.Join(dir, "kubelet.sock")
			serveKubelet(t, socket, simGPU0UUID(t))
			port := testenv.FreePort(t)
			startGpuwatch(t, []string{"--web.listen-address=127.0.0.1:" + fmt.Sprint(port), "--backend=sim", "--sim.profile=h100",
				"--compat=dcgm,native", "--path.procfs=" + t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=",
				"--kubelet.pod-resources-socket=" + socket}, nil)

			// The chart's own ServiceMonitor, as the operator would turn
			// it into a scrape job.
			job := chartenv.ChartScrapeJob(t, "serviceMonitor/gpuwatch/gpuwatch/0",
				map[string][2]string{fmt.Sprintf("127.0.0.1:%d", port): {"gpuwatch-x7k2p", testNodeName}},
				"compat=dcgm\\,native", "monitorTargetLabels="+mode)
			cfg, err := yaml.Marshal(map[string]any{
				"global":         map[string]string{"scrape_interval": "1s", "scrape_timeout": "1s"},
				"scrape_configs": []any{job},
			})
			if err != nil {
				t.Fatal(err)
			}
			cfgPath := filepath.Join(dir, "prometheus.yml")
			if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			promURL := startPrometheus(t, promBin, cfgPath, filepath.Join(dir, "tsdb"))
			testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape gpuwatch", func() bool {
				return len(promSeries(t, promURL, `DCGM_FI_DEV_GPU_TEMP`)) > 0 && len(promSeries(t, promURL, `gpu_kubernetes_allocation_info`)) > 0
			})

			if leaked := promSeries(t, promURL, `{__name__=~".+",gpuwatch_dcgm!=""}`); len(leaked) > 0 {
				t.Errorf("the helper label reaches Prometheus: %v", leaked[0])
			}
			if stray := promSeries(t, promURL, `{__name__=~"gpu_.+",service!=""}`); len(stray) > 0 {
				t.Errorf("a native series carries the target's service: %v", stray[0])
			}
			// The native series: the GPU's owner as pod and namespace,
			// whatever the mode.
			native := promSeries(t, promURL, `gpu_kubernetes_allocation_info`)
			if len(native) != 1 || native[0]["pod"] != "trainer-0" || native[0]["namespace"] != "research" || native[0]["exported_pod"] != "" || native[0]["instance"] != testNodeName {
				t.Errorf("native allocation series = %v, want pod trainer-0 in research on instance %s", native, testNodeName)
			}
			// A native series without an owner has no pod at all.
			for _, up := range promSeries(t, promURL, `gpu_up`) {
				for _, l := range []string{"pod", "namespace", "container", "exported_pod", "service", "endpoint"} {
					if up[l] != "" {
						t.Errorf("gpu_up has %s=%q: %v", l, up[l], up)
					}
				}
			}
			util := promSeries(t, promURL, `DCGM_FI_DEV_GPU_UTIL`)
			if len(util) != 1 {
				t.Fatalf("DCGM_FI_DEV_GPU_UTIL: %v, want the one GPU", util)
			}
			got := util[0]
			want := map[string]string{"pod": "trainer-0", "namespace": "research", "container": "train", "instance": testNodeName}
			if mode == "auto" {
				// dcgm-exporter's chart: honorLabels false, the target's labels win.
				want = map[string]string{
					"exported_pod": "trainer-0", "exported_namespace": "research", "exported_container": "train",
					"pod": "gpuwatch-x7k2p", "namespace": "gpuwatch", "container": "gpuwatch", "service": "gpuwatch", "endpoint": "metrics",
					"instance": testNodeName,
				}
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("DCGM_FI_DEV_GPU_UTIL %s = %q, want %q (series %v)", k, got[k], v, got)
				}
			}
			// The usual Prometheus Adapter rules for dcgm-exporter: on
			// exported_* (its chart's outcome), and plain, where Prometheus
			// keeps the series' own pod (honor_labels: true, or drop here).
			adapter := promSeries(t, promURL, `DCGM_FI_DEV_GPU_UTIL{exported_namespace!="",exported_pod!=""}`)
			if wantN := map[string]int{"auto": 1, "drop": 0}[mode]; len(adapter) != wantN {
				t.Errorf("adapter seriesQuery on exported_* found %d series, want %d: %v", len(adapter), wantN, adapter)
			}
			plain := promSeries(t, promURL, `DCGM_FI_DEV_GPU_UTIL{namespace="research",pod="trainer-0"}`)
			if wantN := map[string]int{"auto": 0, "drop": 1}[mode]; len(plain) != wantN {
				t.Errorf("plain adapter seriesQuery found %d series, want %d: %v", len(plain), wantN, plain)
			}
		})
	}
}

// startPrometheus runs Prometheus on a free port until the test ends and
// returns its URL.
func startPrometheus(t *testing.T, bin, config, tsdb string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+tsdb, "--web.listen-address="+addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus:\n%s", out.String())
		}
	})
	return "http://" + addr
}

// promSeries is /api/v1/series for one selector; nil while Prometheus does
// not answer yet.
func promSeries(t *testing.T, promURL, match string) []map[string]string {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/series?match[]=" + url.QueryEscape(match))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		Status string              `json:"status"`
		Error  string              `json:"error"`
		Data   []map[string]string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		if resp.StatusCode == http.StatusBadRequest {
			t.Fatalf("series %s: %s", match, r.Error)
		}
		return nil
	}
	return r.Data
}
