//go:build linux

package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestSlurmJobOwners runs a real single-node Slurm, submits two GPU jobs,
// declares one job's process as a GPU process of the simulator, and checks
// that gpuwatch labels it with the job's id, user, account and partition,
// that both jobs' GPUs carry gpu_slurm_job_info (the second job has no GPU
// process at all), and that --collector.slurm counts the running jobs.
func TestSlurmJobOwners(t *testing.T) {
	cluster := testenv.StartSlurm(t, 2)
	busy := cluster.Sbatch(t, "-A", "physics", "-p", "gpu", "-J", "train", "--gres=gpu:1", "-c", "1", "--wrap", "sleep 300")
	cluster.WaitJob(t, busy, "RUNNING", "None")
	idle := cluster.Sbatch(t, "-A", "chem", "-p", "gpu", "-J", "notebook", "--gres=gpu:1", "-c", "1", "--wrap", "sleep 300")
	cluster.WaitJob(t, idle, "RUNNING", "None")
	defer cluster.Run(t, "scancel", busy, idle)

	// scontrol listpids prints "PID JOBID STEPID LOCALID GLOBALID" lines.
	var pid string
	for _, line := range strings.Split(cluster.Run(t, "scontrol", "listpids", busy), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == busy {
			pid = f[0]
			break
		}
	}
	if pid == "" {
		t.Fatalf("no process of job %s", busy)
	}
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\npin_time: 1h\nprocesses:\n  - {gpu: 0, pid: "+pid+", used_memory_bytes: 1073741824, sm_utilization: 0.5}\n")
	common := []string{"--backend=sim", "--sim.config=" + cfg, "--docker.socket=", "--slurm.jobs=true", "--slurm.node-name=" + cluster.Node}

	out, code := runGpuwatch(t, append([]string{"ps", "-o", "json", "--log.level=warn"}, common...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps: %s", out)
	}
	var doc struct {
		Processes []struct {
			PID   json.Number `json:"pid"`
			User  string      `json:"user"`
			Slurm struct {
				JobID     string `json:"job_id"`
				User      string `json:"user"`
				Account   string `json:"account"`
				Partition string `json:"partition"`
				JobName   string `json:"job_name"`
			} `json:"slurm"`
		} `json:"processes"`
		Allocations []struct {
			GPU   int               `json:"gpu"`
			Idle  *bool             `json:"idle"`
			Slurm map[string]string `json:"slurm"`
		} `json:"allocations"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Processes) != 1 {
		t.Fatalf("ps JSON (%v):\n%s", err, out)
	}
	got := doc.Processes[0]
	if got.PID.String() != pid || got.Slurm.JobID != busy || got.Slurm.User != "root" || got.Slurm.Account != "physics" ||
		got.Slurm.Partition != "gpu" || got.Slurm.JobName != "train" {
		t.Errorf("ps says %+v, want job %s of root/physics on gpu", got, busy)
	}
	// Both jobs hold a GPU; the second runs nothing there.
	held := map[int]string{}
	for _, a := range doc.Allocations {
		if a.Idle != nil {
			held[a.GPU] = a.Slurm["job_id"] + "/" + a.Slurm["account"] + "/" + map[bool]string{true: "idle", false: "busy"}[*a.Idle]
		}
	}
	if want := map[int]string{0: busy + "/physics/busy", 1: idle + "/chem/idle"}; len(held) != 2 || held[0] != want[0] || held[1] != want[1] {
		t.Errorf("ps -o json allocations %v, want %v:\n%s", held, want, out)
	}
	table, code := runGpuwatch(t, append([]string{"ps", "--log.level=warn"}, common...)...)
	if code != 0 || !strings.Contains(table, "\n1 ") || !regexp.MustCompile(`\n1 .* `+idle+` \(root\)\s+gpu\s`).MatchString(table) {
		t.Errorf("gpuwatch ps shows no idle row for job %s on GPU 1:\n%s", idle, table)
	}

	base, _ := startGpuwatch(t, append(common, "--collector.slurm", "--slurm.poll-interval=1s")...)
	// Job lookups run in the background on the first scrape; poll.
	var fams = testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	testenv.WaitFor(t, 20*time.Second, "gpu_slurm_job_info for both jobs", func() bool {
		fams = testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		_, a := testenv.Sample(fams, "gpu_slurm_job_info", map[string]string{"gpu": "0", "job_id": busy, "user": "root", "account": "physics", "partition": "gpu"})
		_, b := testenv.Sample(fams, "gpu_slurm_job_info", map[string]string{"gpu": "1", "job_id": idle, "user": "root", "account": "chem", "partition": "gpu"})
		return a && b
	})
	if v, ok := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": "0", "slurm_job": busy}); !ok || v != 1<<30 {
		t.Errorf("gpu_process_memory_used_bytes{slurm_job=%s} = %v (present %v)", busy, v, ok)
	}
	if v, ok := testenv.Sample(fams, "slurm_jobs", map[string]string{"state": "running", "partition": "gpu", "user": "root", "account": "physics"}); !ok || v != 1 {
		t.Errorf("slurm_jobs{running,physics} = %v (present %v)", v, ok)
	}
	if v, ok := testenv.Sample(fams, "gpuwatch_attribution_errors_total", map[string]string{"source": "slurm"}); !ok || v != 0 {
		t.Errorf("slurm attribution errors = %v (present %v)", v, ok)
	}
}
