package slurm

import (
	"bufio"
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// parseExposition maps "name{labels}" to the value of each sample line.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestRealSlurm starts slurmctld + slurmd + munged with two fake h100
// GPUs, submits jobs in four states and asserts every metric's value.
func TestRealSlurm(t *testing.T) {
	c := testenv.StartSlurm(t, 2)

	done := c.Sbatch(t, "-A", "chem", "-J", "done", "--wrap", "true")
	c.WaitJob(t, done, "COMPLETED", "None")
	running := c.Sbatch(t, "-A", "physics", "-J", "train", "--gres=gpu:1", "-c", "1", "--wrap", "sleep 300")
	c.WaitJob(t, running, "RUNNING", "None")
	// Asks for both GPUs while one is taken: waits for resources.
	big := c.Sbatch(t, "-A", "chem", "-J", "big", "--gres=gpu:h100:2", "-c", "1", "--wrap", "sleep 300")
	c.WaitJob(t, big, "PENDING", "Resources")
	after := c.Sbatch(t, "-A", "physics", "-J", "after", "-p", "debug", "--gres=gpu:1",
		"--dependency=afterok:"+running, "--wrap", "sleep 30")
	c.WaitJob(t, after, "PENDING", "Dependency")

	node := c.Node
	common := map[string]float64{
		`slurm_jobs{account="chem",partition="gpu",state="completed",user="root"}`:    1,
		`slurm_jobs{account="chem",partition="gpu",state="pending",user="root"}`:      1,
		`slurm_jobs{account="physics",partition="debug",state="pending",user="root"}`: 1,
		`slurm_jobs{account="physics",partition="gpu",state="running",user="root"}`:   1,
		`slurm_jobs_pending{partition="debug",reason="Dependency"}`:                   1,
		`slurm_jobs_pending{partition="gpu",reason="Resources"}`:                      1,
		`slurm_gpus_pending{partition="debug",type=""}`:                               1,
		`slurm_gpus_pending{partition="gpu",type="h100"}`:                             2,
		`slurm_nodes{partition="debug",state="mixed"}`:                                1,
		`slurm_nodes{partition="gpu",state="mixed"}`:                                  1,
		`slurm_node_cpus{node="` + node + `",state="allocated"}`:                      1,
		`slurm_node_cpus{node="` + node + `",state="idle"}`:                           1,
		`slurm_node_cpus{node="` + node + `",state="other"}`:                          0,
		`slurm_node_cpus{node="` + node + `",state="total"}`:                          2,
		`slurm_node_gpus{node="` + node + `",state="allocated",type="h100"}`:          1,
		`slurm_node_gpus{node="` + node + `",state="idle",type="h100"}`:               1,
		`slurm_node_gpus{node="` + node + `",state="other",type="h100"}`:              0,
		`slurm_node_gpus{node="` + node + `",state="total",type="h100"}`:              2,
		`slurm_collector_success{command="squeue"}`:                                   1,
		`slurm_collector_success{command="sinfo"}`:                                    1,
		`slurm_collector_success{command="sdiag"}`:                                    1,
		`slurm_collector_errors_total{command="squeue"}`:                              0,
		`slurm_collector_errors_total{command="sinfo"}`:                               0,
		`slurm_collector_errors_total{command="sdiag"}`:                               0,
	}
	for _, p := range []string{"gpu", "debug"} {
		for s, v := range map[string]float64{"allocated": 1, "idle": 1, "other": 0, "total": 2} {
			common[`slurm_partition_cpus{partition="`+p+`",state="`+s+`"}`] = v
			common[`slurm_partition_gpus{partition="`+p+`",state="`+s+`",type="h100"}`] = v
		}
	}

	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			col, err := NewCollector(Options{Format: format, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			reg := newTestRegistry(t, col)
			got := parseExposition(t, gatherText(t, reg))
			want := map[string]float64{}
			maps.Copy(want, common)
			// Text output gives the request (--gres=gpu:1), not the type
			// the job got; JSON's gres_detail says h100.
			gpuType := "h100"
			if format == "text" {
				gpuType = ""
			}
			want[`slurm_gpus_allocated{account="physics",partition="gpu",type="`+gpuType+`",user="root"}`] = 1
			checkSeries(t, got, want, start)
		})
	}

	// Job lookups on the "compute node": identity, GPU index held, and the
	// environment of the job's process.
	l, err := NewJobLookup(JobLookupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	job, err := l.Lookup(ctx, running)
	wantJob := snapshot.SlurmJob{JobID: running, User: "root", Account: "physics", Partition: "gpu", JobName: "train"}
	if err != nil || job != wantJob {
		t.Errorf("Lookup(%s) = %+v, %v; want %+v", running, job, err, wantJob)
	}
	allocs, err := l.Allocations(ctx, node)
	wantAllocs := []GPUAllocation{{Node: node, GPU: 0, Type: "h100", Job: wantJob}}
	if len(allocs) == 1 {
		// The job started during this test: scontrol's StartTime, read in
		// local time, is a moment ago.
		if ago := time.Since(allocs[0].Start); ago < -time.Minute || ago > 10*time.Minute {
			t.Errorf("Allocations(%s): job started %v (%v ago); want a moment ago", node, allocs[0].Start, ago)
		}
		allocs[0].Start = time.Time{}
	}
	if err != nil || len(allocs) != 1 || allocs[0] != wantAllocs[0] {
		t.Errorf("Allocations(%s) = %+v, %v; want %+v", node, allocs, err, wantAllocs)
	}
	if _, err := l.Lookup(ctx, "999999"); err == nil {
		t.Error("Lookup of an unknown job: no error")
	}
	pids := c.Run(t, "scontrol", "listpids", running)
	found := false
	for _, line := range strings.Split(pids, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != running {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		env, err := ReadJobEnv("/proc", uint32(pid))
		if err != nil {
			continue // the process may be gone
		}
		// SLURM_JOB_GPUS is only set when slurmd maps the GRES files to
		// devices it knows; with the fake files here it may be absent.
		if env.JobID != running || env.Account != "physics" || (env.JobGPUs != "" && env.JobGPUs != "0") {
			t.Errorf("pid %d environ: %+v, want job %s of account physics (GPU 0 if any)", pid, env, running)
		}
		found = true
	}
	if !found {
		t.Errorf("no process of job %s had a readable environ; listpids:\n%s", running, pids)
	}
}

// checkSeries asserts that every slurm_ series has its wanted value, that
// there is no other (apart from the scheduler and timing series, which are
// checked for plausibility).
func checkSeries(t *testing.T, got, want map[string]float64, start time.Time) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (want %v)", k, v)
		} else if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; ok {
			continue
		}
		name := k
		if before, _, ok := strings.Cut(k, "{"); ok {
			name = before
		}
		switch {
		case name == mCollectorDuration:
			if v <= 0 || v > 10 {
				t.Errorf("%s = %v, want 0 < d <= 10 s", k, v)
			}
		case name == mCollectorLastSuccess:
			if v < float64(start.Unix()-1) || v > float64(time.Now().Unix()+1) {
				t.Errorf("%s = %v, want about now", k, v)
			}
		case name == mSchedThreads:
			if v < 1 {
				t.Errorf("%s = %v, want >= 1", k, v)
			}
		case strings.HasPrefix(name, "slurm_scheduler_") && strings.HasSuffix(name, "_seconds"):
			if v < 0 || v > 60 {
				t.Errorf("%s = %v, want 0..60 s", k, v)
			}
		case name == mSchedQueue || name == mSchedBFQueue || name == mSchedAgentQueue || name == mSchedDBDAgentQueue || name == mSchedBackfilledJobs:
			if v < 0 || v > 10 {
				t.Errorf("%s = %v, want 0..10 on a 4-job cluster", k, v)
			}
		case strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_"):
		default:
			t.Errorf("unexpected series %s = %v", k, v)
		}
	}
	for _, name := range []string{mSchedThreads, mSchedQueue, mSchedLastCycle, mSchedMeanCycle, mCollectorDuration + `{command="squeue"}`} {
		if _, ok := got[name]; !ok {
			t.Errorf("missing %s", name)
		}
	}
}
