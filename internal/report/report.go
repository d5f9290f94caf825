// Package report answers "who used how much GPU, and what sat idle" from the
// series gpuwatch exports, by querying Prometheus (or VictoriaMetrics)
// through its HTTP API. Every figure is aggregated inside the server; the
// report holds one row per owner, so a month of a thousand GPUs costs the
// client no more than a day of one.
package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Options select the range, the owners and the idle threshold.
type Options struct {
	From, To time.Time
	// Step is the time resolution of every figure; zero chooses one from the
	// range (DefaultStep).
	Step time.Duration
	By   string
	// IdleBelow is the utilization under which a held GPU counts as idle.
	IdleBelow float64
	// RawOnly ignores the shipped recording rules even where they exist.
	RawOnly bool
	// CarbonIntensity, grams of CO2e per kWh, adds CO2e to the energy
	// figures; 0 leaves it out.
	CarbonIntensity float64
}

// Row is one owner's figures over the range.
type Row struct {
	Owner map[string]string `json:"owner"`
	// GPU-hours during which the owner held a GPU (allocation, or a process
	// on it for user/container/compose_service, or any holder for node/gpu).
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	// GPU-hours weighted by utilization: an hour at 50 % counts half.
	UsedGPUHours float64 `json:"used_gpu_hours"`
	// MeanUtilization is UsedGPUHours / AllocatedGPUHours.
	MeanUtilization float64 `json:"mean_utilization"`
	P95Utilization  float64 `json:"p95_utilization"`
	PeakMemoryBytes float64 `json:"peak_memory_bytes"`
	MeanMemoryBytes float64 `json:"mean_memory_bytes"`
	EnergyKWh       float64 `json:"energy_kwh"`
	// IdleAllocatedHours: held GPU-hours with utilization below the threshold.
	IdleAllocatedHours float64 `json:"idle_allocated_hours"`
	// DurationHours (--by=job): how long the job held any GPU in the range.
	DurationHours float64 `json:"duration_hours,omitempty"`
	// CO2eKg is EnergyKWh × Options.CarbonIntensity; absent without it.
	CO2eKg *float64 `json:"co2e_kg,omitempty"`
}

// Fleet summarizes every GPU in the range, held or not.
type Fleet struct {
	GPUs            int      `json:"gpus"`
	MeanUtilization float64  `json:"mean_utilization"`
	IdleGPUHours    float64  `json:"idle_gpu_hours"`
	EnergyKWh       float64  `json:"energy_kwh"`
	CO2eKg          *float64 `json:"co2e_kg,omitempty"`
}

// Report is the whole answer.
type Report struct {
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Step      string    `json:"step"`
	By        string    `json:"by"`
	IdleBelow float64   `json:"idle_below"`
	Labels    []string  `json:"owner_labels"`
	Rows      []Row     `json:"rows"`
	Totals    Row       `json:"totals"`
	Fleet     Fleet     `json:"fleet"`
	Server    string    `json:"server"`
	Generated time.Time `json:"generated"`
	// Sources says where the utilization percentile and memory figures came
	// from: the shipped recording rules (their names) or the raw series.
	Sources string `json:"sources"`
	// Basis is BasisCounters when hours and energy came from the accounting
	// counters, which covered the range, else BasisGauges; BasisNote says
	// which figures and why.
	Basis     string `json:"basis"`
	BasisNote string `json:"basis_note"`
	// CarbonIntensity is Options.CarbonIntensity (g CO2e/kWh) when given.
	CarbonIntensity float64 `json:"carbon_intensity_g_per_kwh,omitempty"`
}

// DefaultStep chooses the resolution from the range: fine enough to follow
// jobs of a few minutes over a day, coarse enough that a month costs the
// server a few thousand evaluations per series.
func DefaultStep(rng time.Duration) time.Duration {
	switch {
	case rng <= 24*time.Hour:
		return time.Minute
	case rng <= 7*24*time.Hour:
		return 5 * time.Minute
	case rng <= 31*24*time.Hour:
		return 15 * time.Minute
	default:
		return time.Hour
	}
}

// ErrNoData says that the server has none of the series a figure needs.
var ErrNoData = errors.New("no data")

