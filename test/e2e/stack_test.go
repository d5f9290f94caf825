//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/deploycheck"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// notProducible lists the dashboard queries that no simulated host here can
// give data, and why. The test fails if one of them does return data (the
// entry is then stale). Queries over metrics still pending (NAMES.md, not
// yet in the catalog) are allowed to return nothing without an entry here.
var notProducible = map[string]string{
	`gpuwatch-node / "Driver" B`:    "gpuwatch_driver_limited_group has series only for metric groups an old driver library cannot serve; every simulated host here has a current one",
	`gpuwatch-node / "Fan speed" A`: "no simulated profile in this fleet has a fan (rtx4090 does; datacenter GPUs do not)",
}

// slurmCollector reports whether a query reads the cluster metrics of
// --collector.slurm (slurm_*), which need a real slurmctld answering squeue,
// sinfo and sdiag: no simulated host has one. internal/slurm evaluates those
// queries on real Slurm output (TestDashboardJoins, the real-Slurm collector
// tests). The compute-node side (gpu_slurm_job_info) comes from the
// simulator's demo owners and is checked here.
func slurmCollector(sels []deploycheck.Selector) bool {
	for _, s := range sels {
		if strings.HasPrefix(s.Metric, "slurm_") {
			return true
		}
	}
	return false
}

// TestStackDashboardsReturnData runs the compose stack's Prometheus
// configuration, with the shipped rules, against three simulated GPU hosts
// listed through file_sd and a real node_exporter, then sends every
// dashboard query as Grafana would and requires data from each. Then the
// same scrape configuration with VictoriaMetrics.
func TestStackDashboardsReturnData(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Prometheus, VictoriaMetrics and node_exporter; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	nodeBin := testenv.RequireTool(t, "prometheus-node-exporter", "prometheus-node-exporter")
	vmBin := testenv.RequireTool(t, "victoria-metrics", "victoria-metrics")
	root := testenv.RepoRoot()
	dir := t.TempDir()

	nodePort := testenv.FreePort(t)
	testenv.StartProcess(t, nil, nodeBin, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nodePort),
		"--collector.disable-defaults", "--collector.cpu", "--collector.meminfo", "--collector.loadavg")
	hosts := startSimulatedFleet(t, root, dir)

	// The file_sd lists, as deploy/compose/README.md tells to write them
	// for several hosts; node_exporter runs beside node-a.
	targets := filepath.Join(dir, "targets")
	if err := os.Mkdir(targets, 0o755); err != nil {
		t.Fatal(err)
	}
	var gw []deploycheck.FileSDGroup
	for _, h := range hosts {
		gw = append(gw, deploycheck.FileSDGroup{Targets: []string{h.addr}, Labels: map[string]string{"instance": h.name, "cluster": "lab"}})
	}
	writeJSON(t, filepath.Join(targets, "gpuwatch.yml"), gw)
	writeJSON(t, filepath.Join(targets, "node.yml"), []deploycheck.FileSDGroup{
		{Targets: []string{fmt.Sprintf("127.0.0.1:%d", nodePort)}, Labels: map[string]string{"instance": "node-a", "cluster": "lab"}}})

	promConfig := stackPrometheusConfig(t, root, targets, filepath.Join(dir, "prometheus.yml"))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	prom := testenv.StartProcess(t, nil, promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+strings.TrimPrefix(promURL, "http://"))
	vmURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	vm := testenv.StartProcess(t, nil, vmBin, "-promscrape.config="+promConfig, "-storageDataPath="+filepath.Join(dir, "vm"),
		"-httpListenAddr="+strings.TrimPrefix(vmURL, "http://"), "-search.latencyOffset=0s", "-loggerLevel=ERROR",
		// The same file as Prometheus; rule_files and evaluation_interval are
		// for Prometheus's rule engine, which VictoriaMetrics does not have.
		"-promscrape.config.strictParse=false")

	c, err := deploycheck.Load(deploycheck.RecordingRules(root))
	if err != nil {
		t.Fatal(err)
	}
	dashboards, err := deploycheck.LoadDashboards(filepath.Join(root, "deploy", "grafana", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}

	for _, engine := range []struct {
		name, url string
		proc      *testenv.Process
		// skip says why a query cannot return data on this engine.
		skip func(deploycheck.Query, []deploycheck.Selector) string
	}{
		{"Prometheus", promURL, prom, func(deploycheck.Query, []deploycheck.Selector) string { return "" }},
		{"VictoriaMetrics", vmURL, vm, func(q deploycheck.Query, sels []deploycheck.Selector) string {
			if strings.Contains(q.Expr, "[1h:])") {
				// The GPU-hours panels count evaluation steps over an hour. An
				// instant query's subquery step on VictoriaMetrics is its
				// default step (5m), aligned to the clock, so it has a point
				// only once data spans a 5m boundary; this test runs for seconds.
				return "an hour's subquery needs data older than VictoriaMetrics' 5m default step"
			}
			for _, s := range sels {
				if c[s.Metric].Origin == deploycheck.FromRecording || s.Metric == "ALERTS" {
					return "recording rules and ALERTS come from a rule engine; VictoriaMetrics runs here without vmalert, so they are checked on Prometheus only"
				}
			}
			return ""
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			waitForFleet(t, engine.url, engine.proc, len(hosts))
			for name := range deploycheck.NodeExporterMetrics {
				if !hasData(t, engine.url, name) {
					t.Errorf("node_exporter does not export %s, which the dashboards use", name)
				}
			}
			checked := 0
			for _, d := range dashboards {
				for _, q := range d.Queries() {
					expr := deploycheck.Substitute(q.Expr, d.AllValues())
					sels, err := deploycheck.Parse(expr)
					if err != nil {
						t.Errorf("%s: %v", q, err)
						continue
					}
					if why := engine.skip(q, sels); why != "" {
						continue
					}
					got := hasData(t, engine.url, expr)
					reason, listed := notProducible[q.String()]
					switch {
					case slurmCollector(sels) && !got:
					case got && listed:
						t.Errorf("%s returns data but is listed as not producible (%s): remove it from notProducible", q, reason)
					case !got && !listed && !namesPending(c, sels):
						t.Errorf("%s returns no data on %s:\n  %s", q, engine.name, expr)
					}
					checked++
				}
			}
			t.Logf("%d dashboard queries sent to %s", checked, engine.name)
		})
	}

	// The shipped rules run in that Prometheus: recorded series appear, the
	// lost GPU of node-b raises GPULost (pending for its `for`), and the
	// first XID 79 of its GPU 4 fires GPUXIDCritical.
	// The alert can fire only if Prometheus scraped node-b before its XID.
	if v, ok := promQuery(t, promURL, `min_over_time(gpu_xid_events_total{instance="node-b",gpu="4"}[5m])`); !ok || v != 0 {
		t.Fatalf("Prometheus's first scrape of node-b came after its XID (earliest gpu_xid_events_total %v, present %v): the machine is too slow for the 15 s the fault waits", v, ok)
	}
	for _, q := range []string{`user:gpu_process_memory_used_bytes:sum{user!=""}`, `slurm_job:gpu_hours:1h`, `namespace_pod:gpu_allocated:count`,
		`compose_service:gpu_process_memory_used_bytes:sum{compose_project="lab",compose_service="trainer"}`,
		`ALERTS{alertname="GPULost",instance="node-b",gpu="6"}`,
		`ALERTS{alertname="GPUXIDCritical",alertstate="firing",instance="node-b",gpu="4",xid="79"}`} {
		testenv.WaitFor(t, 20*time.Second, "Prometheus rules: "+q, func() bool { return hasData(t, promURL, q) })
	}
}

