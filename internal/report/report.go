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

// Row is one owner's figures over the range. Each figure is either per GPU
// (averaged over the GPUs the owner held: utilization) or summed over the
// owner's GPUs (GPU-hours, memory, energy); the JSON and CSV names say
// which. A figure the server has no reading for is absent (JSON null), never 0.
type Row struct {
	Owner map[string]string `json:"owner"`
	// GPU-hours during which the owner held a GPU (allocation, or a process
	// on it for user/container/compose_service, or any holder for node/gpu).
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	// UnmeasuredGPUHours: the held GPU-hours with no utilization reading (a
	// GPU in MIG mode has none). They count in no utilization figure.
	UnmeasuredGPUHours float64 `json:"unmeasured_gpu_hours"`
	// GPU-hours weighted by utilization (an hour at 50 % counts half), over
	// the held hours that have a utilization reading.
	UsedGPUHours *float64 `json:"used_gpu_hours"`
	// MeanUtilizationPerGPU is UsedGPUHours over the measured held GPU-hours.
	MeanUtilizationPerGPU *float64 `json:"mean_utilization_per_gpu"`
	// P95UtilizationPerGPU: the 95th percentile over the steps of the mean
	// utilization of the owner's measured GPUs at each step.
	P95UtilizationPerGPU *float64 `json:"p95_utilization_per_gpu"`
	// Memory of all the owner's GPUs together: its peak and mean over time.
	PeakMemoryBytesSummed *float64 `json:"peak_memory_bytes_summed"`
	MeanMemoryBytesSummed *float64 `json:"mean_memory_bytes_summed"`
	// EnergyKWhSummed: the energy of the owner's GPUs while held.
	EnergyKWhSummed *float64 `json:"energy_kwh_summed"`
	// IdleAllocatedGPUHours: held GPU-hours with utilization below the threshold.
	IdleAllocatedGPUHours float64 `json:"idle_allocated_gpu_hours"`
	// DurationHours (--by=job): how long the job held any GPU in the range.
	DurationHours float64 `json:"duration_hours,omitempty"`

	// measuredHours: the held GPU-hours with a utilization reading.
	measuredHours float64
	// CO2eKg is EnergyKWh × Options.CarbonIntensity; absent without it.
	CO2eKg *float64 `json:"co2e_kg,omitempty"`
}

// Fleet summarizes every GPU in the range, held or not.
type Fleet struct {
	GPUs int `json:"gpus"`
	// GPUsWithoutUtilization: GPUs with no utilization reading in the whole
	// range (MIG mode); the mean leaves them out.
	GPUsWithoutUtilization int      `json:"gpus_without_utilization"`
	MeanUtilizationPerGPU  *float64 `json:"mean_utilization_per_gpu"`
	IdleGPUHours           float64  `json:"idle_gpu_hours"`
	EnergyKWhSummed        *float64 `json:"energy_kwh_summed"`
	CO2eKg                 *float64 `json:"co2e_kg,omitempty"`
}

// Report is the whole answer.
type Report struct {
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Step      string    `json:"step"`
	By        string    `json:"by"`
	IdleBelow float64   `json:"idle_below"`
	Labels    []string  `json:"owner_labels"`
	// HoursMeaning says in one line what a GPU-hour of this view is.
	HoursMeaning string    `json:"hours_meaning"`
	Rows         []Row     `json:"rows"`
	Totals       Row       `json:"totals"`
	Fleet        Fleet     `json:"fleet"`
	Server       string    `json:"server"`
	Generated    time.Time `json:"generated"`
	// Sources says where the memory figures came from: the shipped
	// recording rule (its name) or the raw series. Utilization comes from
	// the Basis, as the hours do.
	Sources string `json:"sources"`
	// Notes say what the report did that its reader should know: a range
	// narrowed to the data there is, a value the server gave as NaN.
	Notes []string `json:"notes,omitempty"`
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
	// Query runs an instant query; it returns the server's warnings too.
	Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error)
}

// warningsAsNotes is a Querier whose server warnings (a query that hit a
// limit, partial data from a federated or remote store) become the report's
// notes, naming the query: figures built on them may be incomplete.
type warningsAsNotes struct {
	Querier
	r *Report
}

