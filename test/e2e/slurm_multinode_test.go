//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// nodeGpuwatchPort is where gpuwatch listens on every node of a multi-node
// cluster (each node has its own network namespace, so one port serves
// all), which makes `http://{node}:9410` a node-URL template that works
// from inside any node: their /etc/hosts name every node.
const nodeGpuwatchPort = 9410

// TestSlurmMultiNodeJob runs a real 2-node GPU job on a 3-node Slurm
// (testenv.StartSlurmCluster) with gpuwatch on every node. Each task of the
// job lists its own PID, on the GPU Slurm gave it (CUDA_VISIBLE_DEVICES), in
// its node's simulator processes_from file, so the unmodified attribution
// (procfs, the job's cgroup, scontrol) must find the job. On each node of
// the job the process must carry the job in /api/v1/processes and /metrics,
// and gpu_slurm_job_info must name the job on the GPU scontrol says it
// holds (node1's GPU 0 is held by another job, so the two nodes differ);
// the third node must know nothing of it; after scancel it must be gone
// while the other job stays. The cluster keeps accounting (slurmdbd) and
// runs the shipped epilogs: once the job ended, `gpuwatch job ID` shows
// both nodes' GPUs with the right figures, and sacct the summary the
// EpilogSlurmctld stored (checkEndedJobSummary).
func TestSlurmMultiNodeJob(t *testing.T) {
	cluster := testenv.StartSlurmClusterWith(t, 3, 2, testenv.SlurmClusterOptions{
		Accounting: true, Accounts: []string{"physics", "chem"}, Conf: shippedEpilogs(t),
	})
	work := filepath.Join(cluster.Dir, "e2e")
	if err := os.Mkdir(work, 0o777); err != nil {
		t.Fatal(err)
	}
	urls := gpuwatchNodeURLs(t, cluster, work)

	blocker := cluster.Sbatch(t, "-w", "node1", "--gres=gpu:1", "-A", "chem", "-J", "blocker", "--wrap", "sleep 300")
	waitJobState(t, cluster, blocker, "RUNNING")
	task := filepath.Join(work, "task.sh")
	writeFile(t, task, `#!/bin/sh
# One task of the GPU job: it "opens" the GPU Slurm gave it by listing its
# own PID there in its node's simulator file, then sleeps.
out="$1/$(hostname).yaml"
printf 'processes:\n  - {gpu: %s, pid: %s, used_memory_bytes: 1073741824, sm_utilization: 0.5}\n' "$CUDA_VISIBLE_DEVICES" "$$" >"$out.tmp"
mv "$out.tmp" "$out"
exec sleep 300
`)
	job := cluster.Sbatch(t, "-N2", "-w", "node1,node2", "--gres=gpu:1", "-A", "physics", "-J", "train",
		"--wrap", "srun -N2 --ntasks-per-node=1 sh "+task+" "+work)
	waitJobState(t, cluster, job, "RUNNING")
	// Best effort: the cluster and its jobs go at cleanup anyway.
	defer cluster.Controller.Output(context.Background(), "scancel", job, blocker)
	// What jobstats would have written while the job runs.
	cluster.Controller.Run(t, "scontrol", "update", "JobId="+job, "AdminComment="+jobstatsComment)

	gpus := jobGPUIndexes(t, cluster, job)
	if gpus["node1"] != "1" || gpus["node2"] != "0" {
		t.Fatalf("scontrol gives job %s GPUs %v; want node1's GPU 1 (GPU 0 is the other job's) and node2's GPU 0", job, gpus)
	}
	pids := map[string]string{}
	for _, node := range []string{"node1", "node2"} {
		file := filepath.Join(work, node+".yaml")
		testenv.WaitFor(t, 30*time.Second, "the task on "+node+" to write "+file, func() bool {
			_, err := os.Stat(file)
			return err == nil
		})
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`\{gpu: (\d+), pid: (\d+),`).FindStringSubmatch(string(data))
		if m == nil || m[1] != gpus[node] {
			t.Fatalf("%s: the task's entry %q is not on GPU %s", file, m, gpus[node])
		}
		pids[node] = m[2]
	}

	for _, node := range []string{"node1", "node2"} {
		base, gpu, pid := urls[node], gpus[node], pids[node]
		other := map[string]string{"0": "1", "1": "0"}[gpu]
		testenv.WaitFor(t, 30*time.Second, node+": job "+job+"'s process "+pid+" attributed in /api/v1/processes", func() bool {
			p, ok := apiProcess(t, base, pid)
			return ok && p.GPU.String() == gpu && p.User == "root" && p.Slurm.JobID == job &&
				p.Slurm.User == "root" && p.Slurm.Account == "physics" && p.Slurm.Partition == "gpu" && p.Slurm.JobName == "train"
		})
		testenv.WaitFor(t, 30*time.Second, node+": job "+job+" in /metrics on GPU "+gpu, func() bool {
			fams := testenv.ParseMetrics(t, nodeGet(t, base+"/metrics"))
			_, info := testenv.Sample(fams, "gpu_slurm_job_info", map[string]string{"gpu": gpu, "job_id": job, "user": "root", "account": "physics", "partition": "gpu"})
			mem, proc := testenv.Sample(fams, "gpu_process_memory_used_bytes", map[string]string{"gpu": gpu, "slurm_job": job, "user": "root"})
			return info && proc && mem == 1<<30
		})
		fams := testenv.ParseMetrics(t, nodeGet(t, base+"/metrics"))
		if _, ok := testenv.Sample(fams, "gpu_slurm_job_info", map[string]string{"gpu": other, "job_id": job}); ok {
			t.Errorf("%s: gpu_slurm_job_info puts job %s on GPU %s too; scontrol gives it GPU %s only", node, job, other, gpu)
		}
	}
	testenv.WaitFor(t, 30*time.Second, "node1: the other job on GPU 0", func() bool {
		_, ok := testenv.Sample(testenv.ParseMetrics(t, nodeGet(t, urls["node1"]+"/metrics")), "gpu_slurm_job_info", map[string]string{"gpu": "0", "job_id": blocker, "account": "chem"})
		return ok
	})
	if named := seriesNamingJob(testenv.ParseMetrics(t, nodeGet(t, urls["node3"]+"/metrics")), job, blocker); len(named) > 0 {
		t.Errorf("node3 runs no job, yet its /metrics names one:\n%s", strings.Join(named, "\n"))
	}

	// The job's figures are checked against the time Slurm says it ran:
	// it runs long enough for a wrong (doubled, zero) figure to stand out
	// from the seconds of slack its start and end are seen with.
	testenv.WaitFor(t, 60*time.Second, "job "+job+" to have run 20 s", func() bool {
		return jobRunSeconds(t, cluster, job) >= 20
	})
	cluster.Controller.Run(t, "scancel", job)
	waitJobGone(t, cluster, job)
	for _, node := range []string{"node1", "node2"} {
		base, pid := urls[node], pids[node]
		testenv.WaitFor(t, 30*time.Second, node+": job "+job+" gone from /api/v1/processes and /metrics", func() bool {
			if _, ok := apiProcess(t, base, pid); ok {
				return false
			}
			return len(seriesNamingJob(testenv.ParseMetrics(t, nodeGet(t, base+"/metrics")), job)) == 0
		})
	}
	if _, ok := testenv.Sample(testenv.ParseMetrics(t, nodeGet(t, urls["node1"]+"/metrics")), "gpu_slurm_job_info", map[string]string{"gpu": "0", "job_id": blocker}); !ok {
		t.Errorf("node1: the other job %s vanished from gpu_slurm_job_info with job %s", blocker, job)
	}
	checkEndedJobSummary(t, cluster, job, gpus)
}