// simHost is one simulated GPU host gpuwatch serves.
type simHost struct{ name, addr string }

// startSimulatedFleet starts three gpuwatch instances on different profiles:
//   - node-a runs the compose stack's gpuwatch-sim command as it is (a DGX
//     H100 whose demo owners are users, compose services, pods and Slurm
//     jobs, through the real attribution code);
//   - node-c is a V100 (page retirement instead of row remapping) whose
//     process runs in a compose service's container (Podman's API);
//   - node-b, started last, runs the compose stack's GPU command on a
//     simulated DGX A100 with MIG, an XID 79 and a GPU falling off the bus,
//     and an idle GPU a pod holds.
func startSimulatedFleet(t *testing.T, root, dir string) []simHost {
	t.Helper()
	simCmd := composeCommand(t, root, "gpuwatch-sim")
	gpuCmd := composeCommand(t, root, "gpuwatch")

	a, _ := startGpuwatch(t, simCmd...)

	// node-c's GPU process runs in a container of compose service lab/trainer,
	// named by a real Podman API (created, as containers cannot start here).
	podman := testenv.StartPodman(t)
	id := podman.Create(t, "lab-trainer-1", map[string]string{
		"com.docker.compose.project": "lab", "com.docker.compose.service": "trainer"})
	proc := filepath.Join(dir, "proc")
	const pid = "1018"
	testenv.CopyDir(t, filepath.Join(fixtureProc, pid), filepath.Join(proc, pid))
	writeFile(t, filepath.Join(proc, pid, "cgroup"), "0::/machine.slice/libpod-"+id+".scope/container\n")
	simC := filepath.Join(dir, "node-c.yaml")
	writeFile(t, simC, "profile: v100\nprocesses:\n  - {gpu: 0, pid: "+pid+", used_memory_bytes: 1073741824, sm_utilization: 0.5}\n")
	c, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+simC, "--path.procfs="+proc,
		"--docker.socket=unix://"+podman.Socket, "--attribution.timeout=5s", "--slurm.jobs=false")

	a100 := gpuUUIDs(t, "dgx-a100-mig")
	kubeletB := fakeKubeletSocket(t, map[string]string{"users/idle-notebook": a100[7]})
	simB := filepath.Join(dir, "node-b.yaml")
	// The XID comes after the engines' first scrapes, so that Prometheus sees
	// the first XID of code 79 happen and the shipped GPUXIDCritical fires:
	// node-b starts last, right before the engines, and the XID waits 15 s.
	writeFile(t, simB, "profile: dgx-a100-mig\nfaults:\n  - {gpu: 4, xid: 79, at: 15s}\n  - {gpu: 6, lost_after: 2s}\n")
	b, _ := startGpuwatch(t, append(gpuCmd, "--backend=sim", "--sim.config="+simB,
		"--kubelet.pod-resources-socket="+kubeletB, "--cri.socket=", "--slurm.jobs=false")...)
	return []simHost{{"node-a", strings.TrimPrefix(a, "http://")}, {"node-b", strings.TrimPrefix(b, "http://")}, {"node-c", strings.TrimPrefix(c, "http://")}}
}

