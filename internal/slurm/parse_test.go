package slurm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func readFixture(t testing.TB, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func jobByID(t *testing.T, jobs []Job, id string) Job {
	t.Helper()
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %s not in %d parsed jobs", id, len(jobs))
	return Job{}
}

// The 22.05 fixtures were captured from test/slurm/start.sh's cluster with:
// 1 completed (no GPU), 2 running (--gres=gpu:1 → h100 IDX 0),
// 3 pending on Resources (gpu:h100:2), 4 pending on Dependency (gpu:1).
func TestParseSqueueJSON2205(t *testing.T) {
	jobs, err := ParseSqueueJSON(readFixture(t, "22.05", "squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("got %d jobs, want 4", len(jobs))
	}
	run := jobByID(t, jobs, "2")
	want := Job{
		ID: "2", Name: "train", User: "root", Account: "physics", Partition: "gpu",
		State: "RUNNING", Reason: "None", Nodes: []string{"vm"}, NodeCount: 1, CPUs: 1,
		GPUs:     []GPUCount{{"h100", 1}},
		GPUAlloc: []NodeGPUs{{Node: "vm", Type: "h100", Count: 1, Indexes: []int{0}}},
	}
	if !reflect.DeepEqual(run, want) {
		t.Errorf("running job:\n got %+v\nwant %+v", run, want)
	}
	res := jobByID(t, jobs, "3")
	if res.State != "PENDING" || res.Reason != "Resources" || !reflect.DeepEqual(res.GPUs, []GPUCount{{"h100", 2}}) {
		t.Errorf("pending job 3: %+v", res)
	}
	dep := jobByID(t, jobs, "4")
	if dep.Reason != "Dependency" || dep.Partition != "debug" || !reflect.DeepEqual(dep.GPUs, []GPUCount{{"", 1}}) {
		t.Errorf("dependency job 4: %+v", dep)
	}
	done := jobByID(t, jobs, "1")
	if done.State != "COMPLETED" || len(done.GPUs) != 0 || done.HoldsResources() {
		t.Errorf("completed job 1: %+v", done)
	}
}

func TestParseSqueueJSON2311(t *testing.T) {
	jobs, err := ParseSqueueJSON(readFixture(t, "23.11", "squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 7 {
		t.Fatalf("got %d jobs, want 7", len(jobs))
	}
	j := jobByID(t, jobs, "101")
	wantAlloc := []NodeGPUs{
		{Node: "gpu-01", Type: "a100", Count: 4, Indexes: []int{0, 1, 2, 3}},
		{Node: "gpu-02", Type: "a100", Count: 2, Indexes: []int{0, 1}},
	}
	if j.CPUs != 64 || j.NodeCount != 2 || j.State != "RUNNING" || !reflect.DeepEqual(j.GPUAlloc, wantAlloc) ||
		!reflect.DeepEqual(j.GPUs, []GPUCount{{"a100", 6}}) || !reflect.DeepEqual(j.Nodes, []string{"gpu-01", "gpu-02"}) {
		t.Errorf("job 101: %+v", j)
	}
	// job_state ["PENDING","REQUEUED"]: base state first, flags dropped.
	if j := jobByID(t, jobs, "107"); j.State != "PENDING" || j.Reason != "Priority" || !reflect.DeepEqual(j.GPUs, []GPUCount{{"h100", 1}}) {
		t.Errorf("job 107: %+v", j)
	}
	if j := jobByID(t, jobs, "104"); !reflect.DeepEqual(j.GPUs, []GPUCount{{"", 1}}) {
		t.Errorf("job 104 (tres_per_job gres/gpu:1): GPUs %v", j.GPUs)
	}
	if j := jobByID(t, jobs, "106"); j.Account != "" || len(j.GPUs) != 0 || !j.HoldsResources() {
		t.Errorf("job 106: %+v", j)
	}
}

func TestParseSqueueFormatted2205(t *testing.T) {
	jobs, err := ParseSqueueFormatted(readFixture(t, "22.05", "squeue_formatted.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	// Text gives the request per node (gres:gpu:1), not the allocated type.
	if j := jobByID(t, jobs, "2"); j.State != "RUNNING" || j.Account != "physics" || !reflect.DeepEqual(j.GPUs, []GPUCount{{"", 1}}) ||
		!reflect.DeepEqual(j.Nodes, []string{"vm"}) {
		t.Errorf("job 2: %+v", j)
	}
	if j := jobByID(t, jobs, "3"); j.Reason != "Resources" || !reflect.DeepEqual(j.GPUs, []GPUCount{{"h100", 2}}) {
		t.Errorf("job 3: %+v", j)
	}
}

func TestParseSinfoJSON2205(t *testing.T) {
	recs, err := ParseSinfoJSON(readFixture(t, "22.05", "sinfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeRecord{
		{Node: "vm", Nodes: []string{"vm"}, NodeCount: 1, Partition: "gpu", State: "mixed",
			CPUs: CPUStates{Allocated: 1, Idle: 1, Total: 2}, GPUsTotal: []GPUCount{{"h100", 2}}, GPUsUsed: []GPUCount{{"h100", 1}}},
		{Node: "vm", Nodes: []string{"vm"}, NodeCount: 1, Partition: "debug", State: "mixed",
			CPUs: CPUStates{Allocated: 1, Idle: 1, Total: 2}, GPUsTotal: []GPUCount{{"h100", 2}}, GPUsUsed: []GPUCount{{"h100", 1}}},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("got  %+v\nwant %+v", recs, want)
	}
	text, err := ParseSinfoFormatted(readFixture(t, "22.05", "sinfo_formatted.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(text, want) {
		t.Errorf("formatted output disagrees with JSON:\n got %+v\nwant %+v", text, want)
	}
}

func TestParseSinfoJSON2311(t *testing.T) {
	recs, err := ParseSinfoJSON(readFixture(t, "23.11", "sinfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("got %d records", len(recs))
	}
	drained := recs[3]
	if drained.Node != "gpu-04" || drained.State != "drained" || drained.CPUs.Other != 64 ||
		!reflect.DeepEqual(drained.GPUsTotal, []GPUCount{{"h100", 8}}) || !reflect.DeepEqual(drained.GPUsUsed, []GPUCount{{"h100", 0}}) {
		t.Errorf("drained record: %+v", drained)
	}
	group := recs[5]
	if group.Node != "" || group.NodeCount != 2 || !reflect.DeepEqual(group.Nodes, []string{"cpu-01", "cpu-02"}) || group.CPUs.Idle != 128 {
		t.Errorf("grouped record: %+v", group)
	}
}

func TestParseSdiag(t *testing.T) {
	d, err := ParseSdiag(readFixture(t, "22.05", "sdiag.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The captured 22.05 controller had run no backfill cycle yet: its
	// "Last cycle: 0" is not a duration and is dropped.
	if !d.ServerThreads.Valid || d.ServerThreads.Value < 1 || !d.LastCycle.Valid || !d.QueueLength.Valid ||
		d.BackfillLastCycle.Valid || d.BackfillMeanCycle.Valid || !d.BackfillQueueLength.Valid {
		t.Errorf("22.05: %+v", d)
	}
	d, err = ParseSdiag(readFixture(t, "23.11", "sdiag.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := Diag{
		ServerThreads: some(7), AgentQueueSize: some(3), DBDAgentQueueSize: some(12),
		LastCycle: some(0.01523), MeanCycle: some(0.00812), MaxCycle: some(0.25), QueueLength: some(3),
		BackfillLastCycle: some(0.48), BackfillMeanCycle: some(0.35025), BackfillQueueLength: some(3), BackfilledJobs: some(311),
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("23.11:\n got %+v\nwant %+v", d, want)
	}
	if _, err := ParseSdiag([]byte("hello\nworld\n")); err == nil {
		t.Error("garbage: no error")
	}
	if _, err := ParseSdiag([]byte("Server thread count: lots\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad number: %v", err)
	}
}

func TestParseScontrolJobs(t *testing.T) {
	jobs, err := ParseScontrolJobs(readFixture(t, "22.05", "scontrol_show_job.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	j := jobByID(t, jobs, "2")
	want := Job{ID: "2", Name: "train", User: "root", Account: "physics", Partition: "gpu", State: "RUNNING", Reason: "None",
		Nodes: []string{"vm"}, NodeCount: 1, CPUs: 1, GPUs: []GPUCount{{"h100", 1}},
		GPUAlloc: []NodeGPUs{{Node: "vm", Type: "h100", Count: 1, Indexes: []int{0}}},
		Start:    time.Date(2026, 11, 21, 13, 1, 57, 0, time.Local)}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("job 2:\n got %+v\nwant %+v", j, want)
	}
	if j := jobByID(t, jobs, "3"); !j.Start.IsZero() {
		t.Errorf("pending job 3 (StartTime=Unknown) started at %v", j.Start)
	}
	// A pending job's StartTime is the scheduler's forecast: not a start.
	forecast, err := ParseScontrolJobs([]byte("JobId=7 JobName=x UserId=bob(1001) JobState=PENDING Reason=Resources StartTime=2026-11-22T10:00:00 NumNodes=1\n"))
	if err != nil || len(forecast) != 1 || !forecast[0].Start.IsZero() {
		t.Errorf("pending job with a forecast StartTime: %+v, %v; want no start", forecast, err)
	}
	// A multi-node job: one Nodes=/GRES= group per node layout, a job name
	// with spaces, and a hostlist in Nodes=.
	line := "JobId=101 JobName=train big model UserId=alice(1000) GroupId=alice(1000) Account=physics JobState=RUNNING Reason=None " +
		"Partition=gpu NodeList=gpu-[01-03] NumNodes=3 NumCPUs=96 TRES=cpu=96,node=3,gres/gpu=10 " +
		"JOB_GRES=gpu:a100:10 Nodes=gpu-[01-02] CPU_IDs=0-31 Mem=0 GRES=gpu:a100:4(IDX:0-3) " +
		"Nodes=gpu-03 CPU_IDs=0-31 Mem=0 GRES=gpu:a100:2(IDX:2-3) MinCPUsNode=1 TresPerNode=gres:gpu:a100:4\n"
	jobs, err = ParseScontrolJobs([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	j = jobs[0]
	wantAlloc := []NodeGPUs{
		{Node: "gpu-01", Type: "a100", Count: 4, Indexes: []int{0, 1, 2, 3}},
		{Node: "gpu-02", Type: "a100", Count: 4, Indexes: []int{0, 1, 2, 3}},
		{Node: "gpu-03", Type: "a100", Count: 2, Indexes: []int{2, 3}},
	}
	if j.Name != "train big model" || j.User != "alice" || !reflect.DeepEqual(j.GPUAlloc, wantAlloc) ||
		!reflect.DeepEqual(j.GPUs, []GPUCount{{"a100", 10}}) {
		t.Errorf("multi-node job: %+v", j)
	}
	if _, err := ParseScontrolJobs([]byte("garbage here\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("garbage: %v", err)
	}
}

func TestParseErrorsNameTheProblem(t *testing.T) {
	cases := []struct {
		name  string
		parse func([]byte) error
		in    string
		want  string
	}{
		{"squeue truncated", func(b []byte) error { _, err := ParseSqueueJSON(b); return err }, "{\"jobs\": [\n{\"job_id\": 1,", "line 2"},
		{"squeue wrong type", func(b []byte) error { _, err := ParseSqueueJSON(b); return err }, "{\"jobs\": [{\"job_id\": 1, \"name\": 5}]}", "name"},
		{"squeue no jobs", func(b []byte) error { _, err := ParseSqueueJSON(b); return err }, "{}", "no \"jobs\""},
		{"squeue errors", func(b []byte) error { _, err := ParseSqueueJSON(b); return err },
			`{"errors":[{"error":"Unable to contact slurm controller","error_number":1007}]}`, "Unable to contact"},
		{"squeue bad gres", func(b []byte) error { _, err := ParseSqueueJSON(b); return err },
			`{"jobs":[{"job_id":7,"job_state":"RUNNING","gres_detail":["gpu:a100:x"]}]}`, "job 7"},
		{"sinfo garbage", func(b []byte) error { _, err := ParseSinfoJSON(b); return err }, "<html>", "invalid JSON"},
		{"sinfo text fields", func(b []byte) error { _, err := ParseSinfoFormatted(b); return err }, "vm|gpu|idle\n", "line 1"},
		{"sinfo text cpus", func(b []byte) error { _, err := ParseSinfoFormatted(b); return err }, "vm|gpu|idle|1/2|gpu:1|gpu:0\n", "A/I/O/T"},
		{"squeue text id", func(b []byte) error { _, err := ParseSqueueFormatted(b); return err }, "x|R|p|u|a|r|N/A|1|1|vm\n", "job id"},
	}
	for _, c := range cases {
		err := c.parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
}