// Querier is the part of the Prometheus API a report uses.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, error)
}

// Validate checks the options and fills the step.
func (o *Options) Validate() error {
	if o.From.IsZero() || o.To.IsZero() {
		return errors.New("a range is needed: --last=DURATION, or --from and --to")
	}
	if !o.To.After(o.From) {
		return fmt.Errorf("--from (%s) must be before --to (%s)", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339))
	}
	if _, err := lookupDimension(o.By); err != nil {
		return err
	}
	if o.IdleBelow <= 0 || o.IdleBelow > 1 || math.IsNaN(o.IdleBelow) {
		return fmt.Errorf("--idle-below=%g: must be a utilization ratio in (0, 1]", o.IdleBelow)
	}
	if err := checkCarbon(o.CarbonIntensity); err != nil {
		return err
	}
	rng := o.To.Sub(o.From)
	if o.Step == 0 {
		o.Step = DefaultStep(rng)
	}
	if o.Step < time.Second || o.Step > rng {
		return fmt.Errorf("--step=%s: must be between 1s and the range (%s)", o.Step, rng)
	}
	return nil
}

// Build runs the report's queries against q.
func Build(ctx context.Context, q Querier, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dim, _ := lookupDimension(opts.By)
	rng := opts.To.Sub(opts.From)
	qs := buildQueries(dim, rng, opts.Step, opts.IdleBelow)
	stepHours := opts.Step.Hours()
	run := func(query string) (model.Vector, error) { return instant(ctx, q, query, opts.To) }

	// The fleet first: it says whether gpuwatch's series are there at all.
	gpus, err := run(qs.fleetGPUs)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 || gpus[0].Value == 0 {
		return nil, fmt.Errorf("%w: no gpu_up series between %s and %s: is gpuwatch scraped by this server?",
			ErrNoData, opts.From.Format(time.RFC3339), opts.To.Format(time.RFC3339))
	}
	r := &Report{From: opts.From, To: opts.To, Step: promDuration(opts.Step), By: opts.By, IdleBelow: opts.IdleBelow, Labels: dim.labels,
		Sources: "raw series"}
	if rules, ok := shippedRules[dim.name]; ok && !opts.RawOnly {
		present, err := run(rulesPresentQuery(rules, promDuration(rng)))
		if err != nil {
			return nil, err
		}
		if len(present) > 0 {
			qs.useRules(dim, rules, "["+promDuration(rng)+":"+promDuration(opts.Step)+"]")
			r.Sources = "recording rules " + rules.util + ", " + rules.mem + " (deploy/prometheus/recording.yml)"
		}
	}
	r.Fleet.GPUs = int(gpus[0].Value)
	r.Fleet.MeanUtilization, err = scalar(run(qs.fleetUtil))
	if err != nil {
		return nil, err
	}
	idle, err := scalar(run(qs.fleetIdleSteps))
	if err != nil {
		return nil, err
	}
	r.Fleet.IdleGPUHours = idle * stepHours
	watts, err := scalar(run(qs.fleetWattSteps))
	if err != nil {
		return nil, err
	}
	r.Fleet.EnergyKWh = wattStepsToKWh(watts, opts.Step)

	rows := map[string]*Row{}
	var order []string
	figure := func(query string, set func(*Row, float64)) error {
		v, err := run(query)
		if err != nil {
			return err
		}
		for _, s := range v {
			owner := ownerOf(s.Metric, dim.labels)
			key := ownerKey(owner, dim.labels)
			row, ok := rows[key]
			if !ok {
				row = &Row{Owner: owner}
				rows[key] = row
				order = append(order, key)
			}
			set(row, float64(s.Value))
		}
		return nil
	}
	steps := []struct {
		query string
		set   func(*Row, float64)
	}{
		{qs.allocSteps, func(r *Row, v float64) { r.AllocatedGPUHours = v * stepHours }},
		{qs.usedSteps, func(r *Row, v float64) { r.UsedGPUHours = v * stepHours }},
		{qs.idleSteps, func(r *Row, v float64) { r.IdleAllocatedHours = v * stepHours }},
		{qs.p95Util, func(r *Row, v float64) { r.P95Utilization = v }},
		{qs.memPeak, func(r *Row, v float64) { r.PeakMemoryBytes = v }},
		{qs.memMean, func(r *Row, v float64) { r.MeanMemoryBytes = v }},
		{qs.wattSteps, func(r *Row, v float64) { r.EnergyKWh = wattStepsToKWh(v, opts.Step) }},
	}
	if qs.jobSteps != "" {
		steps = append(steps, struct {
			query string
			set   func(*Row, float64)
		}{qs.jobSteps, func(r *Row, v float64) { r.DurationHours = v * stepHours }})
	}
	for _, st := range steps {
		if err := figure(st.query, st.set); err != nil {
			return nil, err
		}
	}
	at := func(query string, ts time.Time) (model.Vector, error) { return instant(ctx, q, query, ts) }
	if err := useCounters(r, dim, opts, rows, at, figure); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w for --by=%s between %s and %s: %s", ErrNoData, opts.By,
			opts.From.Format(time.RFC3339), opts.To.Format(time.RFC3339), missingSeriesHint(dim))
	}
	for _, k := range order {
		row := rows[k]
		// A row seen only by a figure that does not need the owner to
		// hold a GPU (memory of a device row) still needs its hours.
		if row.AllocatedGPUHours > 0 {
			row.MeanUtilization = row.UsedGPUHours / row.AllocatedGPUHours
		}
		r.Rows = append(r.Rows, *row)
	}
	sort.SliceStable(r.Rows, func(i, j int) bool {
		a, b := r.Rows[i], r.Rows[j]
		if a.AllocatedGPUHours != b.AllocatedGPUHours {
			return a.AllocatedGPUHours > b.AllocatedGPUHours
		}
		return ownerKey(a.Owner, dim.labels) < ownerKey(b.Owner, dim.labels)
	})
	r.Totals = totals(r.Rows)
	applyCarbon(r, opts.CarbonIntensity)
	return r, nil
}

