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
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// readmeQueryAfter returns the README promql line that follows the comment
// containing marker.
func readmeQueryAfter(t *testing.T, marker string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, marker) && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	t.Fatalf("README.md has no query after a comment %q", marker)
	return ""
}

// promVector runs an instant query at time at (Unix seconds; "" for now)
// and returns each series' value by the label named by.
func promVectorAt(t *testing.T, promURL, query, at, by string) map[string]float64 {
	t.Helper()
	u := promURL + "/api/v1/query?query=" + url.QueryEscape(query)
	if at != "" {
		u += "&time=" + at
	}
	resp, err := httpGetNoFail(u)
	if err != nil {
		return nil
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %s", query, resp)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, _ := strconv.ParseFloat(str, 64)
		out[s.Metric[by]] = v
	}
	return out
}

// TestREADMEAccountingQueriesCountAShortJob: a pod whose only process runs
// 6 s, less than Prometheus's 10 s scrape interval, between two longer
// workloads on the same GPU. A real Prometheus scrapes gpuwatch; the
// README's "GPU-hours by user last week" and "energy by namespace" give
// the short job all of its counters: increase() sees its series start
// at 0 (the new-owner hold), so nothing of it is lost.
func TestREADMEAccountingQueriesCountAShortJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	gpuHours := readmeQueryAfter(t, "GPU-hours by user last week")
	energy := readmeQueryAfter(t, "energy by namespace")
	dir := t.TempDir()
	// The demo gives workloads, in PID order, a Slurm job, a compose
	// service and a pod: the short job (PID 3000) is the pod.
	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, `profile: h100
processes:
  - {gpu: 0, pid: 1000, used_memory_bytes: 8589934592, sm_utilization: 0.3}
  - {gpu: 0, pid: 2000, used_memory_bytes: 4294967296, sm_utilization: 0.2}
  - {gpu: 0, pid: 3000, used_memory_bytes: 2147483648, sm_utilization: 0.6, start: 5s, end: 11s}
`)
	// Prometheus scrapes first (a target still down), so that its scrape
	// loop runs every 10 s before the short job starts: then a scrape
	// falls within the job's hold and stores its 0.
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	promPort := testenv.FreePort(t)
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf("global:\n  scrape_interval: 10s\n  scrape_timeout: 5s\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs:\n      - targets: [%q]\n", addr))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	testenv.StartProcess(t, nil, promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promURL[len("http://"):])
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape its (still absent) target", func() bool {
		return len(promVectorAt(t, promURL, `up{job="gpuwatch"}`, "", "job")) > 0
	})
	gw := testenv.StartProcess(t, nil, gpuwatchBin, "--web.listen-address="+addr, "--backend=sim", "--sim.config="+simConfig,
		"--accounting.interval=1s", "--accounting.new-owner-hold=15s", "--accounting.retention=10m")
	testenv.WaitHealthy(t, gw, "http://"+addr)

	// Wait until Prometheus holds the short job's held time after the hold.
	var pod, namespace, user string
	testenv.WaitFor(t, 120*time.Second, "Prometheus to store the short job's counter after its hold", func() bool {
		for p, v := range promVectorAt(t, promURL, `gpu_process_seconds_total{pod!=""}`, "", "pod") {
			if v > 0 {
				pod = p
				return true
			}
		}
		return false
	})
	namespace = onlyKey(t, promVectorAt(t, promURL, fmt.Sprintf(`gpu_process_seconds_total{pod=%q}`, pod), "", "namespace"))
	user = onlyKey(t, promVectorAt(t, promURL, fmt.Sprintf(`gpu_process_seconds_total{pod=%q}`, pod), "", "user"))
	// Evaluate at the newest sample, so increase() needs no extrapolation
	// past it: the answer must then be the counters' whole values.
	at := fmt.Sprintf("%.3f", promVectorAt(t, promURL, fmt.Sprintf(`timestamp(gpu_process_seconds_total{pod=%q})`, pod), "", "pod")[pod])

	held := promVectorAt(t, promURL, fmt.Sprintf(`gpu_process_seconds_total{pod=%q}`, pod), at, "pod")[pod]
	if held < 6-2 || held > 6+2 {
		t.Errorf("short job held %.1f s, want 6 ± 2 ticks", held)
	}
	// Its first sample was 0: the series started before its value grew.
	first := promVectorAt(t, promURL, fmt.Sprintf(`min_over_time(gpu_process_seconds_total{pod=%q}[1h])`, pod), at, "pod")[pod]
	if first != 0 {
		t.Errorf("the short job's first stored value is %g, want 0", first)
	}

	wantHours := promVectorAt(t, promURL, fmt.Sprintf(`sum by (user) (gpu_process_seconds_total{user=%q})`, user), at, "user")[user] / 3600
	gotHours := promVectorAt(t, promURL, gpuHours, at, "user")[user]
	if !closeTo(gotHours, wantHours, 0.01) || gotHours < held/3600 {
		t.Errorf("README %q for %s = %g h, want %g h (every counter of the user, the short job's %.1f s included)", gpuHours, user, gotHours, wantHours, held)
	}
	podEnergy := promVectorAt(t, promURL, fmt.Sprintf(`gpu_process_energy_joules_total{pod=%q}`, pod), at, "pod")[pod]
	wantKWh := promVectorAt(t, promURL, fmt.Sprintf(`sum by (namespace) (gpu_process_energy_joules_total{namespace=%q})`, namespace), at, "namespace")[namespace] / 3.6e6
	gotKWh := promVectorAt(t, promURL, energy, at, "namespace")[namespace]
	if podEnergy <= 0 || !closeTo(gotKWh, wantKWh, 0.01) {
		t.Errorf("README %q for %s = %g kWh, want %g kWh (the short job's %.1f J included)", energy, namespace, gotKWh, wantKWh, podEnergy)
	}
}

