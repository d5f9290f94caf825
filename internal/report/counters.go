package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// The accounting counters (gpu_process_*_total, gpu_allocation_*_total,
// gpu_idle_energy_joules_total; docs/accounting.md) are integrated by
// gpuwatch every few seconds, between scrapes: where they cover the whole
// range, increase() over it gives exact GPU-hours, SM-hours and energy per
// owner, a job shorter than a scrape interval included. The sampled gauges
// remain the source of the utilization percentile and the memory figures,
// and of every figure where the counters do not cover the range (gpuwatch
// without accounting, or started after the range began).

// Basis values: which series the hours and energy came from.
const (
	BasisCounters = "counters"
	BasisGauges   = "gauges"
)

// counterSet is the PromQL of the figures the counters give for one
// dimension; an empty query leaves that figure to the gauges.
type counterSet struct {
	held, measured, used, energy, idle string
	// p95 is the 95th percentile over the steps of the owner's used part
	// over its measured part: the same series as the mean's.
	p95 string
}

// stepIncrease is a counter's increase over the step before each subquery
// step, without extrapolation: a series new since the previous step counts
// from 0 (gpuwatch's counters appear at 0), a reset (gpuwatch restarted)
// counts from the reset. Summed over the steps of (From, To] it is the
// counter's increase in the range, its first sample a baseline, never an
// increase.
func stepIncrease(series string, step time.Duration) string {
	return "((" + series + " - " + series + " offset " + promDuration(step) + ") >= 0 or " + series + " * 1)"
}

// heldIncrease is stepIncrease for a held-seconds counter, where a series
// new since the previous step counts for at most the step: a new owner's
// first total, shown after the counters' hold, holds time from before the
// step, which may lie before the range.
func heldIncrease(series string, step time.Duration) string {
	return "((" + series + " - " + series + " offset " + promDuration(step) + ") >= 0 or clamp_max(" + series + ", " + fmt.Sprint(step.Seconds()) + "))"
}

// stepsStart is where the time the steps of (from, to] stand for begins:
// the step before the first step, the largest multiple of step (since the
// Unix epoch, as subquery steps are) not after from.
func stepsStart(from time.Time, step time.Duration) time.Time {
	ms, stepMS := from.UnixMilli(), step.Milliseconds()
	start := ms - ms%stepMS
	if ms < 0 && ms%stepMS != 0 {
		start -= stepMS
	}
	return time.UnixMilli(start)
}

// inRange is heldIncrease, bounded at each step t by the time since start
// (stepsStart): held time is wall time, so no step holds more of what the
// steps stand for than t - start. It matters where a counter jumps: a new
// owner's counters read 0 through gpuwatch's new-owner hold, then show
// everything since the owner appeared, which may lie before the range.
func inRange(series string, step time.Duration, start time.Time) string {
	return "clamp_max(" + heldIncrease(series, step) + ", " + sinceStart(start) + ")"
}

// sinceStart is the scalar time from start to the subquery's step.
func sinceStart(start time.Time) string {
	return "time() - " + fmt.Sprintf("%.3f", float64(start.UnixMilli())/1000)
}

// increases are the step increases of the accounting counters over one
// range: raw, held time bounded to the range, and a process counter scaled
// as its owner's held time was bounded.
type increases struct {
	x     *shared
	step  time.Duration
	start time.Time // stepsStart of the range
}

func (c increases) raw(series string) string { return stepIncrease(series, c.step) }

// held is a held-seconds counter's increase: inRange.
func (c increases) held(series string) string { return inRange(series, c.step, c.start) }

// proc is a per-process-owner counter's increase (SM seconds, energy),
// scaled as inRange bounds its owner's held time (gpu_process_seconds_total
// with the same labels) in the step: where a jump holds time from before
// start, the counter keeps the part of its increase that the held time
// keeps, as if spread evenly over it, so no figure counts time before the
// range.
func (c increases) proc(metric, sel string) string {
	since := "(" + sinceStart(c.start) + ")"
	part := c.x.name("(" + since + " / clamp_min(" + heldIncrease("gpu_process_seconds_total"+sel, c.step) + ", " + since + "))")
	return "(" + c.raw(metric+sel) + " * " + part + ")"
}