// jobRunSeconds is the job's run time so far, from squeue's [D-][H:]M:SS.
func jobRunSeconds(t *testing.T, cluster *testenv.SlurmCluster, id string) int {
	t.Helper()
	out := cluster.Controller.Run(t, "squeue", "-h", "-j", id, "-o", "%M")
	days, hms, ok := strings.Cut(out, "-")
	if !ok {
		days, hms = "0", out
	}
	d, err := strconv.Atoi(days)
	total := 0
	for f := range strings.SplitSeq(hms, ":") {
		n, e := strconv.Atoi(f)
		total, err = total*60+n, errors.Join(err, e)
	}
	if err != nil {
		t.Fatalf("squeue -o %%M of job %s: %q: %v", id, out, err)
	}
	return d*86400 + total
}

// gpuwatchNodeURLs starts gpuwatch (simulated GPUs, real attribution) on
// every compute node of the cluster and returns each node's base URL, as
// the test process reaches it, by node name. Node n's simulator reports,
// besides the profile's GPUs, the processes listed in work/n.yaml
// (processes_from). Each keeps job records in nodeAccountingDir, which the
// node epilog of shippedEpilogs names; `gpuwatch job ID` across nodes runs
// inside the controller with --job.node-url=http://{node}:9410.
func gpuwatchNodeURLs(t *testing.T, cluster *testenv.SlurmCluster, work string) map[string]string {
	t.Helper()
	urls := map[string]string{}
	for _, n := range cluster.Nodes {
		cfg := filepath.Join(work, n.Name+"-sim.yaml")
		writeFile(t, cfg, "profile: dgx-h100\nprocesses: []\nprocesses_from: "+n.Name+".yaml\n")
		addr := n.Addr + ":" + strconv.Itoa(nodeGpuwatchPort)
		p := n.StartProcess(t, gpuwatchBin, "--web.listen-address="+addr, "--backend=sim", "--sim.config="+cfg,
			"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=",
			"--slurm.jobs=true", "--slurm.poll-interval=1s", "--attribution.cache-ttl=1s", "--ui.interval=1s", "--ui.history=1m", "--log.level=warn",
			"--accounting.dir="+nodeAccountingDir(cluster), "--accounting.interval=1s")
		urls[n.Name] = "http://" + addr
		testenv.WaitFor(t, 30*time.Second, "gpuwatch on "+n.Name+" to answer /healthz", func() bool {
			if p.Exited() {
				t.Fatalf("gpuwatch on %s exited:\n%s", n.Name, p.Output.String())
			}
			_, err := nodeFetch(urls[n.Name] + "/healthz")
			return err == nil
		})
	}
	return urls
}

