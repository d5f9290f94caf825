//go:build linux

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The attribution package's fixture /proc holds one process per runtime,
// cgroup driver and cgroup version, in the kernel's real formats.
var (
	fixtureProc   = filepath.Join("..", "..", "internal", "attribution", "testdata", "proc")
	fixtureRootFS = filepath.Join("..", "..", "internal", "attribution", "testdata", "rootfs")
)

// attributedProcesses declares fixture PIDs as GPU processes. Each entry is
// what `gpuwatch ps` and /metrics must say about its owner.
var attributedProcesses = []struct {
	gpu, pid       int
	user           string
	containerID    string // full id, from the cgroup
	podUID         string
	slurmJob       string
	containerLabel string // the `container` label on gpu_process_* series
}{
	{gpu: 0, pid: 1001, user: "alice", containerID: "f4f0b3caffa8f2c594d1bdd814d4a065d9e517ef0b54ae9b2ff0e46432e0ece0", containerLabel: "f4f0b3caffa8"},
	{gpu: 1, pid: 1010, user: "alice", containerID: "aaa04036f0b02dc714c41a3849dbc987abed3f27a6170bc5c835b557befea24d", podUID: "4f4b142d-b7b4-f208-0e50-1fd7b3374c0b", containerLabel: "aaa04036f0b0"},
	{gpu: 2, pid: 1025, user: "carol", slurmJob: "125"},
}

func attributionSimConfig(t *testing.T) string {
	t.Helper()
	cfg := "profile: dgx-h100\npin_time: 1h\nprocesses:\n"
	for _, p := range attributedProcesses {
		cfg += "  - {gpu: " + itoa(p.gpu) + ", pid: " + itoa(p.pid) + ", used_memory_bytes: 1073741824, sm_utilization: 0.5}\n"
	}
	path := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, path, cfg)
	return path
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPsAndMetricsShowOwners runs `gpuwatch ps` and `gpuwatch serve` over the
// fixture /proc and checks that both name the right owner for every process.
func TestPsAndMetricsShowOwners(t *testing.T) {
	common := []string{
		"--backend=sim", "--sim.config=" + attributionSimConfig(t),
		"--path.procfs=" + fixtureProc, "--path.rootfs=" + fixtureRootFS,
		"--docker.socket=", "--log.level=warn",
	}
	out, code := runGpuwatch(t, append([]string{"ps", "--output=json"}, common...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps failed: %s", out)
	}
	var doc struct {
		Processes []struct {
			GPU       int    `json:"gpu"`
			PID       int    `json:"pid"`
			User      string `json:"user"`
			Command   string `json:"command"`
			Container *struct {
				ID string `json:"id"`
			} `json:"container"`
			Pod *struct {
				UID string `json:"uid"`
			} `json:"pod"`
			Slurm *struct {
				JobID string `json:"job_id"`
			} `json:"slurm"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ps JSON: %v\n%s", err, out)
	}
	if len(doc.Processes) != len(attributedProcesses) {
		t.Fatalf("ps lists %d processes, want %d:\n%s", len(doc.Processes), len(attributedProcesses), out)
	}
	for i, want := range attributedProcesses {
		got := doc.Processes[i]
		if got.PID != want.pid || got.GPU != want.gpu || got.User != want.user || got.Command == "" {
			t.Errorf("process %d: got pid %d gpu %d user %q command %q", i, got.PID, got.GPU, got.User, got.Command)
		}
		if (got.Container == nil) != (want.containerID == "") || (got.Container != nil && got.Container.ID != want.containerID) {
			t.Errorf("pid %d container = %+v, want %q", want.pid, got.Container, want.containerID)
		}
		if (got.Pod == nil) != (want.podUID == "") || (got.Pod != nil && got.Pod.UID != want.podUID) {
			t.Errorf("pid %d pod = %+v, want uid %q", want.pid, got.Pod, want.podUID)
		}
		if (got.Slurm == nil) != (want.slurmJob == "") || (got.Slurm != nil && got.Slurm.JobID != want.slurmJob) {
			t.Errorf("pid %d slurm = %+v, want job %q", want.pid, got.Slurm, want.slurmJob)
		}
	}

	base, _ := startGpuwatch(t, common...)
	fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	for _, want := range attributedProcesses {
		labels := map[string]string{"gpu": itoa(want.gpu), "user": want.user, "container": want.containerLabel, "slurm_job": want.slurmJob}
		if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", labels); !ok || v != 1<<30 {
			t.Errorf("gpu_process_memory_used_bytes%v = %v (present %v)", labels, v, ok)
		}
	}
	// Per-process labels are opt-in: no pid label unless asked for.
	for _, m := range fams["gpu_process_memory_used_bytes"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "pid" {
				t.Fatal("pid label exported without --collector.processes.pid-labels")
			}
		}
	}
}
