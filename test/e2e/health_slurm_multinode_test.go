//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
// GPUs are healthy all along, stays drained with the admin's reason. Then
// gpuwatch serve runs on node2 and the settings ask it (--health.source=
// serve): an XID 79 that serve counted, on a GPU that still answers,
// drains node2 with the XID as its reason, which a standalone gpuwatch
// health could not see; serve started again with the GPU back (the reboot
// the catalog asks for) resumes it.
func TestSlurmHealthCheckProgramDrainsAndResumes(t *testing.T) {
	program := filepath.Join(testenv.RepoRoot(), "deploy", "slurm", "gpuwatch-healthcheck.sh")
	sims, settings := map[string]string{}, map[string]string{}
	cluster := testenv.StartSlurmClusterWith(t, 2, 2, testenv.SlurmClusterOptions{
		Conf: func(c *testenv.SlurmCluster) string {
			for _, n := range c.Nodes {
				sims[n.Name] = filepath.Join(c.Dir, n.Name+"-sim.yaml")
				writeFile(t, sims[n.Name], simHealthy)
				etc := filepath.Join(n.Dir, "etc-default")
				if err := os.Mkdir(etc, 0o755); err != nil {
					t.Fatal(err)
				}
				settings[n.Name] = filepath.Join(etc, "gpuwatch-healthcheck")
				writeFile(t, settings[n.Name], healthCheckSettings(c,
					"--backend=sim --sim.config="+sims[n.Name]+" --collection.timeout=1s --health.source=local --health.kernel-log="))
			}
			return fmt.Sprintf("HealthCheckProgram=%s\nHealthCheckInterval=%d\nHealthCheckNodeState=ANY\n", program, healthCheckInterval)
		},
	})
	ctl := cluster.Controller
	// replace writes a file the health check may be reading, atomically.
	replace := func(path, content string) {
		t.Helper()
		writeFile(t, path+".tmp", content)
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	setSim := func(node, content string) { t.Helper(); replace(sims[node], content) }
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

	// With gpuwatch serve on node2, the health check asks it: the XID
	// that serve counted names the drain, though the GPU still answers.
	ctl.Run(t, "scancel", job)
	node2 := cluster.Nodes[1]
	serveAddr := node2.Addr + ":" + strconv.Itoa(nodeGpuwatchPort)
	serveSim := filepath.Join(cluster.Dir, "node2-serve-sim.yaml")
	writeFile(t, serveSim, simXID79)
	serve := startNodeServe(t, node2, serveAddr, serveSim)
	replace(settings["node2"], healthCheckSettings(cluster,
		"--web.listen-address="+serveAddr+" --health.source=serve --collection.timeout=1s"))
	testenv.WaitFor(t, 60*time.Second, "slurmd's health check to drain node2 with the XID serve counted", func() bool {
		got = reasons()
		return got["node2"] != ""
	})
	if want := "gpuwatch: GPU 3 XID 79 (GPU has fallen off the bus)"; got["node2"] != want {
		t.Errorf("node2's reason with serve on the node %q, want %q", got["node2"], want)
	}
	// The catalog's action for XID 79 is a reboot: serve starts again
	// with the GPU back, its XID history empty, and the next health check
	// resumes node2.
	serve.Stop()
	writeFile(t, serveSim, simHealthy)
	startNodeServe(t, node2, serveAddr, serveSim)
	testenv.WaitFor(t, 60*time.Second, "slurmd's health check to resume node2 once serve sees the GPU healthy", func() bool {
		_, drained := reasons()["node2"]
		return !drained
	})
	// sinfo marks with "*" a node that has not answered slurmctld's last
	// ping (sinfo(1)); what counts here is that the drain is gone.
	if state := ctl.Run(t, "sinfo", "-h", "-n", "node2", "-o", "%T"); strings.TrimSuffix(state, "*") != "idle" {
		t.Errorf("node2 is %s after the resume, want idle", state)
	}
	if got = reasons(); got["node1"] != adminReason {
		t.Errorf("node1's reason %q at the end, want the admin's %q", got["node1"], adminReason)
	}
}

// simXID79 raises XID 79 on GPU 3 a second after the simulator starts, the
// GPU still answering: only a watcher running at that moment counts it.
const simXID79 = "profile: dgx-h100\nfaults:\n  - {gpu: 3, xid: 79, at: 1s}\n"

// healthCheckSettings is a node's /etc/default/gpuwatch-healthcheck with
// the given flags of gpuwatch health.
func healthCheckSettings(c *testenv.SlurmCluster, opts string) string {
	return fmt.Sprintf("GPUWATCH_BIN=%s\nGPUWATCH_HEALTH_OPTS=\"%s\"\nSLURM_CONF=%s\n", gpuwatchBin, opts, c.Conf)
}

// startNodeServe starts gpuwatch serve on node, on the simulated GPUs of
// simConfig, and waits for it to answer /api/v1/health.
func startNodeServe(t *testing.T, node *testenv.SlurmNode, addr, simConfig string) *testenv.NodeProcess {
	t.Helper()
	p := node.StartProcess(t, gpuwatchBin, "serve", "--web.listen-address="+addr, "--backend=sim", "--sim.config="+simConfig,
		"--collection.timeout=1s", "--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=", "--log.level=warn")
	testenv.WaitFor(t, 30*time.Second, "gpuwatch serve on "+node.Name+" to answer /api/v1/health", func() bool {
		if p.Exited() {
			t.Fatalf("gpuwatch serve on %s exited:\n%s", node.Name, p.Output.String())
		}
		resp, err := http.Get("http://" + addr + "/api/v1/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}
