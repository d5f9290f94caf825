//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestDemoShowsEveryOwnerKind: the README's demo, run as a new user would
// (no attribution flag), names unix users, a Docker Compose container, a
// Kubernetes pod and Slurm jobs, in `gpuwatch ps` and in /metrics.
func TestDemoShowsEveryOwnerKind(t *testing.T) {
	demo := []string{"--backend=sim", "--sim.profile=dgx-h100"}
	// A generous lookup budget: the one collection of ps must not miss an
	// owner on a busy CI machine.
	out, code := runGpuwatch(t, append([]string{"ps", "-o", "json", "--attribution.timeout=4s"}, demo...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps: %s", out)
	}
	var doc struct {
		Clock     string `json:"clock"`
		Processes []struct {
			PID       int    `json:"pid"`
			User      string `json:"user"`
			Container struct {
				Name           string `json:"name"`
				ComposeProject string `json:"compose_project"`
			} `json:"container"`
			Pod struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"pod"`
			Slurm struct {
				JobID   string `json:"job_id"`
				Account string `json:"account"`
			} `json:"slurm"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Clock != "simulated" {
		t.Errorf("ps JSON clock = %q, want simulated", doc.Clock)
	}
	kinds := map[string]bool{}
	for _, p := range doc.Processes {
		if p.User == "" {
			t.Errorf("pid %d has no user", p.PID)
		}
		switch {
		case p.Slurm.JobID != "" && p.Slurm.Account != "":
			kinds["slurm"] = true
		case p.Container.ComposeProject != "" && p.Container.Name != "":
			kinds["compose"] = true
		case p.Pod.Name != "" && p.Pod.Namespace != "":
			kinds["pod"] = true
		default:
			kinds["user"] = true
		}
	}
	if len(kinds) != 4 {
		t.Errorf("ps shows owner kinds %v, want slurm, compose, pod and user:\n%s", kinds, out)
	}

	base, _ := startGpuwatch(t, demo...)
	// A lookup that misses one scrape's budget on a busy machine serves
	// the next scrape.
	var fams map[string]*dto.MetricFamily
	testenv.WaitFor(t, 20*time.Second, "owners of every kind on /metrics", func() bool {
		fams = testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		return len(ownerKinds(fams)) == 4
	})
	if _, ok := testenv.Sample(fams, "gpu_kubernetes_allocation_info", map[string]string{"gpu": "6", "namespace": "inference"}); !ok {
		t.Error("no kubelet allocation of GPU 6")
	}
	// An idle pod holds GPU 7's idle 2g.20gb MIG instance through a DRA
	// claim.
	migs := map[string]string{}
	for _, l := range labelsOf(fams, "gpu_mig_info") {
		if l["gpu"] == "7" {
			migs[l["profile"]] = l["mig_uuid"]
		}
	}
	if _, ok := testenv.Sample(fams, "gpu_kubernetes_allocation_info", map[string]string{"gpu": "7", "mig_uuid": migs["2g.20gb"], "pod": "embedder-0"}); !ok || migs["2g.20gb"] == "" {
		t.Errorf("no DRA allocation of GPU 7's 2g.20gb (%q) to the embedder pod", migs["2g.20gb"])
	}
	if _, ok := testenv.Sample(fams, "gpu_slurm_job_info", map[string]string{"gpu": "5"}); !ok {
		t.Error("the idle GPU 5 is not held by a Slurm job")
	}
	for _, source := range []string{"procfs", "docker", "cri", "kubelet", "slurm"} {
		if v, ok := testenv.Sample(fams, "gpuwatch_attribution_errors_total", map[string]string{"source": source}); !ok || v != 0 {
			t.Errorf("%s errors = %v (present %v)", source, v, ok)
		}
	}
}

// ownerKinds says which kinds of owner gpu_process_memory_used_bytes names.
func ownerKinds(fams map[string]*dto.MetricFamily) map[string]bool {
	found := map[string]bool{}
	for _, m := range fams["gpu_process_memory_used_bytes"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch {
		case labels["slurm_job"] != "":
			found["slurm"] = true
		case labels["pod"] != "" && labels["namespace"] != "":
			found["pod"] = true
		case labels["container"] != "":
			found["container"] = true
		case labels["user"] != "":
			found["user"] = true
		}
	}
	return found
}

// TestLogsSpeakUp: one INFO line at start says what was found and which
// owner sources are on; a socket given explicitly that is not there is a
// warning at start, and its failures are warnings naming the flag.
func TestLogsSpeakUp(t *testing.T) {
	missing := "/nonexistent/kubelet.sock"
	base, proc := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100", "--path.procfs="+t.TempDir(),
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket="+missing, "--slurm.jobs=false")
	// The start summary follows the first collection, whose owner lookup
	// may log the failure first: wait for both.
	testenv.WaitFor(t, 15*time.Second, "the kubelet failure warning and the start summary", func() bool {
		_, _ = httpGetNoFail(base + "/metrics")
		out := proc.Output.String()
		return strings.Contains(out, `msg="attribution source failing`) && strings.Contains(out, `msg="gpuwatch started"`)
	})
	out := proc.Output.String()
	for _, want := range []string{
		`level=WARN source=attribution.go`, `msg="socket not found; its owner labels stay empty until it appears" flag=--kubelet.pod-resources-socket socket=` + missing,
		`owner_source=kubelet failures=`, `check="--kubelet.pod-resources-socket=` + missing + `"`,
		`level=INFO source=stack.go`, `msg="gpuwatch started"`, `backend=sim profile=dgx-h100`,
		`gpus=8 models="8× NVIDIA H100 80GB HBM3" driver=550.90.07 branch=R550`, `mig_gpu_indexes=7`,
		`owner_sources=procfs,kubelet absent=none`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `msg="gpuwatch started"`); n != 1 {
		t.Errorf("%d start summaries, want 1", n)
	}

	// The demo: every source on, Slurm named once.
	_, demo := startGpuwatch(t, "--backend=sim", "--sim.profile=dgx-h100")
	testenv.WaitFor(t, 15*time.Second, "the start summary", func() bool {
		return strings.Contains(demo.Output.String(), `msg="gpuwatch started"`)
	})
	out = demo.Output.String()
	if !strings.Contains(out, "owner_sources=procfs,docker,cri,kubelet,slurm absent=none") ||
		!strings.Contains(out, "attribution sources [procfs cri docker kubelet slurm]") || !strings.Contains(out, "owners=\"demo") {
		t.Errorf("demo start summary:\n%s", out)
	}
}

// TestDemoShowsIdleAllocation: the demo's Slurm job 4225 of alice holds
// GPU 5 and runs nothing there. `gpuwatch ps` gives it a row, and every
// JSON output (ps -o json, /api/v1/snapshot, /api/v1/processes) lists it
// in allocations, idle, and not among the processes.
func TestDemoShowsIdleAllocation(t *testing.T) {
	demo := []string{"--backend=sim", "--sim.profile=dgx-h100", "--attribution.timeout=4s"}
	table, code := runGpuwatch(t, append([]string{"ps"}, demo...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps: %s", table)
	}
	var row string
	for line := range strings.SplitSeq(table, "\n") {
		if strings.HasPrefix(line, "5 ") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) < 4 || f[1] != "-" || f[2] != "idle" || f[3] != "alice" || !strings.Contains(row, "4225 (alice)") {
		t.Errorf("gpuwatch ps has no idle row for GPU 5 held by job 4225 of alice:\n%s", table)
	}

	type allocDoc struct {
		Time      time.Time `json:"time"`
		Processes []struct {
			GPU int `json:"gpu"`
		} `json:"processes"`
		Allocations []map[string]any `json:"allocations"`
	}
	check := func(what, body string, withProcesses bool, since time.Time) {
		t.Helper()
		var doc allocDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, body)
		}
		var found map[string]any
		for _, a := range doc.Allocations {
			if a["gpu"] == 5.0 {
				found = a
			}
			if _, ok := a["command"]; ok {
				t.Errorf("%s: an allocation carries a command: %v", what, a)
			}
		}
		// The demo's clock is the real time, as the reports over its series.
		if doc.Time.Before(since.Add(-time.Second)) || doc.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: time %v, want now (the demo's clock is the real time)", what, doc.Time)
		}
		job, _ := found["slurm"].(map[string]any)
		if found["idle"] != true || job["job_id"] != "4225" || job["user"] != "alice" {
			t.Errorf("%s: GPU 5's allocation is %v, want idle, job 4225 of alice", what, found)
		}
		// The demo's scontrol says the job started 2:13:07 before the
		// simulated clock's start, which is the real time gpuwatch started.
		const ran = 2*time.Hour + 13*time.Minute + 7*time.Second
		started, err := time.Parse(time.RFC3339, fmt.Sprint(found["start_time"]))
		if err != nil || started.Before(since.Add(-ran-time.Second)) || started.After(time.Now().Add(-ran+time.Second)) {
			t.Errorf("%s: GPU 5's allocation started %v, want 2:13:07 before gpuwatch started (between %s and now)", what, found["start_time"], since.Add(-ran).Format(time.RFC3339))
		}
		if len(doc.Allocations) < 7 {
			t.Errorf("%s: %d allocations, want the demo's 7 (6 Slurm GPUs, 1 pod)", what, len(doc.Allocations))
		}
		for _, p := range doc.Processes {
			if p.GPU == 5 {
				t.Errorf("%s: a process row on the idle GPU 5", what)
			}
		}
		if withProcesses && len(doc.Processes) == 0 {
			t.Errorf("%s: no processes", what)
		}
	}
	since := time.Now().Truncate(time.Second)
	out, code := runGpuwatch(t, append([]string{"ps", "-o", "json"}, demo...)...)
	if code != 0 {
		t.Fatalf("gpuwatch ps -o json: %s", out)
	}
	check("ps -o json", out, true, since)
	since = time.Now().Truncate(time.Second)
	base, _ := startGpuwatch(t, demo...)
	check("/api/v1/snapshot", httpGet(t, base+"/api/v1/snapshot"), false, since)
	check("/api/v1/processes", httpGet(t, base+"/api/v1/processes"), true, since)
}
