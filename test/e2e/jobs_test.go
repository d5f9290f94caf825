//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/internal/jobs"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The demo gives workloads, in PID order, a Slurm job, a compose service
// and a pod (internal/demo): PID 1000 is the Slurm job, 3000 the pod.
// A workload whose processes all ended leaves squeue and the kubelet.
const jobsSimConfig = `profile: h100
processes:
  - {gpu: 0, pid: 1000, used_memory_bytes: 4294967296, sm_utilization: 0.5, end: %s}
  - {gpu: 0, pid: 2000, used_memory_bytes: 1073741824, sm_utilization: 0.1}
  - {gpu: 0, pid: 3000, used_memory_bytes: 2147483648, sm_utilization: 0.3%s}
`

func getJSON(t *testing.T, url string, v any) bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(resp.Body).Decode(v) == nil
}

func recordOf(recs []jobs.Record, kind string) (jobs.Record, bool) {
	for _, r := range recs {
		if r.Kind == kind {
			return r, true
		}
	}
	return jobs.Record{}, false
}

// TestJobRecordsSurviveSIGKILL: gpuwatch is killed with SIGKILL while a
// pod runs, after a Slurm job ended. The job's record is intact; the
// pod's figures in the checkpoint lag what was served before the kill by
// at most one checkpoint interval (and a tick); restarted, gpuwatch goes
// on from them, and the pod's record at its end counts both runs.
func TestJobRecordsSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	acctDir := filepath.Join(dir, "acct")
	cfg1 := filepath.Join(dir, "sim1.yaml")
	writeFile(t, cfg1, fmt.Sprintf(jobsSimConfig, "4s", ""))
	const checkpoint = 2 * time.Second
	args := []string{"--backend=sim", "--accounting.dir=" + acctDir, "--accounting.interval=1s", "--slurm.poll-interval=1s",
		"--accounting.checkpoint-interval=" + checkpoint.String()}
	base, gw := startGpuwatch(t, append(args, "--sim.config="+cfg1)...)

	var list jobs.ListDoc
	var job, pod jobs.Record
	testenv.WaitFor(t, 60*time.Second, "the Slurm job's record and 10 s of the running pod", func() bool {
		list = jobs.ListDoc{} // decoding into the last answer would keep its "running"
		if !getJSON(t, base+"/api/v1/jobs", &list) {
			return false
		}
		var ok1, ok2 bool
		job, ok1 = recordOf(list.Records, jobs.KindSlurm)
		pod, ok2 = recordOf(list.Records, jobs.KindPod)
		return ok1 && !job.Running && ok2 && pod.Running && pod.GPUs[0].ProcessSeconds >= 10
	})
	served := pod.GPUs[0].ProcessSeconds
	if err := gw.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-gw.Done

	recs, skipped, err := jobs.ReadJournal(acctDir)
	if err != nil || skipped != 0 || len(recs) != 1 {
		t.Fatalf("journal after SIGKILL: %d records, %d skipped, %v", len(recs), skipped, err)
	}
	job.Node = recs[0].Node
	if !reflect.DeepEqual(recs[0], job) {
		t.Errorf("journaled record %+v\ndiffers from the one served %+v", recs[0], job)
	}
	if g := recs[0].GPUs[0]; g.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax != 4<<30 || g.SMSeconds == nil || *g.SMSeconds < 1 || *g.SMSeconds > 2.5 {
		t.Errorf("the Slurm job's record: %+v (want 4 GiB peak, 2 SM-seconds ± a tick)", g)
	}
	running, err := jobs.ReadRunning(acctDir)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, ok := recordOf(running, jobs.KindPod)
	if !ok {
		t.Fatalf("the checkpoint has no pod: %+v", running)
	}
	kept := ckpt.GPUs[0].ProcessSeconds
	// A checkpoint every 2 s of ticks every 1 s: a wide margin for a
	// loaded machine, still far from losing the 10 s before the kill.
	if kept > served || kept < served-checkpoint.Seconds()-3 {
		t.Errorf("checkpoint holds %.0f s of the pod, %.0f s were served before the kill", kept, served)
	}

	// Restarted (the simulator's clock starts again: the Slurm job's
	// process is gone at once, the pod's ends 3 s in).
	cfg2 := filepath.Join(dir, "sim2.yaml")
	writeFile(t, cfg2, fmt.Sprintf(jobsSimConfig, "1ms", ", end: 3s"))
	base, _ = startGpuwatch(t, append(args, "--sim.config="+cfg2)...)
	testenv.WaitFor(t, 60*time.Second, "the pod's record", func() bool {
		recs, _, err = jobs.ReadJournal(acctDir)
		return err == nil && len(recs) == 2
	})
	if !reflect.DeepEqual(recs[0], job) {
		t.Errorf("the Slurm job's record changed after the restart: %+v", recs[0])
	}
	final := recs[1]
	if final.Kind != jobs.KindPod || final.ID != ckpt.ID || !final.Start.Equal(ckpt.Start) {
		t.Fatalf("pod record %+v, want the checkpointed pod %s from %s", final, ckpt.ID, ckpt.Start)
	}
	if got := final.GPUs[0].ProcessSeconds; got < kept+3-2 || got > kept+3+2 {
		t.Errorf("pod record: %.0f s on the GPU, want the checkpoint's %.0f s + 3 s after the restart (± a tick)", got, kept)
	}
	var doc jobs.JobDoc
	if !getJSON(t, base+"/api/v1/jobs/"+job.ID, &doc) || len(doc.Records) != 1 {
		t.Errorf("/api/v1/jobs/%s after the restart: %+v", job.ID, doc)
	}
}

