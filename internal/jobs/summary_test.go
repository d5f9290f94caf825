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