// nodeClient talks to the nodes' addresses directly, whatever proxy the
// environment names.
var nodeClient = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}

func nodeFetch(url string) (string, error) {
	resp, err := nodeClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), err
}

func nodeGet(t *testing.T, url string) string {
	t.Helper()
	body, err := nodeFetch(url)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// apiProcessDoc is the part of /api/v1/processes this test reads.
type apiProcessDoc struct {
	PID   json.Number `json:"pid"`
	GPU   json.Number `json:"gpu"`
	User  string      `json:"user"`
	Slurm struct {
		JobID     string `json:"job_id"`
		User      string `json:"user"`
		Account   string `json:"account"`
		Partition string `json:"partition"`
		JobName   string `json:"job_name"`
	} `json:"slurm"`
}

// apiProcess returns the process pid from base's /api/v1/processes.
func apiProcess(t *testing.T, base, pid string) (apiProcessDoc, bool) {
	t.Helper()
	var doc struct {
		Processes []apiProcessDoc `json:"processes"`
	}
	body := nodeGet(t, base+"/api/v1/processes")
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%s/api/v1/processes: %v\n%s", base, err, body)
	}
	for _, p := range doc.Processes {
		if p.PID.String() == pid {
			return p, true
		}
	}
	return apiProcessDoc{}, false
}

func waitJobState(t *testing.T, cluster *testenv.SlurmCluster, id, state string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "job "+id+" "+state, func() bool { return cluster.JobState(t, id) == state })
}

// waitJobGone waits until the job has left every node: no longer RUNNING
// or COMPLETING.
func waitJobGone(t *testing.T, cluster *testenv.SlurmCluster, id string) {
	t.Helper()
	// COMPLETING lasts while the epilogs run: the node epilog waits (up
	// to 30 s here) for the node's record.
	testenv.WaitFor(t, 60*time.Second, "job "+id+" to end", func() bool {
		s := cluster.JobState(t, id)
		return s != "RUNNING" && s != "COMPLETING"
	})
}

var gresIndexRE = regexp.MustCompile(`Nodes=(\S+) .*GRES=gpu:[^(\s]*\(IDX:(\d+)\)`)

// jobGPUIndexes reads, from `scontrol show job -d`, the GPU index the job
// holds on each node (one GPU per node).
func jobGPUIndexes(t *testing.T, cluster *testenv.SlurmCluster, id string) map[string]string {
	t.Helper()
	out := cluster.Controller.Run(t, "scontrol", "show", "job", "-d", id)
	gpus := map[string]string{}
	for _, m := range gresIndexRE.FindAllStringSubmatch(out, -1) {
		gpus[m[1]] = m[2]
	}
	return gpus
}

// seriesNamingJob lists the series whose job_id or slurm_job label is one
// of jobs.
func seriesNamingJob(families map[string]*dto.MetricFamily, jobs ...string) []string {
	var out []string
	for name, mf := range families {
		if accountingCounters[name] {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if (lp.GetName() == "job_id" || lp.GetName() == "slurm_job") && slices.Contains(jobs, lp.GetValue()) {
					out = append(out, name+" "+m.String())
				}
			}
		}
	}
	return out
}

// accountingCounters are the per-owner counters that, by design, outlive
// their owner for --accounting.retention so that the last value is scraped
// (docs/accounting.md): a job's series among them is no sign that gpuwatch
// still sees the job.
var accountingCounters = map[string]bool{
	"gpu_process_seconds_total":                  true,
	"gpu_process_sm_seconds_total":               true,
	"gpu_process_memory_used_byte_seconds_total": true,
	"gpu_process_energy_joules_total":            true,
	"gpu_allocation_seconds_total":               true,
	"gpu_allocation_idle_seconds_total":          true,
}
