package jobs

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Querier is the part of the Prometheus HTTP API the records need: an
// instant query and the server's warnings (report.Querier has it).
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error)
}

// FromPrometheus builds a job's records, one per node (Prometheus's
// instance label), from the accounting counters Prometheus scraped over
// lookback before at: where a node's journal is out of reach. match is a
// label matcher list ("slurm_job=\"4211\"", or namespace and pod). The
// counters start at 0 (the new-owner hold), so increase() over a window
// holding the whole job is the job's total; a job longer than lookback
// shows only its last lookback. Start and end are not known this way.
func FromPrometheus(ctx context.Context, api Querier, match string, lookback time.Duration, at time.Time) ([]Record, error) {
	rng := model.Duration(lookback).String()
	by := "instance, gpu, uuid, mig_uuid"
	queries := []struct {
		query string
		set   func(g *GPU, v float64)
	}{
		// A pod's containers each hold the allocation: the longest counts.
		{fmt.Sprintf("max by (%s) (increase(gpu_allocation_seconds_total{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.AllocatedSeconds = v }},
		{fmt.Sprintf("max by (%s) (increase(gpu_allocation_idle_seconds_total{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.IdleSeconds = new(v) }},
		{fmt.Sprintf("max by (%s) (increase(gpu_process_seconds_total{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.ProcessSeconds = v }},
		{fmt.Sprintf("sum by (%s) (increase(gpu_process_sm_seconds_total{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.SMSeconds = new(v) }},
		{fmt.Sprintf("sum by (%s) (increase(gpu_process_energy_joules_total{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.EnergyJoules = new(v) }},
		{fmt.Sprintf("max by (%s) (max_over_time(gpu_process_memory_used_bytes{%s}[%s]))", by, match, rng), func(g *GPU, v float64) { g.MemoryUsedBytesMax = new(uint64(v)) }},
	}
	type gpuKey struct{ instance, uuid, mig string }
	gpus := map[gpuKey]*GPU{}
	var order []gpuKey
	for _, q := range queries {
		val, _, err := api.Query(ctx, q.query, at)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q.query, err)
		}
		vec, ok := val.(model.Vector)
		if !ok {
			return nil, fmt.Errorf("query %s: a %s, not a vector", q.query, val.Type())
		}
		for _, s := range vec {
			k := gpuKey{string(s.Metric["instance"]), string(s.Metric["uuid"]), string(s.Metric["mig_uuid"])}
			g := gpus[k]
			if g == nil {
				var idx int
				_, _ = fmt.Sscan(string(s.Metric["gpu"]), &idx)
				g = &GPU{Index: idx, UUID: k.uuid, MIGUUID: k.mig}
				gpus[k] = g
				order = append(order, k)
			}
			q.set(g, float64(s.Value))
		}
	}
	// Model and size, for the notes.
	if len(gpus) > 0 {
		if err := describe(ctx, api, rng, at, func(instance, uuid string) []*GPU {
			var out []*GPU
			for k, g := range gpus {
				if k.instance == instance && k.uuid == uuid && k.mig == "" {
					out = append(out, g)
				}
			}
			return out
		}); err != nil {
			return nil, err
		}
	}
	byNode := map[string]*Record{}
	var nodes []string
	for _, k := range order {
		g := gpus[k]
		g.AllocatedSeconds = max(g.AllocatedSeconds, g.ProcessSeconds)
		if g.SMSeconds != nil && g.AllocatedSeconds > 0 {
			g.SMUtilizationMean = new(min(1, *g.SMSeconds/g.AllocatedSeconds))
		}
		r := byNode[k.instance]
		if r == nil {
			r = &Record{Node: k.instance}
			byNode[k.instance] = r
			nodes = append(nodes, k.instance)
		}
		r.GPUs = append(r.GPUs, *g)
	}
	out := make([]Record, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, *byNode[n])
	}
	return out, nil
}

// describe fills in the model and memory size of whole GPUs.
func describe(ctx context.Context, api Querier, rng string, at time.Time, find func(instance, uuid string) []*GPU) error {
	for _, q := range []struct {
		query string
		set   func(g *GPU, s *model.Sample)
	}{
		{fmt.Sprintf("max by (instance, uuid, name) (last_over_time(gpu_info[%s]))", rng), func(g *GPU, s *model.Sample) { g.Model = cmp.Or(g.Model, string(s.Metric["name"])) }},
		{fmt.Sprintf("max by (instance, uuid) (last_over_time(gpu_memory_total_bytes[%s]))", rng), func(g *GPU, s *model.Sample) {
			if g.MemoryTotalBytes == nil {
				g.MemoryTotalBytes = new(uint64(s.Value))
			}
		}},
	} {
		val, _, err := api.Query(ctx, q.query, at)
		if err != nil {
			return fmt.Errorf("query %s: %w", q.query, err)
		}
		vec, _ := val.(model.Vector)
		for _, s := range vec {
			for _, g := range find(string(s.Metric["instance"]), string(s.Metric["uuid"])) {
				q.set(g, s)
			}
		}
	}
	return nil
}

// PrometheusMatch is the label matchers of a Slurm job or of a pod
// ("NAMESPACE/NAME"), escaped.
func PrometheusMatch(jobID, pod string) string {
	if pod != "" {
		ns, name, _ := strings.Cut(pod, "/")
		return fmt.Sprintf("namespace=%q,pod=%q", ns, name)
	}
	return fmt.Sprintf("slurm_job=%q", jobID)
}