// counterGPU is the key of one GPU in the counters: a MIG instance counts
// as its whole GPU, as in the gauges' figures, so owners of two instances
// of one GPU share it.
const counterGPU = "instance, uuid"

// sharedHeld is, per step, each owner's part of the time its GPUs were
// held: the GPU's held time in the step (its longest holder's) split
// between its owners by their SM seconds in the step where any, else by
// their held seconds. So per-owner hours add up to the GPU's, whoever
// shared it. held and sm are per (owner, GPU) step increases; sm may be "".
// A step may hold more than the step (two accounting ticks between two
// scrapes, none in the next): capGPU bounds the range's sum instead.
func sharedHeld(x *shared, held, sm string) string {
	gpu := "on(" + counterGPU + ") group_left()"
	longest := "max by (" + counterGPU + ") (" + held + ")"
	byHeld := x.name("(" + held + " / " + gpu + " (sum by (" + counterGPU + ") (" + held + ") > 0))")
	weight := byHeld
	if sm != "" {
		smHeld := x.name("(" + sm + " and " + held + ")")
		bySM := "((" + smHeld + " or " + held + " * 0) / " + gpu + " (sum by (" + counterGPU + ") (" + smHeld + ") > 0))"
		weight = "(" + bySM + " or " + byHeld + ")"
	}
	return x.name("(" + weight + " * " + gpu + " " + longest + ")")
}

// capGPU is, per GPU, the factor that bounds its held seconds over the
// range (the sum of its owners' parts) to the range: the counters' samples
// at the range's ends may lie up to a tick and a scrape apart from them.
// Every held-time figure is scaled by it, so the owners' shares stay as
// counted and a GPU never holds more hours than the range has.
func capGPU(x *shared, part, w string, rng time.Duration) string {
	// 1 / max(total / range, 1): the range over the total where the total
	// is more, else 1; the total written once keeps the query short.
	total := "sum by (" + counterGPU + ") (sum_over_time((" + part + ")" + w + "))"
	return x.name("(1 / clamp_min(" + total + " / " + fmt.Sprint(rng.Seconds()) + ", 1))")
}

// atMost is a per series min(a, b) over the series both have.
func atMost(a, b string) string {
	return "((" + a + " <= " + b + ") or (" + b + " and " + a + "))"
}

// ownerSeries are a dimension's per (owner, GPU) step increases of the
// accounting counters.
type ownerSeries struct {
	held, sm, energy, idle, jobs string
	// inHold is 1 per (owner, GPU) at a step where an allocation of the
	// owner held the GPU through the step in its new-owner hold; "" where
	// no allocation makes an owner.
	inHold string
}

// liveSlurmJob is gpu_slurm_job_info with the counters' job label.
const liveSlurmJob = `label_replace(` + slurmAlloc + `, "slurm_job", "$1", "job_id", "(.+)")`

// inHoldSeries is, for an allocation's held-seconds series, 1 at a step
// where the allocation held its GPU through the step while its counters
// read 0 (gpuwatch's new-owner hold): the series reads 0 and was there a
// step before, and live (the allocation's info series, joined on match)
// still lists the allocation: one that ends inside its hold reads 0 until
// the hold ends.
func inHoldSeries(series string, step time.Duration, match, live string) string {
	return "(((" + series + " == 0 and " + series + " offset " + promDuration(step) + ") + 1) and on(" + match + ") " + live + ")"
}

