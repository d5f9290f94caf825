//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The end of TestSlurmMultiNodeJob's job, what a site's records rest on: the
// shipped epilogs (deploy/slurm) run in the cluster, `gpuwatch job ID`
// gathers both nodes' records, and the EpilogSlurmctld's summary reaches
// Slurm's accounting database (slurmdbd) as the job's AdminComment.

// jobstatsComment is what "jobstats" writes in the AdminComment while the
// job runs, and otherToolsWord what another EpilogSlurmctld adds before
// gpuwatch's: gpuwatch's summary must come after both.
const (
	jobstatsComment = "JS1:H4sIAbc="
	otherToolsWord  = "site:checked"
)

// nodeAccountingDir is every node's --accounting.dir, the same path in all
// of them: the cluster mounts each node's own directory at Dir/node, so
// one slurm.conf line (the node epilog's) serves all nodes.
func nodeAccountingDir(c *testenv.SlurmCluster) string { return filepath.Join(c.Dir, "node", "acct") }

// shippedEpilogs returns the slurm.conf lines that run the shipped node
// epilog and EpilogSlurmctld, through wrappers that give them the
// settings a site puts in /etc/default/gpuwatch-slurm (Slurm gives
// epilogs almost no environment). The EpilogSlurmctld's stderr goes to
// Dir/ctld.err.
func shippedEpilogs(t *testing.T) func(c *testenv.SlurmCluster) string {
	return func(c *testenv.SlurmCluster) string {
		repo := testenv.RepoRoot()
		epilog := filepath.Join(c.Dir, "epilog.sh")
		writeFile(t, epilog, fmt.Sprintf("#!/bin/sh\nexport GPUWATCH_ACCOUNTING_DIR=%s GPUWATCH_EPILOG_WAIT=30\nexec %s\n",
			nodeAccountingDir(c), filepath.Join(repo, "deploy/slurm/gpuwatch-epilog.sh")))
		// Before gpuwatch's, the EpilogSlurmctld runs another tool's (as a
		// site's wrapper runs jobstats'), which adds its word in the
		// database only: the controller never hears of it.
		ctld := filepath.Join(c.Dir, "epilog-slurmctld.sh")
		writeFile(t, ctld, fmt.Sprintf(`#!/bin/sh
export PATH=/usr/bin:/bin SLURM_CONF=%s GPUWATCH=%s GPUWATCH_NODE_URL='http://{node}:%d' GPUWATCH_WAIT=60s
sacctmgr -i update job where jobid="$SLURM_JOB_ID" set AdminComment="$(sacct -n -X -P -j "$SLURM_JOB_ID" -o AdminComment) %s" >/dev/null
exec %s 2>>%s
`, c.Conf, gpuwatchBin, nodeGpuwatchPort, otherToolsWord, filepath.Join(repo, "deploy/slurm/gpuwatch-epilog-slurmctld.sh"), filepath.Join(c.Dir, "ctld.err")))
		for _, f := range []string{epilog, ctld} {
			if err := os.Chmod(f, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			if data, _ := os.ReadFile(filepath.Join(c.Dir, "ctld.err")); t.Failed() && len(data) > 0 {
				t.Logf("the EpilogSlurmctld's stderr:\n%s", data)
			}
		})
		return "Epilog=" + epilog + "\nEpilogSlurmctld=" + ctld + "\n"
	}
}

