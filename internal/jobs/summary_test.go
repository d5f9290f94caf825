package jobs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func twoNodeRecords() []Record {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	gib := uint64(1 << 30)
	return []Record{
		{ID: "77", Kind: KindSlurm, Node: "gpu01", Slurm: &SlurmIdentity{JobID: "77", User: "alice"}, Start: t0, End: t0.Add(time.Hour),
			GPUs: []GPU{
				{Index: 0, UUID: "GPU-a", Model: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: new(80 * gib), AllocatedSeconds: 3600,
					IdleSeconds: new(0.0), SMSeconds: new(3000.0), SMUtilizationMean: new(3000.0 / 3600), MemoryUsedBytesMax: new(60 * gib),
					EnergyJoules: new(2.0e6), XIDErrors: new(uint64(0)), ThrottleSeconds: new(0.0)},
				{Index: 2, UUID: "GPU-b", Model: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: new(80 * gib), AllocatedSeconds: 3600,
					IdleSeconds: new(3500.0), SMSeconds: new(20.0), SMUtilizationMean: new(20.0 / 3600), MemoryUsedBytesMax: new(3 * gib),
					EnergyJoules: new(0.4e6), XIDErrors: new(uint64(2)), ThrottleSeconds: new(0.0)},
			}},
		{ID: "77", Kind: KindSlurm, Node: "gpu02", Slurm: &SlurmIdentity{JobID: "77", User: "alice"}, Start: t0.Add(time.Second), End: t0.Add(time.Hour),
			GPUs: []GPU{{Index: 0, UUID: "GPU-c", AllocatedSeconds: 3600, SMSeconds: new(1800.0), SMUtilizationMean: new(0.5)}}},
	}
}

// The summary merges the nodes' records, sums per GPU into the total, and
// says in plain words what could be better.
func TestSummaryTotalsAndNotes(t *testing.T) {
	s, ok := Summarize("77", twoNodeRecords())
	if !ok {
		t.Fatal("no summary")
	}
	if len(s.GPUs) != 3 || strings.Join(s.Nodes, ",") != "gpu01,gpu02" || s.Total.GPUs != 3 {
		t.Fatalf("summary: %+v", s)
	}
	if s.Total.AllocatedSeconds != 3*3600 || *s.Total.SMSeconds != 4820 {
		t.Errorf("total: %+v", s.Total)
	}
	// gpu02's GPU has no energy, idle or XID figure: a sum of the others
	// would read as the job's.
	if s.Total.EnergyJoules != nil || s.Total.IdleSeconds != nil || s.Total.XIDErrors != nil {
		t.Errorf("total of figures one GPU lacks: energy %v, idle %v, XIDs %v; want absent", s.Total.EnergyJoules, s.Total.IdleSeconds, s.Total.XIDErrors)
	}
	if *s.Total.MemoryUsedBytesMax != 60<<30 {
		t.Errorf("total peak memory %d, want the highest GPU's", *s.Total.MemoryUsedBytesMax)
	}
	want := []string{
		"GPU 2 on gpu01 was idle 97 % of the job: ask for fewer GPUs",
		"GPU 2 on gpu01: peak memory 3 GiB of 80 GiB: a smaller MIG profile would fit",
		"GPU 2 on gpu01 raised 2 XID error(s) during the job: tell the administrators",
	}
	if strings.Join(s.Notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(s.Notes, "\n"), strings.Join(want, "\n"))
	}
}

func TestRenderTableAndJSON(t *testing.T) {
	s, _ := Summarize("77", twoNodeRecords())
	var b bytes.Buffer
	if err := Render(&b, s, "table"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Job 77", "user alice", "on gpu01, gpu02", "gpu01  2", "97 %", "3 GiB of 80 GiB", "total  3 GPUs", "ask for fewer GPUs"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// GPU-c has no energy, memory or idle figure: absent is "-", never 0.
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "gpu02") && strings.Count(line, " - ") < 4 {
			t.Errorf("gpu02's absent figures are not '-': %q", line)
		}
	}
	b.Reset()
	if err := Render(&b, s, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		JobID string `json:"job_id"`
		GPUs  []map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.JobID != "77" || len(doc.GPUs) != 3 {
		t.Fatalf("json: %s", b.String())
	}
	for _, k := range []string{"uuid", "node", "allocated_seconds", "sm_utilization_mean", "memory_used_bytes_max", "energy_joules"} {
		if _, ok := doc.GPUs[0][k]; !ok {
			t.Errorf("json gpus[0] lacks %s: %v", k, doc.GPUs[0])
		}
	}
	if _, ok := doc.GPUs[2]["energy_joules"]; ok {
		t.Errorf("json: an absent energy is written: %v", doc.GPUs[2])
	}
}

