package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// memRunner answers squeue, sinfo and sdiag from memory.
type memRunner struct{ squeue, sinfo, sdiag []byte }

func (m *memRunner) Run(_ context.Context, path string, args ...string) ([]byte, error) {
	switch path {
	case "squeue":
		return m.squeue, nil
	case "sinfo":
		return m.sinfo, nil
	case "sdiag":
		return m.sdiag, nil
	}
	return nil, fmt.Errorf("memRunner: %s", path)
}

// syntheticSqueue builds `squeue --json` with n jobs, each a copy of the
// real running job of the 22.05 fixture (all ~100 fields, as squeue prints
// them) with its id, user, account, partition, state and GPUs varied.
func syntheticSqueue(tb testing.TB, n int) []byte {
	var doc struct {
		Meta json.RawMessage  `json:"meta"`
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(readFixture(tb, "22.05", "squeue.json"), &doc); err != nil {
		tb.Fatal(err)
	}
	var tmpl map[string]any
	for _, j := range doc.Jobs {
		if j["job_state"] == "RUNNING" {
			tmpl = j
		}
	}
	states := []string{"RUNNING", "RUNNING", "PENDING", "PENDING", "COMPLETED"}
	reasons := []string{"None", "None", "Resources", "Priority", "None"}
	jobs := make([]map[string]any, n)
	for i := range jobs {
		j := make(map[string]any, len(tmpl))
		maps.Copy(j, tmpl)
		s := i % len(states)
		j["job_id"] = 1000 + i
		j["user_name"] = fmt.Sprintf("user%03d", i%300)
		j["account"] = fmt.Sprintf("acct%02d", i%40)
		j["partition"] = []string{"gpu", "debug", "long", "a100"}[i%4]
		j["job_state"] = states[s]
		j["state_reason"] = reasons[s]
		node := fmt.Sprintf("gpu-%04d", i%1000)
		if states[s] == "RUNNING" {
			j["nodes"] = node
			j["gres_detail"] = []string{fmt.Sprintf("gpu:h100:%d(IDX:0-%d)", 1+i%8, i%8)}
		} else {
			j["nodes"] = ""
			j["gres_detail"] = []string{}
			j["tres_per_node"] = fmt.Sprintf("gres:gpu:a100:%d", 1+i%4)
		}
		jobs[i] = j
	}
	out, err := json.Marshal(map[string]any{"meta": doc.Meta, "errors": []any{}, "jobs": jobs})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// syntheticSinfo builds `sinfo --json` (22.05 shape) with n nodes.
func syntheticSinfo(tb testing.TB, n int) []byte {
	var doc struct {
		Meta  json.RawMessage  `json:"meta"`
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(readFixture(tb, "22.05", "sinfo.json"), &doc); err != nil {
		tb.Fatal(err)
	}
	nodes := make([]map[string]any, n)
	for i := range nodes {
		m := make(map[string]any, len(doc.Nodes[0]))
		maps.Copy(m, doc.Nodes[0])
		m["name"] = fmt.Sprintf("gpu-%04d", i)
		m["cpus"], m["alloc_cpus"], m["idle_cpus"] = 128, i%128, 128-i%128
		m["gres"] = "gpu:h100:8(S:0-1)"
		m["gres_used"] = fmt.Sprintf("gpu:h100:%d(IDX:0-%d)", 1+i%8, i%8)
		m["partitions"] = []string{"gpu", []string{"debug", "long", "a100"}[i%3]}
		nodes[i] = m
	}
	out, err := json.Marshal(map[string]any{"meta": doc.Meta, "errors": []any{}, "nodes": nodes})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkParse10kJobs runs 10 000 synthetic jobs (and 1 000 nodes)
// through the same parsers and collector as a scrape: parse, aggregate,
// build the const metrics, gather. Target: < 1 s and < 100 MiB per scrape.
func BenchmarkParse10kJobs(b *testing.B) {
	squeue := syntheticSqueue(b, 10000)
	r := &memRunner{squeue: squeue, sinfo: syntheticSinfo(b, 1000), sdiag: readFixture(b, "23.11", "sdiag.txt")}
	// Peak heap is measured above what is live before the first scrape
	// (the inputs themselves).
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A new collector each time: nothing cached, every command parsed.
		c, err := NewCollector(Options{Runner: r})
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		if len(mfs) < 10 {
			b.Fatalf("only %d metric families", len(mfs))
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak {
			peak = ms.HeapInuse
		}
	}
	b.ReportMetric(float64(len(squeue))/(1<<20), "squeue-json-MiB")
	b.ReportMetric(float64(peak-min(peak, base.HeapInuse))/(1<<20), "peak-heap-above-inputs-MiB")
}

// BenchmarkParseSqueueJSON10k is the squeue parser alone.
func BenchmarkParseSqueueJSON10k(b *testing.B) {
	data := syntheticSqueue(b, 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		jobs, err := ParseSqueueJSON(data)
		if err != nil || len(jobs) != 10000 {
			b.Fatal(len(jobs), err)
		}
	}
}
