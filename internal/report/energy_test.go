package report

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// energyGPU is one GPU of the synthetic history below: a constant draw, one
// owner that appears at time from and reads 0 through a new-owner hold (as
// gpuwatch's accounting counters do), then shows everything since.
type energyGPU struct {
	uuid, gpu string
	watts, sm float64
	// owner are the labels of the owner's process and allocation series.
	owner string
	// idle: the owner is an allocation with no process (an idle job), so
	// the GPU's whole draw is the accounting's idle energy.
	idle bool
	// from and until (seconds; until 0: the whole history) are when the
	// allocation held the GPU; an allocation that ends inside its hold
	// keeps reading 0 until the hold ends, as gpuwatch's counters do.
	from, until int
}

// newOwnerHold is the hold of the synthetic owners: gpuwatch's default.
const newOwnerHold = 60

// historyEnd is the last second of the synthetic history.
const historyEnd = 180

var energyGPUs = []energyGPU{
	{uuid: "GPU-A", gpu: "0", watts: 600, sm: 0.8, owner: `user="alice",slurm_job="7",pod="",namespace="",container="",compose_project="",compose_service="",mig_uuid=""`},
	{uuid: "GPU-B", gpu: "1", watts: 300, sm: 0.5, owner: `user="bob",slurm_job="",pod="p",namespace="n",container="c",compose_project="",compose_service="",mig_uuid=""`},
	// An idle job held through the history: its energy is its GPU's.
	{uuid: "GPU-C", gpu: "2", watts: 80, idle: true, owner: `user="carol",slurm_job="8",pod="",namespace="",container="",compose_project="",compose_service="",mig_uuid=""`},
	// An idle job that ends 10 s after it starts, inside its hold: its
	// counters read 0 past its end, which gives it no energy.
	{uuid: "GPU-D", gpu: "3", watts: 100, idle: true, from: 110, until: 120, owner: `user="dave",slurm_job="9",pod="",namespace="",container="",compose_project="",compose_service="",mig_uuid=""`},
}

// heldIn is the part of (start, at] in which g's owner held its GPU, in
// seconds.
func (g energyGPU) heldIn(start, at float64) float64 {
	until := at
	if g.until > 0 {
		until = min(at, float64(g.until))
	}
	return max(0, until-max(start, float64(g.from)))
}

// shown is how much of (start, at] the owner's counters show at at: none
// while they read 0, all of it after.
func (g energyGPU) shown(start, at float64) float64 {
	if at < float64(g.from+newOwnerHold) {
		return 0
	}
	return g.heldIn(start, at)
}

// energyHistory is the promtool input: per GPU its energy counter, the
// accounting's idle energy (none where a process holds the GPU) and the
// owner's counters, one sample a second.
func energyHistory() []map[string]string {
	const end = historyEnd
	var in []map[string]string
	add := func(series, values string) { in = append(in, map[string]string{"series": series, "values": values}) }
	for _, g := range energyGPUs {
		// counter is absent before the owner appears, 0 through the hold,
		// then rate per second of the owner's held time.
		counter := func(rate float64) string {
			held := historyEnd - g.from
			if g.until > 0 {
				held = g.until - g.from
			}
			absent := ""
			if g.from > 0 {
				absent = fmt.Sprintf("_x%d ", g.from)
			}
			hold := min(newOwnerHold, end-g.from+1)
			if g.until > 0 {
				return fmt.Sprintf("%s0x%d %gx%d", absent, hold-1, rate*float64(held), end-g.from-hold)
			}
			return fmt.Sprintf("%s0x%d %g+%gx%d", absent, hold-1, rate*newOwnerHold, rate, end-g.from-hold)
		}
		dev := fmt.Sprintf(`instance="n1",gpu=%q,uuid=%q`, g.gpu, g.uuid)
		add("gpu_energy_joules_total{"+dev+"}", fmt.Sprintf("1000000+%gx%d", g.watts, end))
		own := "{" + dev + "," + g.owner + "}"
		if g.idle {
			add("gpu_idle_energy_joules_total{"+dev+"}", fmt.Sprintf("0+%gx%d", g.watts, end))
			add("gpu_allocation_idle_seconds_total"+own, counter(1))
		} else {
			add("gpu_idle_energy_joules_total{"+dev+"}", fmt.Sprintf("0x%d", end))
			add("gpu_process_seconds_total"+own, counter(1))
			add("gpu_process_sm_seconds_total"+own, counter(g.sm))
			add("gpu_process_energy_joules_total"+own, counter(g.watts))
			add("gpu_allocation_idle_seconds_total"+own, fmt.Sprintf("0x%d", end))
		}
		// Each owner is an allocation too: a Slurm job, a pod.
		add("gpu_allocation_seconds_total"+own, counter(1))
		if job := regexp.MustCompile(`slurm_job="(\d+)"`).FindStringSubmatch(g.owner); job != nil {
			user := regexp.MustCompile(`user="(\w+)"`).FindStringSubmatch(g.owner)[1]
			info := `gpu_slurm_job_info{` + dev + `,job_id="` + job[1] + `",user="` + user + `",account="acct",partition="gpu"}`
			switch {
			case g.until > 0:
				add(info, fmt.Sprintf("_x%d 1x%d stale", g.from, g.until-g.from))
			default:
				add(info, fmt.Sprintf("1x%d", end))
			}
		}
	}
	return in
}