// ownerCounters builds the dimension's per (owner, GPU) step increases,
// the held time's with held (c.raw or c.held), SM time and energy with
// c.proc.
func ownerCounters(x *shared, dim dimension, c increases, held func(series string) string) ownerSeries {
	perOwnerGPU := "by (" + strings.Join(dim.labels, ", ") + ", " + counterGPU + ")"
	var o ownerSeries
	switch {
	case dim.kind == byProcess:
		sel := "{" + dim.ownerKey() + `!=""}`
		o.held = "max " + perOwnerGPU + " (" + held("gpu_process_seconds_total"+sel) + ")"
		o.sm = "sum " + perOwnerGPU + " (" + c.proc("gpu_process_sm_seconds_total", sel) + ")"
		o.energy = "sum " + perOwnerGPU + " (" + c.proc("gpu_process_energy_joules_total", sel) + ")"
		if dim.name == "user" {
			o.held, o.sm, o.jobs, o.idle = userHeld(x, c, held)
			o.inHold = "max by (user, " + counterGPU + ") " + inHoldSeries(`gpu_allocation_seconds_total{slurm_job!="",user!=""}`, c.step, "instance, uuid, slurm_job", liveSlurmJob)
		}
	case dim.alloc == k8sAlloc:
		sel := `{pod!=""}`
		o.held = "max " + perOwnerGPU + " (" + held("gpu_allocation_seconds_total"+sel) + ")"
		o.idle = "max " + perOwnerGPU + " (" + c.raw("gpu_allocation_idle_seconds_total"+sel) + ")"
		// An allocation whose processes used no SM time, where SM time is
		// measured (its idle counter exists), used 0, not unknown.
		o.sm = "(sum " + perOwnerGPU + " (" + c.proc("gpu_process_sm_seconds_total", sel) + ") or " + o.idle + " * 0)"
		o.energy = "sum " + perOwnerGPU + " (" + c.proc("gpu_process_energy_joules_total", sel) + ")"
		o.inHold = "max " + perOwnerGPU + " " + inHoldSeries("gpu_allocation_seconds_total"+sel, c.step, "instance, uuid, namespace, pod", k8sAlloc)
	case dim.alloc == slurmAlloc:
		// The counters carry the job id (slurm_job); account and partition
		// come from gpu_slurm_job_info at the step, joined on the GPU and
		// the job.
		info := "group by (instance, uuid, job_id, account, partition) (" + slurmAlloc + ")"
		sel := `{slurm_job!=""}`
		job := func(agg, increase string) string {
			return agg + " " + perOwnerGPU + " (label_replace(" + increase + `, "job_id", "$1", "slurm_job", "(.+)")` +
				" * on(instance, uuid, job_id) group_left(account, partition) " + info + ")"
		}
		o.held = job("max", held("gpu_allocation_seconds_total"+sel))
		o.idle = job("max", c.raw("gpu_allocation_idle_seconds_total"+sel))
		o.sm = "(" + job("sum", c.proc("gpu_process_sm_seconds_total", sel)) + " or " + o.idle + " * 0)"
		o.energy = job("sum", c.proc("gpu_process_energy_joules_total", sel))
		o.inHold = job("max", inHoldSeries("gpu_allocation_seconds_total"+sel, c.step, "instance, uuid, slurm_job", liveSlurmJob))
	}
	o.held, o.sm, o.energy, o.idle, o.jobs, o.inHold = x.name(o.held), x.name(o.sm), x.name(o.energy), x.name(o.idle), x.name(o.jobs), x.name(o.inHold)
	return o
}