// composeCommand is a compose service's gpuwatch arguments, as compose-go
// loads them (both profiles on).
func composeCommand(t *testing.T, root, service string) []string {
	t.Helper()
	p, err := deploycheck.LoadCompose(root, "COMPOSE_PROFILES=gpu,sim", "GPUWATCH_SIM_PROFILE=dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.GetService(service)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(s.Command)
}

// fakeKubeletSocket serves pod-resources allocations: "namespace/pod" →
// GPU UUID.
func fakeKubeletSocket(t *testing.T, pods map[string]string) string {
	t.Helper()
	var resp podresourcesv1.ListPodResourcesResponse
	for pod, uuid := range pods {
		ns, name, _ := strings.Cut(pod, "/")
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Name: name, Namespace: ns,
			Containers: []*podresourcesv1.ContainerResources{{Name: "main",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuid}}}}}})
	}
	return serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &resp})
	})
}

// stackPrometheusConfig writes deploy/compose's prometheus.yml with its
// container paths pointing at the shipped rules and the test's file_sd
// lists, and 2 s scrape and evaluation intervals (a 2 s scrape timeout
// leaves room on a busy CI machine).
func stackPrometheusConfig(t *testing.T, root, targets, out string) string {
	t.Helper()
	cfg, err := deploycheck.LoadPrometheusConfig(filepath.Join(root, deploycheck.ComposeDir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Rewrite(func(p string) (string, error) {
		switch {
		case strings.HasPrefix(p, "/etc/prometheus/rules/"):
			return filepath.Join(root, "deploy", "prometheus", filepath.Base(p)), nil
		case strings.HasPrefix(p, "/etc/prometheus/targets/"):
			return filepath.Join(targets, filepath.Base(p)), nil
		}
		return "", fmt.Errorf("prometheus.yml: unexpected path %s", p)
	}, "2s")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Write(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(data))
}

// waitForFleet waits until the engine has scraped every gpuwatch target and
// holds enough samples for the dashboards' rate() windows.
func waitForFleet(t *testing.T, base string, engine *testenv.Process, hosts int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if engine.Exited() {
			t.Fatalf("%s exited:\n%s", base, engine.Output.String())
		}
		v, ok := promQuery(t, base, `count(count_over_time(up{job="gpuwatch"}[1m]) >= 4)`)
		if ok && int(v) == hosts {
			break
		}
		if time.Now().After(deadline) {
			body, _ := httpGetNoFail(base + "/api/v1/query?query=" + url.QueryEscape(`up{job="gpuwatch"}`))
			t.Fatalf("%s did not scrape the %d gpuwatch targets in 90s; up: %s", base, hosts, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	testenv.WaitFor(t, 45*time.Second, base+" to see node-b's XID and lost GPU", func() bool {
		return hasData(t, base, `gpu_xid_errors_total{instance="node-b"}`) && hasData(t, base, `gpu_up{instance="node-b"} == 0`)
	})
}

// hasData runs an instant query and reports whether it returned anything.
func hasData(t *testing.T, base, query string) bool {
	t.Helper()
	body, err := httpGetNoFail(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Errorf("query %s: %v", query, err)
		return false
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Errorf("query %s: %v %s", query, err, body)
		return false
	}
	var result []any
	if err := json.Unmarshal(r.Data.Result, &result); err != nil {
		return true // a scalar or string result is data
	}
	return len(result) > 0
}

// namesPending reports whether a query reads a metric agreed in NAMES.md
// that the exporter does not serve yet.
func namesPending(c deploycheck.Catalog, sels []deploycheck.Selector) bool {
	for _, s := range sels {
		if c[s.Metric].Origin == deploycheck.FromPending {
			return true
		}
	}
	return false
}