// energyCheck is one figure of the counters' queries, summed over the rows.
type energyCheck struct {
	name, query string
	scale, want float64
}

// TestCountersEnergyOfAWindowInsideANewOwnersHold: a window that starts
// inside the owners' new-owner hold gives them the energy their GPUs drew
// in the range (the GPUs' energy counters' increase), not the hold's
// energy from before the range, which their counters show only when the
// hold ends; their held and used hours likewise. docs/reports.md,
// Invariants (energy across the bases).
func TestCountersEnergyOfAWindowInsideANewOwnersHold(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	at := 165 * time.Second
	var checks []energyCheck
	for _, w := range []struct {
		from time.Duration
		step time.Duration
	}{
		{45 * time.Second, time.Second},      // 15 s of the hold in the range
		{45 * time.Second, 5 * time.Second},  // the same, coarser steps
		{47 * time.Second, 5 * time.Second},  // a range that starts between steps
		{100 * time.Second, 5 * time.Second}, // after the hold: nothing to clip
	} {
		from := time.Unix(0, 0).Add(w.from)
		rng := at - w.from
		// What the steps stand for: (stepsStart, at]; a GPU's held time is
		// capped at the range (capGPU), its energy is not.
		span := at.Seconds() - float64(stepsStart(from, w.step).Unix())
		heldSpan := min(span, rng.Seconds())
		start := float64(stepsStart(from, w.step).Unix())
		var fleet float64
		for _, g := range energyGPUs {
			fleet += g.watts * span
		}
		for _, by := range []string{"job", "account", "pod", "namespace", "container", "user"} {
			cs, ok := counterQueries(dimensions[by], from, rng, w.step, &shared{})
			if !ok {
				t.Fatalf("--by=%s: no counters' queries", by)
			}
			// The owners of this view and their GPUs.
			var energy, held, used float64
			for _, g := range energyGPUs {
				job := !strings.Contains(g.owner, `slurm_job=""`)
				pod := strings.Contains(g.owner, `pod="p"`)
				if (by == "job" || by == "account") && !job || (by == "pod" || by == "namespace" || by == "container") && !pod || by == "container" && g.idle {
					continue
				}
				// Held time is capped at the range, energy is not.
				energy += g.watts * g.heldIn(start, at.Seconds())
				shown := g.shown(max(start, at.Seconds()-heldSpan), at.Seconds())
				held += shown
				used += g.sm * shown
			}
			name := fmt.Sprintf("from %s step %s --by=%s", w.from, w.step, by)
			checks = append(checks,
				energyCheck{name + " energy J", cs.energy, 3.6e6, energy},
				energyCheck{name + " held s", cs.held, 3600, held},
				energyCheck{name + " used s", cs.used, 3600, used})
		}
		checks = append(checks, energyCheck{fmt.Sprintf("from %s step %s fleet energy J", w.from, w.step), fleetEnergyQuery(from, rng, w.step), 1, fleet})
	}
	failures := runEnergyChecks(t, promtool, at, checks)
	for _, c := range checks {
		if got, bad := failures[c.name]; bad {
			t.Errorf("%s: %s, want %g: the owners' figure over the range, as the GPUs' energy counters and the clock give it", c.name, got, c.want)
		}
	}
}

var promtoolGot = regexp.MustCompile(`got: (?:\[)?\{check="([^"]+)"\} ([^\s\]]+)`)

// runEnergyChecks evaluates each check's query over energyHistory at at with
// promtool's rule tests, and returns what promtool got for each check that
// failed (-1 where the query gave no series), in the check's unit.
func runEnergyChecks(t *testing.T, promtool string, at time.Duration, checks []energyCheck) map[string]string {
	t.Helper()
	var exprs []map[string]any
	for _, c := range checks {
		exprs = append(exprs, map[string]any{
			// A query that gives no series reads -1.
			// Compared in thousandths (mJ, ms), rounded.
			"expr":        fmt.Sprintf(`label_replace(round(sum(%s) * %g) or vector(-1), "check", %q, "", "")`, c.query, c.scale*1000, c.name),
			"eval_time":   at.String(),
			"exp_samples": []map[string]any{{"labels": fmt.Sprintf(`{check=%q}`, c.name), "value": math.Round(c.want * 1000)}},
		})
	}
	doc := map[string]any{
		"evaluation_interval": "1s",
		"tests":               []map[string]any{{"interval": "1s", "input_series": energyHistory(), "promql_expr_test": exprs}},
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "energy_test.yml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	failures := map[string]string{}
	if err == nil {
		return failures
	}
	for _, m := range promtoolGot.FindAllStringSubmatch(string(out), -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil && v != -1 {
			m[2] = strconv.FormatFloat(v/1000, 'g', -1, 64)
		}
		failures[m[1]] = m[2]
	}
	if len(failures) == 0 {
		t.Fatalf("promtool test rules %s: %v\n%s", file, err, out)
	}
	return failures
}