// counterQueries returns the counters' queries for dim over rng at step,
// their repeated parts spelled as x says, or
// false where the counters do not carry the dimension's owner (node and gpu
// rows are whole GPUs, which the gauges already measure).
func counterQueries(dim dimension, from time.Time, rng, step time.Duration, x *shared) (counterSet, bool) {
	if dim.kind == byDevice {
		return counterSet{}, false
	}
	w := window(rng, step)
	owner := by(dim.labels)
	sumOver := func(expr string) string { return "sum " + owner + " (sum_over_time((" + expr + ")" + w + "))" }
	c := increases{x: x, step: step, start: stepsStart(from, step)}
	raw := ownerCounters(x, dim, c, c.raw)
	held := ownerCounters(x, dim, c, c.held).held
	sm, energy, idle, jobs := raw.sm, raw.energy, raw.idle, raw.jobs
	// Process owners share a GPU by their SM time, allocations equally
	// (by their held time), as the sampled gauges' figures do.
	var part string
	if dim.kind == byAllocation {
		part = sharedHeld(x, held, "")
	} else {
		part = sharedHeld(x, held, sm)
	}
	if allocated := x.name(allocatedPart(dim, part, jobs)); allocated != "" {
		// The energy the counters give nobody (no process owner: an idle
		// allocation) goes to the owners whose allocations held the GPU in
		// the step, equally, as the accounting splits a GPU's energy
		// between holders that used no SM time. An allocation in its
		// new-owner hold holds the GPU too: its held time reads 0 then,
		// but the GPU's idle energy counter, which has no hold, does not
		// wait for it.
		holders := x.name("group by (" + strings.Join(dim.labels, ", ") + ", " + counterGPU + ") ((" + allocated + " > 0) or " + raw.inHold + ")")
		heldIdleEnergy := x.name("(" + holders + " / on(" + counterGPU + ") group_left() count by (" + counterGPU + ") (" + holders + ")" +
			" * on(" + counterGPU + ") group_left() sum by (" + counterGPU + ") (" + stepIncrease("gpu_idle_energy_joules_total", step) + "))")
		// Both parts, each written once: a label keeps them apart in the
		// union until the owner's sum adds them.
		energy = "(label_replace(" + energy + `, "energy_part", "owners", "", "") or label_replace(` + heldIdleEnergy + `, "energy_part", "held_idle", "", ""))`
	}
	// An owner used at most the part of the GPU it held; its idle time is
	// its held time's idle share.
	used := x.name(atMost(sm, part))
	measured := x.name("(" + part + " and " + sm + ")")
	factor := capGPU(x, part, w, rng)
	// Held time, capped per GPU at the range.
	capped := func(expr string) string {
		return "sum " + owner + " (sum_over_time((" + expr + ")" + w + ") * on(" + counterGPU + ") group_left() " + factor + ")"
	}
	cs := counterSet{
		held:     capped(part) + " / 3600",
		measured: capped(measured) + " / 3600",
		used:     capped(used) + " / 3600",
		energy:   sumOver(energy) + " / 3.6e6",
		p95:      "quantile_over_time(0.95, (sum " + owner + " (" + used + ") / (sum " + owner + " (" + measured + ") > 0))" + w + ")",
	}
	if idle != "" {
		cs.idle = capped(atMost(idle+" * "+part+" / "+raw.held, part)) + " / 3600"
	}
	for _, q := range []*string{&cs.held, &cs.measured, &cs.used, &cs.energy, &cs.idle, &cs.p95} {
		*q = x.query(*q)
	}
	return cs, true
}

// allocatedPart is the part of the owners' held time that an allocation
// gave them (all of it for allocation views; for --by=user, on the GPUs a
// Slurm job holds), or "" where none does.
func allocatedPart(dim dimension, part, jobs string) string {
	switch {
	case dim.kind == byAllocation:
		return part
	case jobs != "":
		return "(" + part + " and on(instance, uuid) (" + jobs + " > 0))"
	}
	return ""
}

// userHeld is, for --by=user, the held seconds (with held) and SM seconds
// per (user, GPU) at a step: a Slurm job's user holds its GPUs (idle or not); on a GPU no job
// holds, the users with a process on it. On a job's GPU the user's SM
// seconds are those of their processes there, 0 where the job runs none
// but SM time is measured (its idle counter exists). Idle-allocated time is
// their jobs' (a GPU held by processes alone is never idle-allocated).
func userHeld(x *shared, c increases, held func(series string) string) (heldSecs, sm, jobs, idle string) {
	perUserGPU := "by (user, " + counterGPU + ")"
	jobs = x.name("max " + perUserGPU + " (" + held(`gpu_allocation_seconds_total{slurm_job!="",user!=""}`) + ")")
	procs := "max " + perUserGPU + " (" + held(`gpu_process_seconds_total{user!=""}`) + ")"
	heldSecs = "(" + jobs + " or (" + procs + " unless on(instance, uuid) (" + jobs + " > 0)))"
	smProcs := "sum " + perUserGPU + " (" + c.proc("gpu_process_sm_seconds_total", `{user!=""}`) + ")"
	idle = "max " + perUserGPU + " (" + c.raw(`gpu_allocation_idle_seconds_total{slurm_job!="",user!=""}`) + ")"
	sm = "(" + smProcs + " or " + idle + " * 0)"
	return heldSecs, sm, jobs, idle
}

// countersCoverQuery counts the gpuwatch instances whose accounting
// counters were there at the start of the range (evaluated at From): the
// idle-energy counter exists for every GPU from accounting's first tick.
const countersCoverQuery = "count(group by (instance) (gpu_idle_energy_joules_total))"

// instancesQuery counts the instances with GPUs in the range (at To).
func instancesQuery(rng string) string {
	return "count(group by (instance) (max_over_time(gpu_up[" + rng + "])))"
}

