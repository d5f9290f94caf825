//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	runtimev1 "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// fakeKubelet and fakeCRI answer with the real protobuf types, over unix
// sockets, what a kubelet and containerd would say about the fixture pods.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (f *fakeKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return f.resp, nil
}

type fakeCRI struct {
	runtimev1.UnimplementedRuntimeServiceServer
	labels map[string]map[string]string // container id → labels
}

func (f *fakeCRI) ContainerStatus(_ context.Context, req *runtimev1.ContainerStatusRequest) (*runtimev1.ContainerStatusResponse, error) {
	labels, ok := f.labels[req.GetContainerId()]
	if !ok {
		return nil, os.ErrNotExist
	}
	return &runtimev1.ContainerStatusResponse{Status: &runtimev1.ContainerStatus{
		Id: req.GetContainerId(), Labels: labels,
		Metadata: &runtimev1.ContainerMetadata{Name: labels["io.kubernetes.container.name"]},
		Image:    &runtimev1.ImageSpec{Image: "registry.example/vllm:0.6"},
	}}, nil
}

func serveGRPCOnUnixSocket(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	// Unix socket paths are short (108 bytes); t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return socket
}

// gpuUUIDs returns the simulated profile's GPU UUIDs by index.
func gpuUUIDs(t *testing.T, profile string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gpu.prom")
	if msg, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile="+profile, "--output="+out); code != 0 {
		t.Fatalf("textfile: %s", msg)
	}
	data, _ := os.ReadFile(out)
	fams := testenv.ParseMetrics(t, string(data))
	var uuids []string
	for i := 0; ; i++ {
		found := ""
		for _, m := range fams["gpu_up"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["gpu"] == itoa(i) {
				found = labels["uuid"]
			}
		}
		if found == "" {
			return uuids
		}
		uuids = append(uuids, found)
	}
}