// TestJobRecordCountsTheXIDsOfItsGPU: an XID raised on the GPU while a
// Slurm job holds it is in the job's record, counted once: the
// accounting's ticks read the scrapes' XID watcher (one per GPU), and the
// record agrees with gpu_xid_errors_total.
func TestJobRecordCountsTheXIDsOfItsGPU(t *testing.T) {
	dir := t.TempDir()
	acctDir := filepath.Join(dir, "acct")
	cfg := filepath.Join(dir, "sim.yaml")
	writeFile(t, cfg, fmt.Sprintf(jobsSimConfig, "6s", "")+"faults:\n  - {gpu: 0, xid: 79, at: 3s}\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--accounting.dir="+acctDir,
		"--accounting.interval=1s", "--slurm.poll-interval=1s")
	var job jobs.Record
	testenv.WaitFor(t, 60*time.Second, "the Slurm job's record", func() bool {
		recs, _, err := jobs.ReadJournal(acctDir)
		if err != nil || len(recs) == 0 {
			return false
		}
		var ok bool
		job, ok = recordOf(recs, jobs.KindSlurm)
		return ok
	})
	if len(job.GPUs) != 1 || job.GPUs[0].XIDErrors == nil || *job.GPUs[0].XIDErrors != 1 {
		t.Errorf("the Slurm job's record: %+v, want one XID on its GPU", job.GPUs)
	}
	if v, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "gpu_xid_errors_total", map[string]string{"gpu": "0", "xid": "79"}); !ok || v != 1 {
		t.Errorf("gpu_xid_errors_total{gpu=0,xid=79} = %v (present %v), want 1", v, ok)
	}
}