func (w warningsAsNotes) Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error) {
	v, warnings, err := w.Querier.Query(ctx, query, ts)
	for _, warning := range warnings {
		w.r.Notes = append(w.r.Notes, fmt.Sprintf("the server warned: %s (query: %s)", warning, query))
	}
	return v, warnings, err
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
	r := &Report{By: opts.By, IdleBelow: opts.IdleBelow, Labels: dim.labels, HoursMeaning: dim.hours, Sources: "raw series"}
	q = warningsAsNotes{q, r}
	run := func(query string) (model.Vector, error) { return instant(ctx, q, query, opts.To) }

	// The fleet first: it says whether gpuwatch's series are there at all.
	gpus, err := findData(ctx, q, &opts, r)
	if err != nil {
		return nil, err
	}
	rng := opts.To.Sub(opts.From)
	qs := buildQueries(dim, rng, opts.Step, opts.IdleBelow)
	r.From, r.To, r.Step = opts.From, opts.To, promDuration(opts.Step)
	if mem, ok := shippedMemoryRules[dim.name]; ok && !opts.RawOnly {
		present, err := run(rulesPresentQuery(mem, promDuration(rng)))
		if err != nil {
			return nil, err
		}
		if len(present) > 0 {
			r.Sources = qs.useRules(dim, mem, window(rng, opts.Step))
		}
	}
	r.Fleet.GPUs = gpus
	if err := r.fillFleet(run, qs, opts.Step); err != nil {
		return nil, err
	}

	rows := &rowSet{report: r, run: run, dim: dim, rows: map[string]*Row{}}
	if err := rows.fill(qs, opts.Step); err != nil {
		return nil, err
	}
	at := func(query string, ts time.Time) (model.Vector, error) { return instant(ctx, q, query, ts) }
	if err := useCounters(r, dim, opts, rows.rows, at, rows.figure); err != nil {
		return nil, err
	}
	if len(rows.rows) == 0 {
		return nil, fmt.Errorf("%w for --by=%s between %s and %s: %s", ErrNoData, opts.By,
			opts.From.Format(time.RFC3339), opts.To.Format(time.RFC3339), missingSeriesHint(dim))
	}
	for _, k := range rows.order {
		row := rows.rows[k]
		row.finish()
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

// fillFleet reads the fleet line's figures: GPUs without a utilization
// reading, mean utilization per GPU, idle GPU-hours and energy.
func (r *Report) fillFleet(run func(string) (model.Vector, error), qs queries, step time.Duration) error {
	var err error
	if r.Fleet.GPUsWithoutUtilization, err = count(run, qs.fleetUnmeasured); err != nil {
		return err
	}
	if r.Fleet.MeanUtilizationPerGPU, err = optional(run, qs.fleetUtil, r); err != nil {
		return err
	}
	idle, err := count(run, qs.fleetIdleSteps)
	if err != nil {
		return err
	}
	r.Fleet.IdleGPUHours = float64(idle) * step.Hours()
	if r.Fleet.EnergyKWhSummed, err = optional(run, qs.fleetWattSteps, r); err != nil {
		return err
	}
	if r.Fleet.EnergyKWhSummed != nil {
		*r.Fleet.EnergyKWhSummed = wattStepsToKWh(*r.Fleet.EnergyKWhSummed, step)
	}
	return nil
}

// rowSet gathers the report's rows, one per owner, from queries that each
// give one figure for every owner.
type rowSet struct {
	report *Report
	run    func(string) (model.Vector, error)
	dim    dimension
	rows   map[string]*Row
	order  []string // owner keys in the order first seen
}

func (rs *rowSet) rowOf(m model.Metric) *Row {
	owner := ownerOf(m, rs.dim.labels)
	key := ownerKey(owner, rs.dim.labels)
	row, ok := rs.rows[key]
	if !ok {
		row = &Row{Owner: owner}
		rs.rows[key] = row
		rs.order = append(rs.order, key)
	}
	return row
}

// steps reads a count of steps per owner. It can only be a whole number:
// anything else is a server that answers nonsense, and the report stops.
func (rs *rowSet) steps(query string, set func(*Row, float64)) error {
	v, err := rs.run(query)
	if err != nil {
		return err
	}
	for _, s := range v {
		f := float64(s.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("query %s: the server answered %v for %s, where a number of steps is due", query, f, s.Metric)
		}
		set(rs.rowOf(s.Metric), f)
	}
	return nil
}

// measured reads a measured figure per owner; one the server gives as NaN
// or ±Inf is absent for that owner, and a note says so.
func (rs *rowSet) measured(query string, set func(*Row, *float64)) error {
	v, err := rs.run(query)
	if err != nil {
		return err
	}
	for _, s := range v {
		f := float64(s.Value)
		row := rs.rowOf(s.Metric)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			rs.report.Notes = append(rs.report.Notes, fmt.Sprintf("the server answered %v for %s: shown as n/a (query: %s)", f, s.Metric, query))
			continue
		}
		set(row, &f)
	}
	return nil
}

// figure reads an accounting counter's figure per owner, as measured does.
func (rs *rowSet) figure(query string, set func(*Row, float64)) error {
	return rs.measured(query, func(row *Row, v *float64) { set(row, *v) })
}

// fill reads every per-owner figure of the sampled series.
func (rs *rowSet) fill(qs queries, step time.Duration) error {
	stepHours := step.Hours()
	scale := func(k float64) func(*float64) *float64 {
		return func(v *float64) *float64 { x := *v * k; return &x }
	}
	hoursOf, kwhOf := scale(stepHours), scale(step.Seconds()/3.6e6)
	for _, st := range []struct {
		query string
		set   func(*Row, float64)
	}{
		{qs.allocSteps, func(r *Row, v float64) { r.AllocatedGPUHours = v * stepHours }},
		{qs.measuredSteps, func(r *Row, v float64) { r.measuredHours = v * stepHours }},
		{qs.idleSteps, func(r *Row, v float64) { r.IdleAllocatedGPUHours = v * stepHours }},
		{qs.jobSteps, func(r *Row, v float64) { r.DurationHours = v * stepHours }},
	} {
		if st.query == "" {
			continue
		}
		if err := rs.steps(st.query, st.set); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		query string
		set   func(*Row, *float64)
	}{
		{qs.usedSteps, func(r *Row, v *float64) { r.UsedGPUHours = hoursOf(v) }},
		{qs.p95Util, func(r *Row, v *float64) { r.P95UtilizationPerGPU = v }},
		{qs.memPeak, func(r *Row, v *float64) { r.PeakMemoryBytesSummed = v }},
		{qs.memMean, func(r *Row, v *float64) { r.MeanMemoryBytesSummed = v }},
		{qs.wattSteps, func(r *Row, v *float64) { r.EnergyKWhSummed = kwhOf(v) }},
	} {
		if err := rs.measured(m.query, m.set); err != nil {
			return err
		}
	}
	return nil
}

// finish derives the mean utilization per GPU and the unmeasured hours from
// the held and measured hours, which come from one basis. The queries keep
// used ≤ measured ≤ held per owner and GPU; what floating point adds in
// the sums is clipped, so a reader never sees used above held or a ratio
// above 100 %.
func (row *Row) finish() {
	row.measuredHours = min(row.measuredHours, row.AllocatedGPUHours)
	row.UnmeasuredGPUHours = math.Max(0, row.AllocatedGPUHours-row.measuredHours)
	row.IdleAllocatedGPUHours = min(row.IdleAllocatedGPUHours, row.AllocatedGPUHours)
	if row.UsedGPUHours != nil {
		used := min(*row.UsedGPUHours, row.measuredHours)
		row.UsedGPUHours = &used
	}
	if row.measuredHours > 0 && row.UsedGPUHours != nil {
		mean := min(*row.UsedGPUHours/row.measuredHours, 1)
		row.MeanUtilizationPerGPU = &mean
	}
}

// findData checks that the server has gpu_up in the range, at the report's
// steps, and returns the number of GPUs. Where every sample lies after the
// last step of the range (a server that began scraping gpuwatch less than a
// step ago), the range narrows to that last partial step, at a fine step, so
// that the report uses the data there is; r.Notes says so.
func findData(ctx context.Context, q Querier, opts *Options, r *Report) (int, error) {
	rng := opts.To.Sub(opts.From)
	rawQuery := "count(group by (instance, uuid) (max_over_time(gpu_up[" + promDuration(rng) + "])))"
	raw, err := count(func(query string) (model.Vector, error) { return instant(ctx, q, query, opts.To) }, rawQuery)
	if err != nil {
		return 0, err
	}
	between := opts.From.Format(time.RFC3339) + " and " + opts.To.Format(time.RFC3339)
	if raw == 0 {
		found := "the server has no gpu_up series now either: is gpuwatch scraped by this server?"
		nowQuery := "count(group by (instance, uuid) (gpu_up))"
		if n, err := count(func(query string) (model.Vector, error) { return instant(ctx, q, query, time.Now()) }, nowQuery); err == nil && n > 0 {
			found = fmt.Sprintf("the server has gpu_up for %d GPUs now, so the range lies before (or after) what it holds", n)
		}
		return 0, fmt.Errorf("%w: looked for gpu_up samples (%s) between %s, found none; %s", ErrNoData, rawQuery, between, found)
	}
	onSteps := func(o Options) (int, string, error) {
		rng := o.To.Sub(o.From)
		query := "count(group by (instance, uuid) (count_over_time(gpu_up[" + promDuration(rng) + ":" + promDuration(o.Step) + "])))"
		n, err := count(func(query string) (model.Vector, error) { return instant(ctx, q, query, o.To) }, query)
		return n, query, err
	}
	n, query, err := onSteps(*opts)
	if err != nil || n > 0 {
		return n, err
	}
	// Subquery steps fall on multiples of the step since the Unix epoch.
	stepMs := opts.Step.Milliseconds()
	lastStep := time.UnixMilli(opts.To.UnixMilli() - opts.To.UnixMilli()%stepMs).UTC()
	narrowed := *opts
	narrowed.From = lastStep
	narrowed.To = opts.To.Truncate(time.Second)
	narrowed.Step = time.Second
	// At most 11 000 steps, Prometheus's own bound on a range query.
	if width := narrowed.To.Sub(narrowed.From); width > 11000*time.Second {
		narrowed.Step = (width/11000 + time.Second - 1).Truncate(time.Second)
		narrowed.To = narrowed.To.Truncate(narrowed.Step)
	}
	if narrowed.To.After(narrowed.From) {
		if m, _, err := onSteps(narrowed); err != nil {
			return 0, err
		} else if m > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("gpu_up begins after the last %s step of the range (%s): the report covers %s to %s at a %s step, the data there is",
				promDuration(opts.Step), lastStep.Format(time.RFC3339), narrowed.From.Format(time.RFC3339), narrowed.To.Format(time.RFC3339), promDuration(narrowed.Step)))
			*opts = narrowed
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: found gpu_up samples for %d GPUs between %s (%s), but none at the report's steps (every %s, the last at %s; %s): the data is younger than a step; run the report again in a minute, or give a shorter --step",
		ErrNoData, raw, between, rawQuery, promDuration(opts.Step), lastStep.Format(time.RFC3339), query)
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

// totals sums what adds up across owners; a percentile or a peak of each
// owner does not, so the totals row leaves them out.
func totals(rows []Row) Row {
	t := Row{Owner: map[string]string{}}
	var used, energy float64
	var anyUsed, anyEnergy bool
	for _, r := range rows {
		t.AllocatedGPUHours += r.AllocatedGPUHours
		t.measuredHours += r.measuredHours
		t.IdleAllocatedGPUHours += r.IdleAllocatedGPUHours
		if r.UsedGPUHours != nil {
			used, anyUsed = used+*r.UsedGPUHours, true
		}
		if r.EnergyKWhSummed != nil {
			energy, anyEnergy = energy+*r.EnergyKWhSummed, true
		}
	}
	if anyUsed {
		t.UsedGPUHours = &used
	}
	if anyEnergy {
		t.EnergyKWhSummed = &energy
	}
	t.finish()
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

// count is a query whose answer is a whole number (or nothing, 0).
func count(run func(string) (model.Vector, error), query string) (int, error) {
	v, err := run(query)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	f := float64(v[0].Value)
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, fmt.Errorf("query %s: the server answered %v, where a count is due", query, f)
	}
	return int(f), nil
}

// optional is a query whose answer may be absent (no sample) or NaN/±Inf:
// both are nil, the second with a note.
func optional(run func(string) (model.Vector, error), query string, r *Report) (*float64, error) {
	v, err := run(query)
	if err != nil || len(v) == 0 {
		return nil, err
	}
	f := float64(v[0].Value)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		r.Notes = append(r.Notes, fmt.Sprintf("the server answered %v: shown as n/a (query: %s)", f, query))
		return nil, nil
	}
	return &f, nil
}
