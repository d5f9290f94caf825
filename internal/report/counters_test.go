package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// The counters' figures, like the gauges', are aggregated in the server by
// exactly the owner labels, one subquery over the range's steps.
func TestCounterQueriesAggregateInTheServer(t *testing.T) {
	for _, name := range Dimensions() {
		d := dimensions[name]
		cs, ok := counterQueries(d, time.Unix(0, 0), 720*time.Hour, 15*time.Minute, &shared{})
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

// The WITH form of every counters' query is the PromQL query with each
// repeated part named once: put back in place of its name, each part gives
// the PromQL text exactly, and every query fits VictoriaMetrics' default
// bound on a query's text.
func TestCounterQueriesWithFormIsThePromQLQuery(t *testing.T) {
	const vmDefaultMaxQueryLen = 16 << 10
	for _, name := range Dimensions() {
		d := dimensions[name]
		for _, w := range []struct{ rng, step time.Duration }{{720 * time.Hour, 15 * time.Minute}, {2 * time.Hour, time.Minute}} {
			plain, ok := counterQueries(d, time.Unix(0, 0), w.rng, w.step, &shared{})
			if !ok {
				continue
			}
			x := &shared{with: true}
			with, _ := counterQueries(d, time.Unix(0, 0), w.rng, w.step, x)
			if len(x.defs) == 0 {
				t.Fatalf("--by=%s: no part is named in the WITH form", name)
			}
			for i, pair := range [][2]string{{plain.held, with.held}, {plain.measured, with.measured}, {plain.used, with.used},
				{plain.energy, with.energy}, {plain.idle, with.idle}, {plain.p95, with.p95}} {
				if len(pair[1]) > vmDefaultMaxQueryLen {
					t.Errorf("--by=%s: figure %d's WITH form is %d bytes, over %d", name, i, len(pair[1]), vmDefaultMaxQueryLen)
				}
				if got := expandWith(t, x, pair[1]); got != pair[0] {
					t.Errorf("--by=%s: figure %d's WITH form expands to\n%s\nwant\n%s", name, i, got, pair[0])
				}
			}
		}
	}
}

// expandWith puts each binding of q's WITH clause back where its name is.
func expandWith(t *testing.T, x *shared, q string) string {
	t.Helper()
	if !strings.HasPrefix(q, "WITH (") {
		return q
	}
	// The clause ends after the last binding it keeps.
	body := ""
	for _, def := range slices.Backward(x.defs) {
		if at := strings.Index(q, def+") "); at >= 0 {
			body = q[at+len(def)+len(") "):]
			break
		}
	}
	if body == "" {
		t.Fatalf("no WITH clause's end in %s", q)
	}
	for _, def := range slices.Backward(x.defs) {
		name, expr, _ := strings.Cut(def, " = ")
		body = strings.ReplaceAll(body, name, expr)
	}
	return body
}

// A server that refuses a query for its length, as VictoriaMetrics does,
// is sent the WITH form of that figure and of every later one; any other
// refusal is the report's error.
func TestCountersResentInWithFormWhenRefusedForLength(t *testing.T) {
	const maxLen = 16 << 10
	to := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	opts := Options{From: to.Add(-2 * time.Hour), To: to, Step: time.Minute, By: "user"}
	one := model.Vector{{Metric: model.Metric{}, Value: 1}}
	at := func(string, time.Time) (model.Vector, error) { return one, nil }
	for _, other := range []bool{false, true} {
		var sent []string
		figure := func(q string, set func(*Row, float64)) error {
			sent = append(sent, q)
			switch {
			case other:
				return &apiError{Status: 503, Type: "unavailable", Msg: "try later"}
			case len(q) > maxLen:
				return &apiError{Status: 422, Type: "422", Msg: fmt.Sprintf("too long query; got %d bytes; mustn't exceed `%s=%d` bytes", len(q), vmMaxQueryLenFlag, maxLen)}
			}
			return nil
		}
		r := &Report{}
		err := useCounters(r, dimensions["user"], opts, map[string]*Row{}, at, figure)
		if other {
			var api *apiError
			if !errors.As(err, &api) || len(sent) != 1 {
				t.Errorf("another refusal: error %v after %d queries, want it returned after the first", err, len(sent))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		refusedAt := -1
		for i, q := range sent {
			if len(q) > maxLen && refusedAt < 0 {
				refusedAt = i
			}
		}
		if refusedAt < 0 {
			t.Fatal("no --by=user counters' query is over the bound: the test no longer covers the refusal")
		}
		for i, q := range sent[refusedAt+1:] {
			if !strings.HasPrefix(q, "WITH (") || len(q) > maxLen {
				t.Errorf("query %d after the refusal is not a WITH form within the bound (%d bytes): %.80s", refusedAt+1+i, len(q), q)
			}
		}
		if r.Basis != BasisCounters {
			t.Errorf("basis %q after the WITH form was answered, want %q", r.Basis, BasisCounters)
		}
	}
}