// TestJobCommandAsksEveryNode: two gpuwatch "nodes" behind basic auth ran
// the same Slurm job; `gpuwatch job` asks both through --job.node-url with
// the credentials of --job.http-config and shows both nodes' GPUs, as a
// table and as JSON. Without credentials the API answers 401.
func TestJobCommandAsksEveryNode(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	writeFile(t, webConfig, fmt.Sprintf("basic_auth_users:\n  admin: %s\n", hash))
	clientConfig := filepath.Join(dir, "client.yml")
	writeFile(t, clientConfig, "basic_auth:\n  username: admin\n  password: s3cret\n")
	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, fmt.Sprintf(jobsSimConfig, "4s", ""))

	// Two nodes on one port, as a cluster's are: 127.0.0.1 and 127.0.0.2
	// (all of 127/8 is loopback), so the node names are host names.
	nodes := []string{"127.0.0.1", "127.0.0.2"}
	port := testenv.FreePort(t)
	var procs []*testenv.Process
	for i, seed := range []string{"node-a", "node-b"} {
		addr := fmt.Sprintf("%s:%d", nodes[i], port)
		procs = append(procs, testenv.StartProcess(t, nil, gpuwatchBin, "--web.listen-address="+addr, "--web.config.file="+webConfig,
			"--backend=sim", "--sim.config="+simConfig, "--sim.seed="+seed,
			"--accounting.dir="+filepath.Join(dir, fmt.Sprint("acct", i)), "--accounting.interval=1s", "--slurm.poll-interval=1s"))
	}
	status := func(url string, auth bool) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.SetBasicAuth("admin", "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	jobID := ""
	testenv.WaitFor(t, 60*time.Second, "both nodes to journal the Slurm job", func() bool {
		for i, p := range procs {
			if p.Exited() {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
			recs, _, _ := jobs.ReadJournal(filepath.Join(dir, fmt.Sprint("acct", i)))
			r, ok := recordOf(recs, jobs.KindSlurm)
			if !ok {
				return false
			}
			jobID = r.ID
		}
		return true
	})
	for _, path := range []string{"/api/v1/jobs", "/api/v1/jobs/" + jobID} {
		if got := status(fmt.Sprintf("http://%s:%d%s", nodes[0], port, path), false); got != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, got)
		}
		if got := status(fmt.Sprintf("http://%s:%d%s", nodes[0], port, path), true); got != http.StatusOK {
			t.Errorf("GET %s with credentials: %d, want 200", path, got)
		}
	}

	run := func(extra ...string) (string, error) {
		args := append([]string{"job", jobID, fmt.Sprintf("--job.node-url=http://{node}:%d", port), "--job.nodes=" + strings.Join(nodes, ",")}, extra...)
		out, err := exec.Command(gpuwatchBin, args...).CombinedOutput()
		return string(out), err
	}
	out, err := run("--job.http-config="+clientConfig, "-o", "json")
	if err != nil {
		t.Fatalf("gpuwatch job: %v\n%s", err, out)
	}
	var s jobs.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if s.JobID != jobID || len(s.GPUs) != 2 || s.GPUs[0].Node == s.GPUs[1].Node || !slices.Contains(nodes, s.GPUs[0].Node) ||
		!slices.Contains(nodes, s.GPUs[1].Node) || s.GPUs[0].UUID == s.GPUs[1].UUID {
		t.Fatalf("summary: %s", out)
	}
	for _, g := range s.GPUs {
		if g.SMSeconds == nil || *g.SMSeconds < 1 || *g.SMSeconds > 2.5 || g.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax != 4<<30 ||
			g.EnergyJoules == nil || *g.EnergyJoules <= 0 || g.SMUtilizationMean == nil {
			t.Errorf("GPU on %s: %+v (want 2 SM-seconds ± a tick, 4 GiB peak, some energy)", g.Node, g.GPU)
		}
	}
	if *s.Total.SMSeconds != *s.GPUs[0].SMSeconds+*s.GPUs[1].SMSeconds {
		t.Errorf("total SM-seconds %v is not the GPUs' sum", *s.Total.SMSeconds)
	}
	out, err = run("--job.http-config=" + clientConfig)
	if err != nil {
		t.Fatalf("gpuwatch job: %v\n%s", err, out)
	}
	for _, want := range []string{"Job " + jobID, nodes[0], nodes[1], "4 GiB of 80 GiB", "2 GPUs", "a smaller MIG profile would fit"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, err = run()
	if err == nil || !strings.Contains(out, "401") {
		t.Errorf("gpuwatch job without credentials: err %v, output:\n%s", err, out)
	}
}

