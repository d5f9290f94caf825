package report

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The counters' figures, like the gauges', are aggregated in the server by
// exactly the owner labels, one subquery over the range's steps.
func TestCounterQueriesAggregateInTheServer(t *testing.T) {
	for _, name := range Dimensions() {
		d := dimensions[name]
		cs, ok := counterQueries(d, 720*time.Hour, 15*time.Minute)
		if d.kind == byDevice {
			if ok {
				t.Errorf("--by=%s: counters used for whole GPUs", name)
			}
			continue
		}
		if !ok {
			t.Errorf("--by=%s: no counter queries", name)
			continue
		}
		for _, text := range []string{cs.held, cs.measured, cs.used, cs.energy} {
			if !strings.Contains(text, window(720*time.Hour, 15*time.Minute)+")") || !strings.HasPrefix(text, "sum "+by(d.labels)) ||
				strings.Contains(text, "increase(") {
				t.Errorf("--by=%s: %s is not one sum over the range's steps, summed by the owner", name, text)
			}
		}
		if (cs.idle != "") != (d.kind == byAllocation || name == "user") {
			t.Errorf("--by=%s: idle query %q; allocations (and users, by their jobs) have one, other process owners none", name, cs.idle)
		}
	}
}

func TestCarbonIntensityChecked(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, g := range []float64{-1, math.NaN(), math.Inf(1)} {
		o := Options{From: now.Add(-time.Hour), To: now, By: "pod", IdleBelow: 0.05, CarbonIntensity: g}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--carbon-intensity") {
			t.Errorf("carbon intensity %g: %v", g, err)
		}
	}
	two, three := 2.0, 3.0
	r := &Report{Rows: []Row{{EnergyKWhSummed: &two}, {}}, Totals: Row{EnergyKWhSummed: &two}, Fleet: Fleet{EnergyKWhSummed: &three}}
	applyCarbon(r, 0)
	if r.Rows[0].CO2eKg != nil || r.Fleet.CO2eKg != nil {
		t.Error("CO2e without a carbon intensity")
	}
	applyCarbon(r, 250)
	if *r.Rows[0].CO2eKg != 0.5 || *r.Totals.CO2eKg != 0.5 || *r.Fleet.CO2eKg != 0.75 {
		t.Errorf("CO2e %v %v %v, want 0.5 0.5 0.75 kg at 250 g/kWh", *r.Rows[0].CO2eKg, *r.Totals.CO2eKg, *r.Fleet.CO2eKg)
	}
	if r.Rows[1].CO2eKg != nil {
		t.Errorf("a row without an energy reading has CO2e %v: absent is never 0", *r.Rows[1].CO2eKg)
	}
}