// TestKubernetesOwners serves a kubelet pod-resources API and a CRI runtime
// on unix sockets and checks that gpuwatch names each GPU process's pod, and
// attributes a GPU allocated to a pod whose processes are not running.
func TestKubernetesOwners(t *testing.T) {
	t.Parallel()
	uuids := gpuUUIDs(t, "dgx-h100")
	const (
		trainerID = "aaa04036f0b02dc714c41a3849dbc987abed3f27a6170bc5c835b557befea24d" // fixture pid 1010
		servingID = "cf1ae8d7980913d50f110a21d52008427c84be577607e7d2bf2157feb39aa905" // fixture pid 1011
	)
	criSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		runtimev1.RegisterRuntimeServiceServer(s, &fakeCRI{labels: map[string]map[string]string{
			trainerID: {"io.kubernetes.pod.name": "trainer-0", "io.kubernetes.pod.namespace": "research", "io.kubernetes.container.name": "pytorch"},
			servingID: {"io.kubernetes.pod.name": "vllm-7d9f", "io.kubernetes.pod.namespace": "inference \"prod\"", "io.kubernetes.container.name": "vllm"},
		}})
	})
	kubeletSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{
			PodResources: []*podresourcesv1.PodResources{
				{Name: "trainer-0", Namespace: "research", Containers: []*podresourcesv1.ContainerResources{{
					Name:    "pytorch",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuids[1]}}},
				}}},
				// Allocated, but its processes are not running: GPU 5 is still attributed.
				{Name: "idle-notebook", Namespace: "users", Containers: []*podresourcesv1.ContainerResources{{
					Name:    "jupyter",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuids[5] + "::0", uuids[5] + "::1"}}},
				}}},
			},
		}})
	})
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\npin_time: 1h\nprocesses:\n"+
		"  - {gpu: 1, pid: 1010, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n"+
		"  - {gpu: 2, pid: 1011, used_memory_bytes: 2147483648, sm_utilization: 0.25}\n")
	common := []string{
		"--backend=sim", "--sim.config=" + cfg,
		"--path.procfs=" + fixtureProc, "--path.rootfs=" + fixtureRootFS,
		"--docker.socket=", "--cri.socket=" + criSocket, "--kubelet.pod-resources-socket=" + kubeletSocket,
	}

	out, code := runGpuwatch(t, append([]string{"ps", "-o", "json", "--log.level=warn"}, common...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps: %s", out)
	}
	var doc struct {
		Processes []struct {
			PID int `json:"pid"`
			Pod struct {
				Name, Namespace, Container, UID string
			} `json:"pod"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[int][3]string{1010: {"research", "trainer-0", "pytorch"}, 1011: {"inference \"prod\"", "vllm-7d9f", "vllm"}}
	for _, p := range doc.Processes {
		w := want[p.PID]
		if p.Pod.Namespace != w[0] || p.Pod.Name != w[1] || p.Pod.Container != w[2] || p.Pod.UID == "" {
			t.Errorf("pid %d pod = %+v, want %v with its cgroup's UID", p.PID, p.Pod, w)
		}
	}

	base, _ := startGpuwatch(t, common...)
	page := httpGet(t, base+"/metrics")
	fams := testenv.ParseMetrics(t, page)
	if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": "2", "namespace": "inference \"prod\"", "pod": "vllm-7d9f"}); !ok || v != 2<<30 {
		t.Errorf("pod memory series = %v (present %v)", v, ok)
	}
	for gpu, pod := range map[int]string{1: "trainer-0", 5: "idle-notebook"} {
		if _, ok := testenv.Sample(fams, "gpu_kubernetes_allocation_info", map[string]string{"gpu": itoa(gpu), "uuid": uuids[gpu], "pod": pod}); !ok {
			t.Errorf("no gpu_kubernetes_allocation_info for %s on GPU %d", pod, gpu)
		}
	}
	if n := strings.Count(page, "gpu_kubernetes_allocation_info{"); n != 2 {
		t.Errorf("%d allocation series, want 2 (time-sliced replicas collapse)", n)
	}
	if v, ok := testenv.Sample(fams, "gpuwatch_attribution_errors_total", map[string]string{"source": "cri"}); !ok || v != 0 {
		t.Errorf("cri errors = %v (present %v)", v, ok)
	}
}

// draClaim is a container's resource claim on devices of NVIDIA's DRA
// driver, as the kubelet lists it.
func draClaim(ns, claim string, devices ...string) *podresourcesv1.DynamicResource {
	dr := &podresourcesv1.DynamicResource{ClaimName: claim, ClaimNamespace: ns}
	for _, d := range devices {
		dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
			DriverName: "gpu.nvidia.com", PoolName: "gpu-node-3", DeviceName: d,
			CdiDevices: []*podresourcesv1.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=8e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b-" + d}},
		})
	}
	return dr
}

// labelsOf returns the label sets of a family's series.
func labelsOf(fams map[string]*dto.MetricFamily, name string) []map[string]string {
	var out []map[string]string
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out = append(out, labels)
	}
	return out
}

// TestKubernetesDRAOwners is TestKubernetesOwners for pods whose GPUs come
// from resource claims of NVIDIA's DRA driver: a whole GPU, MIG devices
// (named in both of the driver's formats) and one GPU shared by two pods
// through one claim. Owners, allocation series and idle allocations are
// as for device-plugin pods. Both doors into the simulator: the sim
// backend, and the NVML backend through the fake libnvidia-ml.so.1 (MIG
// placements come through nvmlGpuInstanceGetInfo's C struct).
func TestKubernetesDRAOwners(t *testing.T) {
	t.Parallel()
	const (
		trainerID = "aaa04036f0b02dc714c41a3849dbc987abed3f27a6170bc5c835b557befea24d" // fixture pid 1010
		embedID   = "cf1ae8d7980913d50f110a21d52008427c84be577607e7d2bf2157feb39aa905" // fixture pid 1011
	)
	criSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		runtimev1.RegisterRuntimeServiceServer(s, &fakeCRI{labels: map[string]map[string]string{
			trainerID: {"io.kubernetes.pod.name": "trainer-0", "io.kubernetes.pod.namespace": "research", "io.kubernetes.container.name": "pytorch"},
			embedID:   {"io.kubernetes.pod.name": "embedder-5c9d", "io.kubernetes.pod.namespace": "inference", "io.kubernetes.container.name": "server"},
		}})
	})
	pod := func(ns, name, container string, claims ...*podresourcesv1.DynamicResource) *podresourcesv1.PodResources {
		return &podresourcesv1.PodResources{Name: name, Namespace: ns, Containers: []*podresourcesv1.ContainerResources{{Name: container, DynamicResources: claims}}}
	}
	// dgx-h100's GPU 7 (minor 7) holds GPU instance 1, a 3g.40gb (profile
	// ID 9) at slice 4, and GPU instance 13, a 1g.10gb (19) at slice 2.
	kubeletSocket := serveGRPCOnUnixSocket(t, func(s *grpc.Server) {
		podresourcesv1.RegisterPodResourcesListerServer(s, &fakeKubelet{resp: &podresourcesv1.ListPodResourcesResponse{
			PodResources: []*podresourcesv1.PodResources{
				pod("research", "trainer-0", "pytorch", draClaim("research", "trainer-0-gpu", "gpu-1")),
				pod("inference", "embedder-5c9d", "server", draClaim("inference", "embedder-mig", "gpu-7-mig-3g40gb-9-4")),
				// A driver before v25.12 names the 1g.10gb at slice 2 so.
				pod("inference", "batch-0", "job", draClaim("inference", "batch-mig", "gpu-7-mig-19-2-1")),
				// One claim, two pods, no process running: GPU 5 is
				// held, idle, by both.
				pod("team", "notebook-a", "jupyter", draClaim("team", "shared-gpu", "gpu-5")),
				pod("team", "notebook-b", "jupyter", draClaim("team", "shared-gpu", "gpu-5")),
			},
		}})
	})
	config := "profile: dgx-h100\npin_time: 1h\nseed: dra\nprocesses:\n" +
		"  - {gpu: 1, pid: 1010, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n" +
		"  - {gpu: 7, pid: 1011, used_memory_bytes: 2147483648, sm_utilization: 0.25, gpu_instance: 1, compute_instance: 0}\n"
	common := []string{
		"--path.procfs=" + fixtureProc, "--path.rootfs=" + fixtureRootFS, "--slurm.jobs=false",
		"--docker.socket=", "--cri.socket=" + criSocket, "--kubelet.pod-resources-socket=" + kubeletSocket,
	}

	// Privileged (root with CAP_SYS_ADMIN), NVML tells each GPU instance's
	// placement; unprivileged, only a profile name that one instance has
	// names it, and the rest name the parent GPU.
	for _, privileged := range []bool{true, false} {
		config := config
		name := "unprivileged"
		if privileged {
			config += "privileged: true\n"
			name = "privileged"
		}
		t.Run("sim/"+name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "sim.yaml")
			writeFile(t, cfg, config)
			base, _ := startGpuwatch(t, append([]string{"--backend=sim", "--sim.config=" + cfg}, common...)...)
			checkDRAPage(t, httpGet(t, base+"/metrics"), privileged)
		})
		t.Run("fakenvml/"+name, func(t *testing.T) {
			newest := nvmlbranch.Newest().Name
			base, p, up := startWithEnv(t, fakeEnv(t, newest, config+"driver: "+newest+"\n"), append([]string{"--backend=nvml"}, common...)...)
			if !up {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
			checkDRAPage(t, httpGet(t, base+"/metrics"), privileged)
		})
	}
}

// checkDRAPage checks TestKubernetesDRAOwners' page.
func checkDRAPage(t *testing.T, page string, privileged bool) {
	t.Helper()
	fams := testenv.ParseMetrics(t, page)
	uuids := map[string]string{}
	for _, l := range labelsOf(fams, "gpu_up") {
		uuids[l["gpu"]] = l["uuid"]
	}
	migs := map[string]string{} // GPU 7's MIG UUIDs by GPU instance
	for _, l := range labelsOf(fams, "gpu_mig_info") {
		if l["gpu"] == "7" {
			migs[l["gpu_instance"]] = l["mig_uuid"]
		}
	}
	if uuids["7"] == "" || migs["1"] == "" || migs["13"] == "" {
		t.Fatalf("dgx-h100: GPU UUIDs %v, GPU 7 MIG UUIDs %v", uuids, migs)
	}
	for gpu, w := range map[string][2]string{"1": {"research", "trainer-0"}, "7": {"inference", "embedder-5c9d"}} {
		if _, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": gpu, "namespace": w[0], "pod": w[1]}); !ok {
			t.Errorf("no gpu_process_memory_used_bytes of pod %s/%s on GPU %s:\n%s", w[0], w[1], gpu, linesWith(page, "gpu_process_memory_used_bytes"))
		}
	}
	batchMIG := "" // gpu-7-mig-19-2-1 names no profile, and GPU 7 has two 1g.10gb
	if privileged {
		batchMIG = migs["13"]
	}
	wantAllocs := []map[string]string{
		{"gpu": "1", "uuid": uuids["1"], "mig_uuid": "", "namespace": "research", "pod": "trainer-0", "container": "pytorch"},
		{"gpu": "7", "uuid": uuids["7"], "mig_uuid": migs["1"], "namespace": "inference", "pod": "embedder-5c9d", "container": "server"},
		{"gpu": "7", "uuid": uuids["7"], "mig_uuid": batchMIG, "namespace": "inference", "pod": "batch-0", "container": "job"},
		{"gpu": "5", "uuid": uuids["5"], "mig_uuid": "", "namespace": "team", "pod": "notebook-a", "container": "jupyter"},
		{"gpu": "5", "uuid": uuids["5"], "mig_uuid": "", "namespace": "team", "pod": "notebook-b", "container": "jupyter"},
	}
	for _, w := range wantAllocs {
		if v, ok := testenv.Sample(fams, "gpu_kubernetes_allocation_info", w); !ok || v != 1 {
			t.Errorf("no gpu_kubernetes_allocation_info %v:\n%s", w, linesWith(page, "gpu_kubernetes_allocation_info"))
		}
	}
	if n := strings.Count(page, "gpu_kubernetes_allocation_info{"); n != len(wantAllocs) {
		t.Errorf("%d allocation series, want %d:\n%s", n, len(wantAllocs), linesWith(page, "gpu_kubernetes_allocation_info"))
	}
	if v, ok := testenv.Sample(fams, "gpuwatch_attribution_errors_total", map[string]string{"source": "kubelet"}); !ok || v != 0 {
		t.Errorf("kubelet errors = %v (present %v)", v, ok)
	}
}

// linesWith keeps the lines of text that contain s, for failure messages.
func linesWith(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
