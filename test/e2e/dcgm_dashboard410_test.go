//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
	"github.com/gpuwatch/gpuwatch/internal/testenv/chartenv"
)

// The dashboard of dcgm-exporter 4.9 and 4.10 could not be obtained (see
// docs/dcgm-compat.md), so dashboard410Panels builds its queries from the
// released dashboard (Grafana 12239) and the renames of 4.9 and 4.10: each
// name replaced by its new one, the unit conversions the old queries
// carried dropped or added so each panel keeps its unit, and the hostname
// in every legend, as 4.10.0's release notes say its dashboard does.
func dashboard410Panels(t *testing.T) (panels map[string][]string, vars map[string][2]string) {
	t.Helper()
	dash := releasedDashboard(t)
	var pairs []string
	for _, r := range dcgmRenameRows(t) {
		pairs = append(pairs, r.before+"{", r.after+"{", r.before+",", r.after+",")
	}
	rename := strings.NewReplacer(pairs...)
	units := strings.NewReplacer(
		// Hertz now: no MHz to convert.
		"DCGM_FI_DEV_SM_CLOCK_HERTZ{instance=~\"$instance\", gpu=~\"$gpu\"} * 1000000", "DCGM_FI_DEV_SM_CLOCK_HERTZ{instance=~\"$instance\", gpu=~\"$gpu\"}",
		// A 0-1 ratio now, in a percent panel.
		"DCGM_FI_DEV_GPU_UTIL_RATIO{instance=~\"$instance\", gpu=~\"$gpu\"}", "100 * DCGM_FI_DEV_GPU_UTIL_RATIO{instance=~\"$instance\", gpu=~\"$gpu\"}",
		// Bytes now, in a MiB panel.
		"DCGM_FI_DEV_FB_USED_BYTES{instance=~\"$instance\", gpu=~\"$gpu\"}", "DCGM_FI_DEV_FB_USED_BYTES{instance=~\"$instance\", gpu=~\"$gpu\"} / 1048576",
	)
	panels = map[string][]string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			panels[p.Title] = append(panels[p.Title], units.Replace(rename.Replace(tg.Expr)))
		}
	}
	vars = dashboardVariables(t, dash)
	for name, v := range vars {
		for _, r := range dcgmRenameRows(t) {
			if v[0] == r.before {
				vars[name] = [2]string{r.after, v[1]}
			}
		}
	}
	return panels, vars
}

// TestDCGMDashboard410Queries runs the 4.10 generation of the dashboard
// (dashboard410Panels) the way TestDCGMDashboardAndAdapterQueries runs the
// released one: a real Prometheus scraping gpuwatch --compat=dcgm,native
// --compat.dcgm-version=4.10 on an H100 DGX, an A100 DGX with MIG and a
// GeForce card through the chart's scrape job; every instance and every
// GPU chosen alone, every panel with data except where the released
// dashboard's is empty too, every graph series with its hostname, and
// the converted panels equal to the native readings.
func TestDCGMDashboard410Queries(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	panels, vars := dashboard410Panels(t)
	if len(panels) != 8 || vars["instance"][0] != "DCGM_FI_DEV_GPU_TEMP_CELSIUS" {
		t.Fatalf("derived dashboard: %d panels, variables %v", len(panels), vars)
	}
	for title, exprs := range panels {
		for _, e := range exprs {
			for _, m := range dcgmRenameRows(t) {
				if strings.Contains(e, m.before+"{") {
					t.Fatalf("panel %q still queries %s: %s", title, m.before, e)
				}
			}
		}
	}

	targets := map[string][2]string{}
	instances := map[string]dcgmDashboardHost{}
	for _, h := range dcgmDashboardHosts {
		pods := h.pods(t)
		socket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
			podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{PodResources: pods}})
		})
		base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile="+h.profile, "--compat=dcgm,native", "--compat.dcgm-version=4.10",
			"--compat.hostname=node-"+h.profile, "--path.procfs="+t.TempDir(), "--slurm.jobs=false", "--docker.socket=", "--cri.socket=",
			"--kubelet.pod-resources-socket="+socket)
		instances["node-"+h.profile] = h
		targets[strings.TrimPrefix(base, "http://")] = [2]string{"gpuwatch-" + h.profile, "node-" + h.profile}
	}
	job := chartenv.ChartScrapeJob(t, "gpuwatch", targets, "compat=dcgm\\,native", "compatDCGMVersion=4.10")
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
	var allInstances []string
	testenv.WaitFor(t, 30*time.Second, "$instance to list every target", func() bool {
		allInstances = promLabelValues(t, promURL, vars["instance"][1], vars["instance"][0])
		return len(allInstances) == len(instances)
	})
	allGPUs := promLabelValues(t, promURL, vars["gpu"][1], vars["gpu"][0])
	panelSeries := func(exprs []string, inst, gpu []string) []map[string]string {
		r := strings.NewReplacer(`$instance`, grafanaRegex(inst), `$gpu`, grafanaRegex(gpu))
		var out []map[string]string
		for _, e := range exprs {
			out = append(out, promVector(t, promURL, r.Replace(e))...)
		}
		return out
	}
	for title, exprs := range panels {
		testenv.WaitFor(t, 15*time.Second, "panel "+title+" with All selected", func() bool {
			return len(panelSeries(exprs, allInstances, allGPUs)) > 0
		})
	}
	for inst, h := range instances {
		gpus := promLabelValues(t, promURL, "gpu", fmt.Sprintf(`DCGM_FI_DEV_GPU_TEMP_CELSIUS{instance=%q}`, inst))
		if len(gpus) == 0 {
			t.Fatalf("%s: no GPU", h.profile)
		}
		for title, exprs := range panels {
			if got := panelSeries(exprs, []string{inst}, allGPUs); (len(got) > 0) != !h.emptyEverywhere(title, gpus) {
				t.Errorf("%s, instance alone: panel %q has %d series", h.profile, title, len(got))
			}
			for _, g := range gpus {
				got := panelSeries(exprs, []string{inst}, []string{g})
				if (len(got) > 0) != !h.emptyOn(title, g) {
					t.Errorf("%s GPU %s alone: panel %q has %d series", h.profile, g, title, len(got))
				}
				for _, s := range got {
					// The legend names the host: every graph series has it.
					if s["gpu"] != "" && s["hostname"] != inst {
						t.Errorf("%s GPU %s: panel %q series without its hostname: %v", h.profile, g, title, s)
					}
				}
			}
		}
	}
	// The converted panels equal the native readings, sample for sample.
	for what, q := range map[string]string{
		"GPU Utilization": `max(abs(100 * DCGM_FI_DEV_GPU_UTIL_RATIO{exported_pod=""} - on(instance, gpu) group_left 100 * gpu_utilization_ratio))`,
		"GPU SM Clocks":   `max(abs(DCGM_FI_DEV_SM_CLOCK_HERTZ{exported_pod="", GPU_I_ID=""} - on(instance, gpu) group_left gpu_clock_hertz{clock="sm"}))`,
	} {
		if v, ok := promQuery(t, promURL, q); !ok || v > 1e-9 {
			t.Errorf("%s differs from the native reading by %v (present %v)", what, v, ok)
		}
	}
}