func missingSeriesHint(dim dimension) string {
	switch dim.kind {
	case byAllocation:
		src := "the kubelet pod-resources API (--kubelet.pod-resources-socket)"
		if dim.alloc == slurmAlloc {
			src = "Slurm (--slurm.jobs on the compute nodes)"
		}
		return "no " + dim.alloc + " series; gpuwatch exports it when it reads allocations from " + src
	case byProcess:
		return "no gpu_process_memory_used_bytes series with a " + dim.ownerKey() + " label; gpuwatch exports them when attribution finds the owners"
	default:
		return "no GPU was held by a pod, a job or a process"
	}
}

func totals(rows []Row) Row {
	t := Row{Owner: map[string]string{}}
	for _, r := range rows {
		t.AllocatedGPUHours += r.AllocatedGPUHours
		t.UsedGPUHours += r.UsedGPUHours
		t.IdleAllocatedHours += r.IdleAllocatedHours
		t.EnergyKWh += r.EnergyKWh
		t.PeakMemoryBytes = math.Max(t.PeakMemoryBytes, r.PeakMemoryBytes)
	}
	if t.AllocatedGPUHours > 0 {
		t.MeanUtilization = t.UsedGPUHours / t.AllocatedGPUHours
	}
	return t
}

func wattStepsToKWh(wattSteps float64, step time.Duration) float64 {
	return wattSteps * step.Seconds() / 3.6e6
}

func ownerOf(m model.Metric, labels []string) map[string]string {
	out := make(map[string]string, len(labels))
	for _, l := range labels {
		out[l] = string(m[model.LabelName(l)])
	}
	return out
}

func ownerKey(owner map[string]string, labels []string) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = owner[l]
	}
	return strings.Join(parts, "\x00")
}

func instant(ctx context.Context, q Querier, query string, ts time.Time) (model.Vector, error) {
	v, _, err := q.Query(ctx, query, ts)
	if err != nil {
		return nil, explain(err, query)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: the server answered %s, not a vector", query, v.Type())
	}
	return vec, nil
}

func scalar(v model.Vector, err error) (float64, error) {
	if err != nil || len(v) == 0 {
		return 0, err
	}
	return float64(v[0].Value), nil
}