// TestJobCommandFromPrometheus: where the nodes are out of reach,
// `gpuwatch job --prometheus.url` reads the job from the accounting
// counters a real Prometheus scraped, and finds the journal's figures.
func TestJobCommandFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	simConfig := filepath.Join(dir, "sim.yaml")
	writeFile(t, simConfig, fmt.Sprintf(jobsSimConfig, "6s", ""))
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	promConfig := filepath.Join(dir, "prometheus.yml")
	writeFile(t, promConfig, fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs:\n      - targets: [%q]\n", addr))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartProcess(t, nil, promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promURL[len("http://"):])
	// Prometheus scrapes before gpuwatch starts, so it stores the job's
	// counters' first 0 within their hold.
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape its (still absent) target", func() bool {
		return len(promVectorAt(t, promURL, `up{job="gpuwatch"}`, "", "job")) > 0
	})
	acctDir := filepath.Join(dir, "acct")
	gw := testenv.StartProcess(t, nil, gpuwatchBin, "--web.listen-address="+addr, "--backend=sim", "--sim.config="+simConfig, "--accounting.dir="+acctDir,
		"--accounting.interval=1s", "--slurm.poll-interval=1s", "--accounting.new-owner-hold=5s", "--accounting.retention=10m")
	testenv.WaitHealthy(t, gw, "http://"+addr)

	var job jobs.Record
	testenv.WaitFor(t, 60*time.Second, "the Slurm job's record", func() bool {
		recs, _, _ := jobs.ReadJournal(acctDir)
		var ok bool
		job, ok = recordOf(recs, jobs.KindSlurm)
		return ok
	})
	// The counters hold still once the job ended; wait for Prometheus to
	// have scraped their last values.
	var s jobs.Summary
	testenv.WaitFor(t, 60*time.Second, "gpuwatch job --prometheus.url to find the journal's SM-seconds", func() bool {
		out, err := exec.Command(gpuwatchBin, "job", job.ID, "--prometheus.url="+promURL, "--job.lookback=10m", "-o", "json").CombinedOutput()
		if err != nil || json.Unmarshal(out, &s) != nil || len(s.GPUs) != 1 || s.GPUs[0].SMSeconds == nil {
			return false
		}
		want := *job.GPUs[0].SMSeconds
		return *s.GPUs[0].SMSeconds > 0.9*want && *s.GPUs[0].SMSeconds < 1.1*want
	})
	g, want := s.GPUs[0], job.GPUs[0]
	if s.Source != "prometheus" || g.UUID != want.UUID || g.Node != addr || g.Model != want.Model {
		t.Errorf("from Prometheus: %+v, want GPU %s (%s) on %s", s, want.UUID, want.Model, addr)
	}
	if g.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax != *want.MemoryUsedBytesMax {
		t.Errorf("peak memory %v, want the journal's %d", g.MemoryUsedBytesMax, *want.MemoryUsedBytesMax)
	}
	if g.EnergyJoules == nil || *g.EnergyJoules < 0.8**want.EnergyJoules || *g.EnergyJoules > 1.2**want.EnergyJoules {
		t.Errorf("energy %v J, want the journal's %.0f J ± 20 %%", g.EnergyJoules, *want.EnergyJoules)
	}
}

// TestCorruptCheckpointKeepsServing: a running.json that is not JSON
// neither stops serve (it was: "unexpected end of JSON input") nor hides
// the journal's records from `gpuwatch job` on the node; serve moves it
// aside and says so in a metric.
func TestCorruptCheckpointKeepsServing(t *testing.T) {
	dir := t.TempDir()
	acctDir := filepath.Join(dir, "acct")
	if err := os.MkdirAll(acctDir, 0o750); err != nil {
		t.Fatal(err)
	}
	rec := `{"id":"777","kind":"slurm","node":"n1","slurm":{"job_id":"777","user":"alice"},"start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:10:00Z","gpus":[{"index":0,"uuid":"GPU-0","allocated_seconds":600,"process_seconds":600}]}`
	writeFile(t, filepath.Join(acctDir, jobs.JournalName), rec+"\n")
	writeFile(t, filepath.Join(acctDir, jobs.CheckpointName), `{"version":1,"node":"n1","jobs":[{"key":"slurm/778","kind":"slurm","slurm":{"job_id":"778"`)
	out, err := exec.Command(gpuwatchBin, "job", "777", "--accounting.dir="+acctDir, "-o", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"777"`) {
		t.Errorf("gpuwatch job beside a corrupt checkpoint: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "sim.yaml")
	writeFile(t, cfg, "profile: h100\nprocesses: []\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--accounting.dir="+acctDir, "--accounting.interval=1s")
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\ngpuwatch_journal_checkpoints_corrupt_total 1\n") {
		t.Errorf("/metrics does not count the corrupt checkpoint")
	}
	if aside, _ := filepath.Glob(filepath.Join(acctDir, jobs.CheckpointName+jobs.CorruptCheckpointSuffix+"*")); len(aside) != 1 {
		t.Errorf("the corrupt checkpoint was not kept aside: %v", aside)
	}
	var doc jobs.JobDoc
	// It has no GPU process after the restart: it ended, and its record
	// says what is missing; its time is the checkpoint's.
	testenv.WaitFor(t, 30*time.Second, "the record of job 778", func() bool {
		doc = jobs.JobDoc{}
		return getJSON(t, base+"/api/v1/jobs/778", &doc) && len(doc.Records) == 1 && !doc.Records[0].Running
	})
	if r := doc.Records[0]; r.Partial == "" || r.Start.Year() < 2026 {
		t.Errorf("the job the corrupt checkpoint held: %+v, want it marked partial, from the checkpoint's time", r)
	}
}