func onlyKey(t *testing.T, m map[string]float64) string {
	t.Helper()
	if len(m) != 1 {
		t.Fatalf("want one series, have %v", m)
	}
	for k := range m {
		return k
	}
	return ""
}

func closeTo(got, want, rel float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// TestAccountingThroughTheDriverLibrary: the unmodified NVML backend
// (dlopen, cgo) reads the fake libnvidia-ml.so.1's per-process samples
// for the accounting: two processes time-slicing a GPU at 50 % and 25 %
// SM, one owner (no attribution sources), integrate to 0.75 SM-seconds per
// second held.
func TestAccountingThroughTheDriverLibrary(t *testing.T) {
	env := fakeEnv(t, "R550", `profile: h100
processes:
  - {gpu: 0, pid: 100, used_memory_bytes: 1073741824, sm_utilization: 0.5}
  - {gpu: 0, pid: 200, used_memory_bytes: 1073741824, sm_utilization: 0.25}
`)
	base, p, ok := startWithEnv(t, env, append(isolated(t), "--backend=nvml",
		"--accounting.interval=1s", "--accounting.new-owner-hold=1s", "--accounting.retention=1m")...)
	if !ok {
		t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
	}
	var held, sm, ticks, tickCPU float64
	var okTicks, okCPU bool
	testenv.WaitFor(t, 60*time.Second, "8 s of accounting", func() bool {
		text, err := httpGetNoFail(base + "/metrics")
		if err != nil {
			return false
		}
		fams := testenv.ParseMetrics(t, text)
		var ok1, ok2 bool
		held, ok1 = testenv.Sample(fams, "gpu_process_seconds_total", map[string]string{"gpu": "0"})
		sm, ok2 = testenv.Sample(fams, "gpu_process_sm_seconds_total", map[string]string{"gpu": "0"})
		ticks, okTicks = testenv.Sample(fams, "gpuwatch_accounting_ticks_total", nil)
		tickCPU, okCPU = testenv.Sample(fams, "gpuwatch_accounting_cpu_seconds_total", nil)
		return ok1 && ok2 && held >= 8
	})
	// The first and the last tick's sampling differ by at most a tick.
	if sm < 0.75*(held-1.5) || sm > 0.75*(held+1.5) {
		t.Errorf("SM-seconds %.2f over %.1f s held, want 0.75 per second held", sm, held)
	}
	// What the ticks through the driver library cost, counted: some CPU
	// (each tick calls into the library), far under the ticks' time.
	if !okTicks || !okCPU || ticks < 8 || tickCPU <= 0 || tickCPU >= ticks {
		t.Errorf("gpuwatch_accounting_ticks_total %v (present %v), gpuwatch_accounting_cpu_seconds_total %v (present %v): want 8 ticks or more, and some CPU under a second a tick",
			ticks, okTicks, tickCPU, okCPU)
	}
}

// TestAccountingAJobOnAnIdleGPUThroughTheDriverLibrary: through the fake
// libnvidia-ml.so.1 (dlopen, cgo), a GPU idle since gpuwatch started (its
// reads answer no sample) gets a job 8 s in, busy at 50 % for 4 s: its SM
// time is 2 SM-seconds. The reader had no sample to ask the driver from,
// so it asks again from one tick before the first one answered; asked from
// 0, the driver's mean is over its whole buffer and the job's first tick
// counted about a tenth of what it used.
func TestAccountingAJobOnAnIdleGPUThroughTheDriverLibrary(t *testing.T) {
	env := fakeEnv(t, "R550", `profile: h100
processes:
  - {gpu: 0, pid: 100, used_memory_bytes: 1073741824, sm_utilization: 0.5, start: 8s, end: 12s}
`)
	started := time.Now()
	base, p, ok := startWithEnv(t, env, append(isolated(t), "--backend=nvml",
		"--accounting.interval=1s", "--accounting.new-owner-hold=1s", "--accounting.retention=1m")...)
	if !ok {
		t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
	}
	var sm float64
	testenv.WaitFor(t, 60*time.Second, "the job's SM time, after it ended", func() bool {
		text, err := httpGetNoFail(base + "/metrics")
		if err != nil {
			return false
		}
		var ok bool
		sm, ok = testenv.Sample(testenv.ParseMetrics(t, text), "gpu_process_sm_seconds_total", map[string]string{"gpu": "0"})
		// The simulated clock starts with the library, after started:
		// 16 s on, the job (8 s to 12 s) is over and its last tick read.
		return ok && time.Since(started) > 16*time.Second
	})
	if !closeTo(sm, 2, 0.05) {
		t.Errorf("SM-seconds %.3f, want 2 (4 s at 50 %%) within 5 %%", sm)
	}
}

// TestTimeSlicedPodsAccountedByMeasuredUse: two pods time-slicing one GPU
// (the kubelet lists the same GPU, as time-sliced replicas, for both), at
// 50 % and 25 % SM. Through the real attribution (procfs fixture, CRI and
// pod-resources servers from the real protobufs), each pod gets its own
// SM time and a share of the energy in proportion to it, not the GPU's
// whole utilization; both allocations count held time, neither idle time.
func TestTimeSlicedPodsAccountedByMeasuredUse(t *testing.T) {
	uuids := gpuUUIDs(t, "dgx-h100")
	const (
		trainerID = "aaa04036f0b02dc714c41a3849dbc987abed3f27a6170bc5c835b557befea24d" // fixture pid 1010
		servingID = "cf1ae8d7980913d50f110a21d52008427c84be577607e7d2bf2157feb39aa905" // fixture pid 1011
	)
	criSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		runtimev1.RegisterRuntimeServiceServer(s, &fakeCRI{labels: map[string]map[string]string{
			trainerID: {"io.kubernetes.pod.name": "trainer-0", "io.kubernetes.pod.namespace": "research", "io.kubernetes.container.name": "pytorch"},
			servingID: {"io.kubernetes.pod.name": "vllm-0", "io.kubernetes.pod.namespace": "inference", "io.kubernetes.container.name": "vllm"},
		}})
	})
	kubeletSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{
			PodResources: []*podresourcesv1.PodResources{
				{Name: "trainer-0", Namespace: "research", Containers: []*podresourcesv1.ContainerResources{{
					Name:    "pytorch",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuids[1] + "::0"}}},
				}}},
				{Name: "vllm-0", Namespace: "inference", Containers: []*podresourcesv1.ContainerResources{{
					Name:    "vllm",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuids[1] + "::1"}}},
				}}},
			},
		}})
	})
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nprocesses:\n"+
		"  - {gpu: 1, pid: 1010, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n"+
		"  - {gpu: 1, pid: 1011, used_memory_bytes: 2147483648, sm_utilization: 0.25}\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg,
		"--path.procfs="+fixtureProc, "--path.rootfs="+fixtureRootFS,
		"--docker.socket=", "--cri.socket="+criSocket, "--kubelet.pod-resources-socket="+kubeletSocket,
		"--accounting.interval=1s", "--accounting.new-owner-hold=1s", "--accounting.retention=1m")
	pods := []string{"trainer-0", "vllm-0"}
	held, sm, energy, alloc, idle := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	testenv.WaitFor(t, 60*time.Second, "8 s of both pods' counters", func() bool {
		text, err := httpGetNoFail(base + "/metrics")
		if err != nil {
			return false
		}
		fams := testenv.ParseMetrics(t, text)
		for _, p := range pods {
			on := map[string]string{"gpu": "1", "pod": p}
			var ok [5]bool
			held[p], ok[0] = testenv.Sample(fams, "gpu_process_seconds_total", on)
			sm[p], ok[1] = testenv.Sample(fams, "gpu_process_sm_seconds_total", on)
			energy[p], ok[2] = testenv.Sample(fams, "gpu_process_energy_joules_total", on)
			alloc[p], ok[3] = testenv.Sample(fams, "gpu_allocation_seconds_total", on)
			idle[p], ok[4] = testenv.Sample(fams, "gpu_allocation_idle_seconds_total", on)
			if ok != [5]bool{true, true, true, true, true} || held[p] < 8 {
				return false
			}
		}
		return true
	})
	for p, util := range map[string]float64{"trainer-0": 0.5, "vllm-0": 0.25} {
		if sm[p] < util*(held[p]-2) || sm[p] > util*(held[p]+2) {
			t.Errorf("%s: %.2f SM-seconds over %.1f s held, want %.2f per second", p, sm[p], held[p], util)
		}
		if alloc[p] < held[p]-2 || idle[p] != 0 {
			t.Errorf("%s: allocation held %.1f s, idle %.1f s; want about %.1f s held, none idle", p, alloc[p], idle[p], held[p])
		}
	}
	// Energy by SM time: the trainer uses twice the vllm's SM.
	if r := energy["trainer-0"] / energy["vllm-0"]; r < 1.7 || r > 2.3 {
		t.Errorf("energy %.0f J vs %.0f J (ratio %.2f), want about 2 (split by SM time)", energy["trainer-0"], energy["vllm-0"], r)
	}
}
