package report

import (
	"fmt"
	"math"
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
	held, used, energy, idle string
}

// counterQueries returns the counters' queries for dim over rng, or false
// where the counters do not carry the dimension's owner (node and gpu rows
// are whole GPUs, which the gauges already measure).
func counterQueries(dim dimension, rng string) (counterSet, bool) {
	owner := by(dim.labels)
	inc := func(metric, sel string) string { return "increase(" + metric + sel + "[" + rng + "])" }
	switch {
	case dim.kind == byProcess:
		sel := "{" + dim.ownerKey() + `!=""}`
		return counterSet{
			held:   "sum " + owner + " (" + inc("gpu_process_seconds_total", sel) + ") / 3600",
			used:   "sum " + owner + " (" + inc("gpu_process_sm_seconds_total", sel) + ") / 3600",
			energy: "sum " + owner + " (" + inc("gpu_process_energy_joules_total", sel) + ") / 3.6e6",
		}, true
	case dim.alloc == k8sAlloc:
		sel := `{pod!=""}`
		return counterSet{
			held:   "sum " + owner + " (" + inc("gpu_allocation_seconds_total", sel) + ") / 3600",
			idle:   "sum " + owner + " (" + inc("gpu_allocation_idle_seconds_total", sel) + ") / 3600",
			used:   "sum " + owner + " (" + inc("gpu_process_sm_seconds_total", sel) + ") / 3600",
			energy: "sum " + owner + " (" + inc("gpu_process_energy_joules_total", sel) + ") / 3.6e6",
		}, true
	case dim.alloc == slurmAlloc:
		// The counters carry the job id (slurm_job); account and partition
		// come from gpu_slurm_job_info, joined on the GPU and the job.
		info := "group by (instance, uuid, job_id, account, partition) (max_over_time(" + slurmAlloc + "[" + rng + "]))"
		job := func(metric string) string {
			return "sum " + owner + " (label_replace(" + inc(metric, `{slurm_job!=""}`) + `, "job_id", "$1", "slurm_job", "(.+)")` +
				" * on(instance, uuid, job_id) group_left(account, partition) " + info + ")"
		}
		return counterSet{
			held:   job("gpu_allocation_seconds_total") + " / 3600",
			idle:   job("gpu_allocation_idle_seconds_total") + " / 3600",
			used:   job("gpu_process_sm_seconds_total") + " / 3600",
			energy: job("gpu_process_energy_joules_total") + " / 3.6e6",
		}, true
	}
	return counterSet{}, false
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
	cs, ok := counterQueries(dim, rng)
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
		row.AllocatedGPUHours, row.UsedGPUHours, row.EnergyKWhSummed = 0, nil, nil
		if cs.idle != "" {
			row.IdleAllocatedGPUHours = 0
		}
	}
	figures := []struct {
		query string
		set   func(*Row, float64)
	}{
		{cs.held, func(r *Row, v float64) { r.AllocatedGPUHours = v }},
		{cs.used, func(r *Row, v float64) { r.UsedGPUHours = &v }},
		{cs.energy, func(r *Row, v float64) { r.EnergyKWhSummed = &v }},
		{cs.idle, func(r *Row, v float64) { r.IdleAllocatedGPUHours = v }},
	}
	for _, f := range figures {
		if f.query == "" {
			continue
		}
		if err := figure(f.query, f.set); err != nil {
			return err
		}
	}
	fleetQuery := "(sum(increase(gpu_process_energy_joules_total[" + rng + "])) or vector(0)) + sum(increase(gpu_idle_energy_joules_total[" + rng + "]))"
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
	r.BasisNote = "the accounting counters (gpu_*_total), which cover the range: GPU-hours held, SM-hours used, energy"
	if cs.idle != "" {
		r.BasisNote += ", idle-allocated hours"
	}
	return nil
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

// co2eColumn is the CO2e column, with --carbon-intensity: the energy
// summed over the owner's GPUs, in kg of CO2e.
func co2eColumn() column {
	return column{"CO2e kg summed", "co2e_kg", func(r Row) (float64, bool) { return maybe(r.CO2eKg) }, kwh, true}
}

// co2e is the fleet line's CO2e clause: empty without --carbon-intensity
// or without an energy reading.
func co2e(kg *float64) string {
	if kg == nil {
		return ""
	}
	return ", CO2e " + kwh(*kg) + " kg"
}