// useCounters replaces the hours and energy of the report's rows with the
// counters' where the counters cover the range, adding the owners only
// they saw; it records which it used in r.Basis and r.BasisNote.
func useCounters(r *Report, dim dimension, opts Options, rows map[string]*Row,
	at func(query string, ts time.Time) (model.Vector, error), figure func(string, func(*Row, float64)) error) error {
	rng := promDuration(opts.To.Sub(opts.From))
	r.Basis = BasisGauges
	cs, ok := counterQueries(dim, opts.From, opts.To.Sub(opts.From), opts.Step, &shared{})
	if !ok {
		r.BasisNote = "the sampled gauges (--by=" + dim.name + " is per GPU)"
		return nil
	}
	instances, iok, err := scalarAt(at, instancesQuery(rng), opts.To)
	if err != nil {
		return err
	}
	covered, cok, err := scalarAt(at, countersCoverQuery, opts.From)
	if err != nil {
		return err
	}
	if !iok || !cok {
		r.BasisNote = "the sampled gauges: the server gave no number for the accounting counters' coverage"
		return nil
	}
	if instances == 0 || covered < instances {
		r.BasisNote = fmt.Sprintf("the sampled gauges: the accounting counters cover %g of %g instances from the range's start", covered, instances)
		return nil
	}
	// The counters cover the range: their figures replace the gauges'.
	for _, row := range rows {
		row.AllocatedGPUHours, row.measuredHours, row.UsedGPUHours, row.EnergyKWhSummed = 0, 0, nil, nil
		// The p95 comes from the same series as the mean, never from
		// another basis.
		row.P95UtilizationPerGPU = nil
		if cs.idle != "" {
			row.IdleAllocatedGPUHours = 0
		}
	}
	// A server that refuses a query for its length (VictoriaMetrics) is
	// sent the same query in MetricsQL's WITH form, each repeated part
	// spelled once.
	with, _ := counterQueries(dim, opts.From, opts.To.Sub(opts.From), opts.Step, &shared{with: true})
	figures := []struct {
		query, with string
		set         func(*Row, float64)
	}{
		{cs.held, with.held, func(r *Row, v float64) { r.AllocatedGPUHours = v }},
		{cs.measured, with.measured, func(r *Row, v float64) { r.measuredHours = v }},
		{cs.used, with.used, func(r *Row, v float64) { r.UsedGPUHours = &v }},
		{cs.energy, with.energy, func(r *Row, v float64) { r.EnergyKWhSummed = &v }},
		{cs.idle, with.idle, func(r *Row, v float64) { r.IdleAllocatedGPUHours = v }},
		{cs.p95, with.p95, func(r *Row, v float64) { r.P95UtilizationPerGPU = &v }},
	}
	refused := false // the server refused a query for its length
	for _, f := range figures {
		if f.query == "" {
			continue
		}
		var err error
		if !refused {
			err = figure(f.query, f.set)
			refused = refusedForLength(err)
		}
		if refused {
			err = figure(f.with, f.set)
		}
		if err != nil {
			return err
		}
	}
	fleetQuery := fleetEnergyQuery(opts.From, opts.To.Sub(opts.From), opts.Step)
	fleet, ok, err := scalarAt(at, fleetQuery, opts.To)
	if err != nil {
		return err
	}
	if ok {
		fleetKWh := fleet / 3.6e6
		r.Fleet.EnergyKWhSummed = &fleetKWh
	} else {
		r.Notes = append(r.Notes, "the server gave no number for the fleet's energy from the counters: the sampled figure is kept (query: "+fleetQuery+")")
	}
	r.Basis = BasisCounters
	r.BasisNote = "the accounting counters (gpu_*_total), which cover the range: GPU-hours held, SM-hours used, utilization per GPU (mean and p95), energy"
	if cs.idle != "" {
		r.BasisNote += ", idle-allocated hours"
	}
	return nil
}

// fleetEnergyQuery is the fleet's energy on the counters basis, in joules:
// the owners' energy (a jump bounded to the range as the owners' figures
// are) and the idle energy, over the same steps.
func fleetEnergyQuery(from time.Time, rng, step time.Duration) string {
	w := window(rng, step)
	c := increases{x: &shared{}, step: step, start: stepsStart(from, step)}
	return "(sum(sum_over_time(" + c.proc("gpu_process_energy_joules_total", "") + w + ")) or vector(0)) + sum(sum_over_time(" +
		stepIncrease("gpu_idle_energy_joules_total", step) + w + "))"
}

