//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// healthCheckInterval is the test cluster's HealthCheckInterval in seconds:
// short, so that slurmd runs the program several times within the test's
// waits, and long enough that two nodes' runs of gpuwatch do not crowd a
// 2-core machine.
const healthCheckInterval = 5

// TestSlurmHealthCheckProgramDrainsAndResumes: a real 2-node Slurm whose
// slurm.conf makes the shipped deploy/slurm/gpuwatch-healthcheck.sh its
// HealthCheckProgram, run by slurmd itself every few seconds (not called
// by the test). Each node reads its settings from its installed path,
// /etc/default/gpuwatch-healthcheck (each node has its own /etc/default:
// test/slurm/node-init.sh), which points gpuwatch at that node's simulated
// GPUs. GPU 1 of node2 falls off the bus (XID 79, and the driver reports it
// lost): slurmd's next health check drains node2 with gpuwatch's reason,
// as sinfo -R shows; a GPU job queued meanwhile is not placed there (node1
// is drained by an admin, so the job waits); once the GPU is back, the
// health check resumes node2 and the job starts there, while node1, whose
// GPUs are healthy all along, stays drained with the admin's reason.
func TestSlurmHealthCheckProgramDrainsAndResumes(t *testing.T) {
	program := filepath.Join(testenv.RepoRoot(), "deploy", "slurm", "gpuwatch-healthcheck.sh")
	sims := map[string]string{}
	cluster := testenv.StartSlurmClusterWith(t, 2, 2, testenv.SlurmClusterOptions{
		Conf: func(c *testenv.SlurmCluster) string {
			for _, n := range c.Nodes {
				sims[n.Name] = filepath.Join(c.Dir, n.Name+"-sim.yaml")
				writeFile(t, sims[n.Name], simHealthy)
				etc := filepath.Join(n.Dir, "etc-default")
				if err := os.Mkdir(etc, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(etc, "gpuwatch-healthcheck"), fmt.Sprintf(
					"GPUWATCH_BIN=%s\nGPUWATCH_HEALTH_OPTS=\"--backend=sim --sim.config=%s --collection.timeout=1s --health.source=local --health.kernel-log=\"\nSLURM_CONF=%s\n",
					gpuwatchBin, sims[n.Name], c.Conf))
			}
			return fmt.Sprintf("HealthCheckProgram=%s\nHealthCheckInterval=%d\nHealthCheckNodeState=ANY\n", program, healthCheckInterval)
		},
	})
	ctl := cluster.Controller
	setSim := func(node, content string) {
		t.Helper()
		tmp := sims[node] + ".tmp"
		writeFile(t, tmp, content)
		if err := os.Rename(tmp, sims[node]); err != nil {
			t.Fatal(err)
		}
	}
	reasons := func() map[string]string {
		out := map[string]string{}
		for line := range strings.SplitSeq(ctl.Run(t, "sinfo", "-R", "-h", "-o", "%N|%E"), "\n") {
			if node, reason, ok := strings.Cut(line, "|"); ok {
				out[node] = reason
			}
		}
		return out
	}
	const adminReason = "admin: bad DIMM B2"
	ctl.Run(t, "scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason="+adminReason)

	setSim("node2", simFallenOffTheBus)
	var got map[string]string
	testenv.WaitFor(t, 60*time.Second, "slurmd's health check to drain node2 with gpuwatch's reason", func() bool {
		got = reasons()
		return strings.HasPrefix(got["node2"], "gpuwatch: GPU 3 ")
	})
	if want := "gpuwatch: GPU 3 gpu_lost"; got["node2"] != want && !strings.HasPrefix(got["node2"], "gpuwatch: GPU 3 XID 79") {
		t.Errorf("node2's reason %q, want %q (or the XID, where gpuwatch health saw it)", got["node2"], want)
	}
	if got["node1"] != adminReason {
		t.Errorf("node1's reason %q, want the admin's %q", got["node1"], adminReason)
	}
	if state := ctl.Run(t, "sinfo", "-h", "-n", "node2", "-o", "%T"); state != "drained" {
		t.Errorf("node2 is %s, want drained", state)
	}

	job := cluster.Sbatch(t, "--gres=gpu:1", "-J", "after-the-fault", "--wrap", "sleep 300")
	defer ctl.Output(t.Context(), "scancel", job) // best effort: the cluster goes at cleanup anyway
	// The scheduler has looked at the job (a reason other than None) and
	// left it pending: no node may take it.
	testenv.WaitFor(t, 30*time.Second, "job "+job+" to be considered and left pending", func() bool {
		return ctl.Run(t, "squeue", "-h", "-j", job, "-o", "%T|%r") != "PENDING|None"
	})
	// slurmd logs the output of a health check that exits non-zero: a
	// later check of node2, still failing, left the drain as it was.
	slurmdLog := filepath.Join(cluster.Nodes[1].Dir, "slurmd.log")
	testenv.WaitFor(t, 30*time.Second, "a later health check of node2 to leave its drain as it is", func() bool {
		data, _ := os.ReadFile(slurmdLog)
		return strings.Contains(string(data), "unchanged: already drained by gpuwatch for this cause")
	})
	if s := ctl.Run(t, "squeue", "-h", "-j", job, "-o", "%T|%N"); s != "PENDING|" {
		t.Fatalf("job %s with every node drained: %q, want PENDING on no node", job, s)
	}

	setSim("node2", simHealthy)
	testenv.WaitFor(t, 60*time.Second, "slurmd's health check to resume node2, and job "+job+" to run there", func() bool {
		return ctl.Run(t, "squeue", "-h", "-j", job, "-o", "%T|%N") == "RUNNING|node2"
	})
	got = reasons()
	if _, ok := got["node2"]; ok {
		t.Errorf("node2 still has a reason after the resume: %q", got["node2"])
	}
	if got["node1"] != adminReason {
		t.Errorf("node1's reason %q after health checks of healthy GPUs, want the admin's %q", got["node1"], adminReason)
	}
	if state := ctl.Run(t, "sinfo", "-h", "-n", "node1", "-o", "%T"); state != "drained" {
		t.Errorf("node1 is %s, want drained (by the admin)", state)
	}
}