// TestNotesOfOneGPU: the notes a single GPU gets, by what it reported:
// idle time, or, without it, a near-zero SM utilization counts as idle;
// low SM utilization; throttling; a MIG instance is named by its profile.
func TestNotesOfOneGPU(t *testing.T) {
	cases := []struct {
		name string
		gpu  GPU
		want []string
	}{
		{"idle, alone", GPU{Index: 1, AllocatedSeconds: 100, IdleSeconds: new(60.0)},
			[]string{"GPU 1 was idle 60 % of the job: check that the job uses it (CUDA_VISIBLE_DEVICES, the framework's device setting)"}},
		{"no idle figure, SM near zero", GPU{Index: 0, AllocatedSeconds: 100, SMUtilizationMean: new(0.02)},
			[]string{"GPU 0 was idle 98 % of the job: check that the job uses it (CUDA_VISIBLE_DEVICES, the framework's device setting)"}},
		{"low SM", GPU{Index: 0, AllocatedSeconds: 100, IdleSeconds: new(10.0), SMUtilizationMean: new(0.2)},
			[]string{"GPU 0: mean SM utilization 20 %: the job may wait on data loading or the CPU"}},
		{"MIG, throttled", GPU{Index: 3, MIGUUID: "MIG-x", MIGProfile: "3g.40gb", AllocatedSeconds: 100, SMUtilizationMean: new(0.9), ThrottleSeconds: new(25.0)},
			[]string{"GPU 3 (MIG 3g.40gb) ran slowed down (power or thermal limits) 25 % of the job"}},
		{"MIG without profile, small memory of a small GPU", GPU{Index: 3, MIGUUID: "MIG-x", AllocatedSeconds: 100, SMUtilizationMean: new(0.2),
			MemoryUsedBytesMax: new(uint64(1 << 30)), MemoryTotalBytes: new(uint64(10 << 30))},
			[]string{"GPU 3 (MIG MIG-x): mean SM utilization 20 %: the job may wait on data loading or the CPU"}},
		{"busy", GPU{Index: 0, AllocatedSeconds: 100, IdleSeconds: new(0.0), SMUtilizationMean: new(0.9), XIDErrors: new(uint64(0)), ThrottleSeconds: new(1.0)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := notes([]SummaryGPU{{Node: "n1", GPU: c.gpu}}, false)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestRenderMarkdownOfARunningPod: a pod's summary in Markdown has the
// pod's name as its heading, its UID, its state, the nodes without a
// record and one table row per GPU and the total.
func TestRenderMarkdownOfARunningPod(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s, _ := Summarize("uid-1", []Record{{ID: "uid-1", Kind: KindPod, Node: "gpu01", Pod: &PodIdentity{Namespace: "ml", Name: "train-0", UID: "uid-1"},
		Start: t0, End: t0.Add(90 * time.Minute), Running: true,
		GPUs: []GPU{{Index: 0, Model: "NVIDIA A100-SXM4-80GB", AllocatedSeconds: 5400, SMUtilizationMean: new(0.9)}}}})
	s.MissingNodes = []string{"gpu02 (no answer)"}
	var b bytes.Buffer
	if err := Render(&b, s, "markdown"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"## Pod ml/train-0\n\nuid uid-1\n", "(1h30m, running) on gpu01\n", "no record from gpu02 (no answer)\n",
		"| NODE | GPU | MODEL |", "| gpu01 | 0 | A100-SXM4-80GB | ", "| total | 1 GPUs |", "No efficiency problems found."} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if rows := strings.Count(out, "\n|"); rows != 4 { // the header, its rule, the GPU, the total
		t.Errorf("%d table lines, want 4:\n%s", rows, out)
	}
}