// sacctField is one field of the job's allocation in Slurm's accounting
// database ("" while slurmdbd has no such job).
func sacctField(t *testing.T, cluster *testenv.SlurmCluster, job, field string) string {
	t.Helper()
	out, err := cluster.Controller.Output(context.Background(), "sacct", "-j", job, "-X", "-n", "-P", "-o", field)
	if err != nil {
		t.Fatalf("sacct -j %s -o %s: %v\n%s", job, field, err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkEndedJobSummary runs once the job ended: it waits for the shipped
// EpilogSlurmctld's summary in sacct, then checks `gpuwatch job` across
// both nodes and what the controller shows. gpus are the GPU indexes the
// job held, by node.
func checkEndedJobSummary(t *testing.T, cluster *testenv.SlurmCluster, job string, gpus map[string]string) {
	t.Helper()
	// The EpilogSlurmctld waits for the nodes' records (their epilogs mark
	// the job ended; gpuwatch writes the record at its next tick), then
	// stores the summary with sacctmgr: sacct is where it lasts.
	var comment string
	testenv.WaitFor(t, 120*time.Second, "the EpilogSlurmctld's summary of job "+job+" in sacct", func() bool {
		comment = sacctField(t, cluster, job, "AdminComment")
		return strings.Contains(comment, jobs.AdminCommentPrefix)
	})
	// Slurm 22.05's sacctmgr lowercases every value it sets: the other
	// EpilogSlurmctld's sacctmgr lowered jobstats' part before gpuwatch's
	// ran, which keeps that as it is in the database (the controller's
	// copy still has the capitals); gpuwatch's is lowercase as written.
	perGPU := regexp.MustCompile(`;per_gpu=(\S+)$`).FindStringSubmatch(comment)
	if !strings.HasPrefix(comment, strings.ToLower(jobstatsComment+" "+otherToolsWord)+" "+jobs.AdminCommentPrefix+"gpus=2;") || perGPU == nil {
		t.Fatalf("sacct's AdminComment of job %s = %q: want jobstats' %s and the other EpilogSlurmctld's %s kept in front of gpuwatch's summary of 2 GPUs",
			job, comment, jobstatsComment, otherToolsWord)
	}
	for _, node := range []string{"node1", "node2"} {
		want := regexp.MustCompile(`(^|,)` + node + `/` + gpus[node] + `:sm\d+%:idle\d+%:mem1gib(,|$)`)
		if !want.MatchString(perGPU[1]) {
			t.Errorf("sacct's AdminComment %q: per_gpu lacks %s's GPU %s with 1 GiB peak memory", comment, node, gpus[node])
		}
	}
	elapsed, err := strconv.ParseFloat(sacctField(t, cluster, job, "ElapsedRaw"), 64)
	if err != nil || elapsed <= 0 {
		t.Fatalf("sacct -o ElapsedRaw of job %s: %v %v", job, elapsed, err)
	}

	// `gpuwatch job` as a user runs it on a login node: here the
	// controller, whose /etc/hosts names every node; the node list
	// comes from scontrol, which knows the job until MinJobAge.
	nodeURL := fmt.Sprintf("--job.node-url=http://{node}:%d", nodeGpuwatchPort)
	out := cluster.Controller.Run(t, gpuwatchBin, "job", job, nodeURL, "-o", "json")
	var s jobs.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("gpuwatch job %s -o json: %v\n%s", job, err, out)
	}
	checkSummary(t, s, job, gpus, elapsed)
	if t.Failed() {
		t.Logf("gpuwatch job %s -o json (sacct: ran %.0f s):\n%s", job, elapsed, out)
	}
	table := cluster.Controller.Run(t, gpuwatchBin, "job", job, nodeURL)
	for _, node := range []string{"node1", "node2"} {
		if !regexp.MustCompile(`(?m)^` + node + `\s+` + gpus[node] + `\s+H100`).MatchString(table) {
			t.Errorf("gpuwatch job %s: the table has no row for %s's GPU %s:\n%s", job, node, gpus[node], table)
		}
	}
	if !strings.Contains(table, "on node1, node2") {
		t.Errorf("gpuwatch job %s: the table's heading does not name both nodes:\n%s", job, table)
	}

	// The controller keeps the ended job (MinJobAge) with the comment it
	// had while the job ran: Slurm 22.05 refuses an ended job's update
	// (even while it is COMPLETING, the time of the EpilogSlurmctld), so
	// only sacct has the summary.
	if got := jobs.AdminCommentOf(cluster.Controller.Run(t, "scontrol", "show", "job", "-o", job)); got != jobstatsComment {
		t.Errorf("scontrol show job %s: AdminComment %q, want the running job's %q (22.05 takes no update of an ended job)", job, got, jobstatsComment)
	}
	refused, err := cluster.Controller.Output(context.Background(), "scontrol", "update", "JobId="+job, "AdminComment="+comment)
	if err == nil || !strings.Contains(string(refused), "Job has already finished") {
		t.Errorf("scontrol update of ended job %s: %v %q; want it refused (Job has already finished): then the controller could show the summary, and docs/jobs.md should say so", job, err, refused)
	}
}

// checkSummary checks `gpuwatch job -o json` of the 2-node job: both
// nodes' GPUs, each held about as long as Slurm says the job ran, used at
// the tasks' 50 % while their process ran, 1 GiB peak memory, an energy.
func checkSummary(t *testing.T, s jobs.Summary, job string, gpus map[string]string, elapsed float64) {
	t.Helper()
	if s.JobID != job || s.Source != "nodes" || s.Running || len(s.MissingNodes) > 0 ||
		strings.Join(s.Nodes, ",") != "node1,node2" || s.Slurm == nil || s.Slurm.Account != "physics" || s.Slurm.User != "root" {
		t.Errorf("gpuwatch job %s: id %q source %q running %v nodes %v missing %v identity %+v; want the ended job of root/physics on node1 and node2 from both nodes",
			job, s.JobID, s.Source, s.Running, s.Nodes, s.MissingNodes, s.Slurm)
	}
	if len(s.GPUs) != 2 {
		t.Fatalf("gpuwatch job %s: %d GPUs, want node1's and node2's", job, len(s.GPUs))
	}
	// Allocation is seen within a Slurm poll and an accounting tick (1 s
	// each here) of its start and end: a few seconds of slack, more on a
	// busy machine, but a doubled or missing time is far off.
	slack := max(6, elapsed/4)
	for _, g := range s.GPUs {
		where := fmt.Sprintf("gpuwatch job %s: %s GPU %d", job, g.Node, g.Index)
		if strconv.Itoa(g.Index) != gpus[g.Node] || g.UUID == "" {
			t.Errorf("%s (%s): the job held GPU %s there", where, g.UUID, gpus[g.Node])
		}
		if math.Abs(g.AllocatedSeconds-elapsed) > slack {
			t.Errorf("%s: allocated %.1f s; Slurm says the job ran %.0f s", where, g.AllocatedSeconds, elapsed)
		}
		// The task's process was on the GPU, at 50 % SM use, from a moment
		// after the job started to its end: the mean over the allocation
		// is about 0.5 (a little less for that moment).
		if g.ProcessSeconds < elapsed/2 || g.ProcessSeconds > g.AllocatedSeconds+1 {
			t.Errorf("%s: the process ran %.1f s of the %.1f s allocated; want most of the job's %.0f s", where, g.ProcessSeconds, g.AllocatedSeconds, elapsed)
		}
		if g.SMUtilizationMean == nil || *g.SMUtilizationMean < 0.35 || *g.SMUtilizationMean > 0.6 {
			t.Errorf("%s: mean SM utilization %v, want about the task's 0.5", where, fmtPtr(g.SMUtilizationMean))
		}
		// SM-seconds are the samples' integral: 0.5 of the time the process
		// ran (no sample from before its task named it), and no interval
		// above the task's use by more than a sample period's rounding.
		if g.SMSeconds == nil || math.Abs(*g.SMSeconds-0.5*g.ProcessSeconds) > 0.1*0.5*g.ProcessSeconds {
			t.Errorf("%s: %v SM-seconds over the process's %.1f s, want 0.5 of it ± 10 %%", where, fmtPtr(g.SMSeconds), g.ProcessSeconds)
		}
		if g.SMUtilizationMax == nil || *g.SMUtilizationMax < 0.4 || *g.SMUtilizationMax > 0.75 {
			t.Errorf("%s: max SM utilization %v, want about the task's 0.5", where, fmtPtr(g.SMUtilizationMax))
		}
		if g.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax != 1<<30 {
			t.Errorf("%s: peak memory %v, want the task's 1 GiB", where, fmtPtr(g.MemoryUsedBytesMax))
		}
		// The simulated H100 draws at most its 700 W limit.
		if g.EnergyJoules == nil || *g.EnergyJoules <= 0 || *g.EnergyJoules > 700*g.AllocatedSeconds {
			t.Errorf("%s: energy %v J over %.1f s, want some, at most 700 W's worth", where, fmtPtr(g.EnergyJoules), g.AllocatedSeconds)
		}
	}
	if s.Total.GPUs != 2 || s.Total.MemoryUsedBytesMax == nil || *s.Total.MemoryUsedBytesMax != 1<<30 ||
		math.Abs(s.Total.AllocatedSeconds-s.GPUs[0].AllocatedSeconds-s.GPUs[1].AllocatedSeconds) > 0.01 {
		t.Errorf("gpuwatch job %s: total %+v, want 2 GPUs, their allocated seconds summed, 1 GiB peak", job, s.Total)
	}
}

// fmtPtr prints a figure that may be absent.
func fmtPtr[T any](p *T) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}
