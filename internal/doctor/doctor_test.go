//go:build cgo

package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/demo"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/grpcunix"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// simSnapshot reads a pinned simulated host through the real NVML reader.
func simSnapshot(t *testing.T, profile string) *snapshot.Snapshot {
	t.Helper()
	pin := sim.Duration(time.Hour)
	s, err := sim.New(sim.Config{Profile: profile, PinTime: &pin, Seed: "doctor"})
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]bool{}
	for _, g := range snapshot.AllGroups {
		groups[g] = true
	}
	r, err := nvmlbackend.New(s, nvmlbackend.Options{Groups: groups, Now: s.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	snap, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func find(t *testing.T, r Report, check string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.Check == check {
			return res
		}
	}
	t.Fatalf("no %q check in %+v", check, r.Results)
	return Result{}
}

func baseEnv(t *testing.T) Env {
	return Env{
		Backend: "sim", Snapshot: simSnapshot(t, "h100"), Collectors: map[string]bool{snapshot.GroupProcesses: true},
		DevRoot: t.TempDir(), SelfProc: "/proc", CgroupRoot: "/sys/fs/cgroup", ProcRoot: "/proc",
		Runner: slurm.ExecRunner{Timeout: 10 * time.Second}, Timeout: time.Second,
	}
}

func TestSimulatorHostIsHealthy(t *testing.T) {
	r := Run(baseEnv(t))
	if !r.Healthy {
		t.Errorf("simulated host not healthy: %+v", r.Results)
	}
	if res := find(t, r, "driver"); res.Status != OK || !strings.Contains(res.Found, "driver 550.90.07") {
		t.Errorf("driver = %+v", res)
	}
	if res := find(t, r, "device nodes"); res.Status != Skip {
		t.Errorf("device nodes = %+v", res)
	}
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "✔ driver ") || !strings.Contains(text.String(), "– device nodes") {
		t.Errorf("text report:\n%s", text.String())
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !back.Healthy || len(back.Results) != len(r.Results) {
		t.Errorf("JSON report does not read back (%v): %s", err, js.String())
	}
}

func TestNoDriver(t *testing.T) {
	env := baseEnv(t)
	env.Backend, env.Snapshot, env.SnapshotErr = "nvml", nil, fmt.Errorf("cannot load libnvidia-ml.so.1")
	r := Run(env)
	if res := find(t, r, "driver"); res.Status != Fail || !res.Needed || !strings.Contains(res.Fix, "install the NVIDIA driver") {
		t.Errorf("driver = %+v", res)
	}
	if r.Healthy {
		t.Error("healthy without a driver")
	}
	var text bytes.Buffer
	_ = r.WriteText(&text)
	if !strings.Contains(text.String(), "✘ driver") || !strings.Contains(text.String(), "fix: install the NVIDIA driver") {
		t.Errorf("text report:\n%s", text.String())
	}
}

func TestDeviceNodes(t *testing.T) {
	env := baseEnv(t)
	env.Backend = "nvml"
	env.Snapshot.Devices[0].Info.MinorNumber = snapshot.Some(3)
	if err := os.WriteFile(filepath.Join(env.DevRoot, "nvidiactl"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	res := checkDeviceNodes(env)[0]
	if res.Status != Fail || !res.Needed || !strings.Contains(res.Found, "nvidia3") {
		t.Errorf("missing /dev/nvidia3: %+v", res)
	}
	if err := os.WriteFile(filepath.Join(env.DevRoot, "nvidia3"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if res := checkDeviceNodes(env)[0]; res.Status != OK {
		t.Errorf("both nodes present: %+v", res)
	}
}

func TestDownAndPersistence(t *testing.T) {
	env := baseEnv(t)
	env.Snapshot.Devices[0].Info.PersistenceMode = "disabled"
	r := Run(env)
	if res := find(t, r, "persistence mode"); res.Status != Fail || res.Needed || res.Found != "off on GPU 0" {
		t.Errorf("persistence = %+v (want \"off on GPU 0\": an index, not a count)", res)
	}
	if !r.Healthy {
		t.Error("persistence mode off must not fail the doctor")
	}
	env.Snapshot.Devices[0] = snapshot.Device{Index: 0, DownReason: "gpu_is_lost"}
	r = Run(env)
	if res := find(t, r, "GPUs"); res.Status != Fail || !res.Needed || !strings.Contains(res.Found, "0 (gpu_is_lost)") {
		t.Errorf("GPUs = %+v", res)
	}
}

// fixtureProc writes a procfs-like tree with one process of another user.
func fixtureProc(t *testing.T) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "4242")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(p, "environ")
	if err := os.WriteFile(env, []byte("SLURM_JOB_ID=7\x00"), 0o400); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(env, 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProcfsChecks(t *testing.T) {
	env := baseEnv(t)
	env.Attribution = true
	env.ProcRoot = filepath.Join(t.TempDir(), "absent")
	if res := find(t, Run(env), "procfs"); res.Status != Fail || !res.Needed {
		t.Errorf("absent procfs = %+v", res)
	}
	env.ProcRoot = fixtureProc(t)
	r := Run(env)
	if res := find(t, r, "procfs"); res.Status != OK || !strings.Contains(res.Found, "1 processes") {
		t.Errorf("fixture procfs = %+v", res)
	}
	if res := find(t, r, "PID namespace"); res.Status != Skip {
		t.Errorf("a fixture has no ns link: %+v", res)
	}
	res := find(t, r, "environ")
	if os.Getuid() == 0 && (res.Status != OK || !strings.Contains(res.Found, "PID 4242 of uid 12345")) {
		t.Errorf("environ as root = %+v", res)
	}
	if os.Getuid() != 0 && res.Status != Skip {
		t.Errorf("environ = %+v", res)
	}

	// The live /proc: same PID namespace as ours.
	env.ProcRoot = "/proc"
	if res := find(t, Run(env), "PID namespace"); strings.Contains(res.Found, "not a live procfs") || res.Status == Fail {
		t.Errorf("live /proc: %+v", res)
	}
}

// silentSocket accepts connections and never answers.
func silentSocket(t *testing.T) string {
	path := filepath.Join(testenv.ShortTempDir(t), "hung.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return path
}

func TestSocketChecks(t *testing.T) {
	dir := testenv.ShortTempDir(t)
	workloads := []demo.Workload{
		{Kind: demo.KindKubernetes, PodName: "p", PodNamespace: "ns", PodContainer: "c", ContainerID: "abc", GPUs: []int{0}},
		{Kind: demo.KindKubernetes, PodName: "q", PodNamespace: "ns", PodContainer: "c", ContainerID: "def", GPUs: []int{0}, DRADevice: "gpu-0", DRAPool: "node"},
	}
	cri, kubelet := filepath.Join(dir, "cri.sock"), filepath.Join(dir, "kubelet.sock")
	for socket, methods := range map[string]map[string]grpcunix.Handler{
		cri:     demo.NewCRI(workloads).Methods(),
		kubelet: demo.NewKubelet(workloads, []demo.GPU{{Index: 0, UUID: "GPU-x"}}).Methods(),
	} {
		stop, err := grpcunix.Serve(socket, methods)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	env := baseEnv(t)
	env.Attribution = true
	env.ProcRoot = fixtureProc(t)
	env.CRISocket, env.KubeletSocket = cri, kubelet
	env.DockerSocket = "unix://" + filepath.Join(dir, "absent.sock")
	r := Run(env)
	if res := find(t, r, "cri socket"); res.Status != OK || !strings.Contains(res.Found, "containerd") {
		t.Errorf("cri = %+v", res)
	}
	if res := find(t, r, "kubelet socket"); res.Status != OK || !strings.Contains(res.Found, "2 pods hold devices; resource names: nvidia.com/gpu; DRA drivers: gpu.nvidia.com") {
		t.Errorf("kubelet = %+v", res)
	}
	if res := find(t, r, "docker socket"); res.Status != Fail || !res.Needed || !strings.Contains(res.Fix, "--docker.socket") {
		t.Errorf("absent docker socket = %+v", res)
	}
	if r.Healthy {
		t.Error("healthy with an absent socket")
	}

	// A hung socket is a failure within the timeout, not a hang.
	env.DockerSocket, env.CRISocket, env.KubeletSocket = "", silentSocket(t), silentSocket(t)
	env.Timeout = 300 * time.Millisecond
	start := time.Now()
	r = Run(env)
	for _, check := range []string{"cri socket", "kubelet socket"} {
		if res := find(t, r, check); res.Status != Fail || !strings.Contains(res.Found, "no answer within 300ms") {
			t.Errorf("hung %s = %+v", check, res)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("doctor took %v against hung sockets", took)
	}
	if res := find(t, r, "docker socket"); res.Status != Skip {
		t.Errorf("docker off = %+v", res)
	}
}

func TestWebConfig(t *testing.T) {
	env := baseEnv(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "web.yml")
	// bcrypt of "secret"
	os.WriteFile(good, []byte("basic_auth_users:\n  prom: $2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG\n"), 0o644)
	env.WebConfigFile = good
	if res := find(t, Run(env), "web config"); res.Status != OK || !strings.Contains(res.Found, "basic auth (1 users) on every endpoint") {
		t.Errorf("good web config = %+v", res)
	}
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.crt\n"), 0o644)
	env.WebConfigFile = bad
	if res := find(t, Run(env), "web config"); res.Status != Fail || !strings.Contains(res.Found, bad) {
		t.Errorf("bad web config = %+v", res)
	}
}

func TestGresOrder(t *testing.T) {
	snap := simSnapshot(t, "dgx-h100")
	for i := range snap.Devices {
		snap.Devices[i].Info.MinorNumber = snapshot.Some(i)
	}
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		conf string
		want Status
	}{
		"in order":    {"NodeName=n1 Name=gpu Type=h100 File=/dev/nvidia[0-7]\n", OK},
		"swapped":     {"NodeName=n1 Name=gpu File=/dev/nvidia1\nNodeName=n1 Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia[2-7]\n", Fail},
		"autodetect":  {"AutoDetect=nvml\n", OK},
		"other node":  {"NodeName=n2 Name=gpu File=/dev/nvidia[1,0]\n", Skip},
		"plain files": {"NodeName=n1 Name=gpu File=/tmp/fake0\n", Skip},
		"not in /dev": {"NodeName=n1 Name=gpu File=/tmp/nvidia0\n", Skip},
		"too many":    {"NodeName=n1 Name=gpu File=/dev/nvidia[0-8]\n", Fail},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".conf")
		os.WriteFile(path, []byte(tc.conf), 0o644)
		env := Env{Snapshot: snap, Slurm: &SlurmEnv{Node: "n1", GresConf: path}}
		if res := checkGresOrder(env, nil); res.Status != tc.want {
			t.Errorf("%s: %+v, want %s", name, res, tc.want)
		}
	}
}

// TestMIGPlacementsHidden: on a MIG host, the MIG check says when NVML
// keeps the GPU instances' placements from this user (what DRA claims on
// MIG devices are matched by), and says nothing of it when it tells them.
func TestMIGPlacementsHidden(t *testing.T) {
	env := baseEnv(t)
	env.Snapshot = simSnapshot(t, "dgx-h100") // unprivileged: NO_PERMISSION
	if res := find(t, Run(env), "MIG"); res.Status != OK || !strings.Contains(res.Found, "DRA claims on MIG devices are matched by profile name only") {
		t.Errorf("MIG, placements hidden = %+v", res)
	}
	for i := range env.Snapshot.Devices[7].MIGInstances {
		m := &env.Snapshot.Devices[7].MIGInstances[i]
		m.GPUInstanceProfileID, m.PlacementStart, m.PlacementSize = snapshot.Some(19), snapshot.Some(i), snapshot.Some(1)
	}
	if res := find(t, Run(env), "MIG"); res.Status != OK || strings.Contains(res.Found, "DRA") {
		t.Errorf("MIG, placements known = %+v", res)
	}
}