// applyCarbon adds CO2e to every energy figure: kWh × g/kWh, in kg.
func applyCarbon(r *Report, gramsPerKWh float64) {
	if gramsPerKWh <= 0 {
		return
	}
	r.CarbonIntensity = gramsPerKWh
	// Absent energy has absent CO2e.
	kg := func(kwh *float64) *float64 {
		if kwh == nil {
			return nil
		}
		v := *kwh * gramsPerKWh / 1000
		return &v
	}
	for i := range r.Rows {
		r.Rows[i].CO2eKg = kg(r.Rows[i].EnergyKWhSummed)
	}
	r.Totals.CO2eKg = kg(r.Totals.EnergyKWhSummed)
	r.Fleet.CO2eKg = kg(r.Fleet.EnergyKWhSummed)
}

// scalarAt is the one value of an aggregate query at ts: 0 when the
// server has no series for it (nothing to count); ok is false when it
// answered NaN or ±Inf, which the caller treats as no figure.
func scalarAt(at func(string, time.Time) (model.Vector, error), query string, ts time.Time) (v float64, ok bool, err error) {
	vec, err := at(query, ts)
	if err != nil || len(vec) == 0 {
		return 0, err == nil, err
	}
	f := float64(vec[0].Value)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, nil
	}
	return f, true, nil
}

// checkCarbon refuses a carbon intensity that is not a finite, non-negative
// number (0 is off).
func checkCarbon(g float64) error {
	if g < 0 || math.IsNaN(g) || math.IsInf(g, 0) {
		return fmt.Errorf("--carbon-intensity=%g: must be grams of CO2e per kWh, 0 or more", g)
	}
	return nil
}

// co2e is the fleet line's CO2e clause: empty without --carbon-intensity
// or without an energy reading.
func co2e(kg *float64, p precision) string {
	if kg == nil {
		return ""
	}
	return ", CO2e " + p.kwh(*kg) + " kg"
}

// shared spells the sub-expressions a counters' query repeats. In PromQL
// (with false) each is written out wherever it is used. In MetricsQL's WITH
// form each is written once, bound to a name: VictoriaMetrics expands the
// names in its parser, into the same expression as the PromQL text, and
// bounds only the text it is sent (-search.maxQueryLen).
type shared struct {
	with  bool
	names map[string]string // expression → its name
	defs  []string          // "name = expression", each after those it uses
}

// name is expr, or in the WITH form the name bound to it. Every expression
// given is parenthesized or a single call, aggregation or selector, so a
// name stands where the text stood with the same meaning.
func (x *shared) name(expr string) string {
	if !x.with || expr == "" {
		return expr
	}
	if n, ok := x.names[expr]; ok {
		return n
	}
	if x.names == nil {
		x.names = map[string]string{}
	}
	// Names of one width: none is the prefix of another.
	n := fmt.Sprintf("x%04d", len(x.defs))
	x.names[expr] = n
	x.defs = append(x.defs, n+" = "+expr)
	return n
}

// query is q with the bindings it uses, in the WITH form.
func (x *shared) query(q string) string {
	if !x.with || q == "" {
		return q
	}
	// A binding uses only earlier ones: walking back from the last, each
	// one q or a kept later one names is kept.
	used := q
	var kept []string
	for _, def := range slices.Backward(x.defs) {
		name, _, _ := strings.Cut(def, " = ")
		if strings.Contains(used, name) {
			kept = append([]string{def}, kept...)
			used += " " + def
		}
	}
	if len(kept) == 0 {
		return q
	}
	return "WITH (" + strings.Join(kept, ", ") + ") " + q
}

// refusedForLength says whether the server refused a query for the length
// of its text: VictoriaMetrics' -search.maxQueryLen.
func refusedForLength(err error) bool {
	var api *apiError
	return errors.As(err, &api) && strings.Contains(api.Msg, vmMaxQueryLenFlag)
}

// vmMaxQueryLenFlag is the VictoriaMetrics flag that bounds a query's
// text; its refusal names it.
const vmMaxQueryLenFlag = "-search.maxQueryLen"
