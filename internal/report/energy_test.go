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
// owner that appears at time 0 and reads 0 through a new-owner hold (as
// gpuwatch's accounting counters do), then shows everything since.
type energyGPU struct {
	uuid, gpu string
	watts, sm float64
	// owner are the labels of the owner's process and allocation series.
	owner string
}

// newOwnerHold is the hold of the synthetic owners: gpuwatch's default.
const newOwnerHold = 60

var energyGPUs = []energyGPU{
	{uuid: "GPU-A", gpu: "0", watts: 600, sm: 0.8, owner: `user="alice",slurm_job="7",pod="",namespace="",container="",compose_project="",compose_service="",mig_uuid=""`},
	{uuid: "GPU-B", gpu: "1", watts: 300, sm: 0.5, owner: `user="bob",slurm_job="",pod="p",namespace="n",container="c",compose_project="",compose_service="",mig_uuid=""`},
}

// energyHistory is the promtool input: per GPU its energy counter, the
// accounting's idle energy (none: the GPU is held throughout) and the
// owner's counters, one sample a second.
func energyHistory() []map[string]string {
	const end = 180
	// counter is 0 through the hold, then rate per second since time 0.
	counter := func(rate float64) string {
		return fmt.Sprintf("0x%d %g+%gx%d", newOwnerHold-1, rate*newOwnerHold, rate, end-newOwnerHold)
	}
	var in []map[string]string
	add := func(series, values string) { in = append(in, map[string]string{"series": series, "values": values}) }
	for _, g := range energyGPUs {
		dev := fmt.Sprintf(`instance="n1",gpu=%q,uuid=%q`, g.gpu, g.uuid)
		add("gpu_energy_joules_total{"+dev+"}", fmt.Sprintf("1000000+%gx%d", g.watts, end))
		add("gpu_idle_energy_joules_total{"+dev+"}", fmt.Sprintf("0x%d", end))
		own := "{" + dev + "," + g.owner + "}"
		add("gpu_process_seconds_total"+own, counter(1))
		add("gpu_process_sm_seconds_total"+own, counter(g.sm))
		add("gpu_process_energy_joules_total"+own, counter(g.watts))
		// Each owner is an allocation too: a Slurm job, a pod.
		add("gpu_allocation_seconds_total"+own, counter(1))
		add("gpu_allocation_idle_seconds_total"+own, fmt.Sprintf("0x%d", end))
		if strings.Contains(g.owner, `slurm_job="7"`) {
			add(`gpu_slurm_job_info{`+dev+`,job_id="7",user="alice",account="acct",partition="gpu"}`, fmt.Sprintf("1x%d", end))
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
			var watts, held, used float64
			for _, g := range energyGPUs {
				job := strings.Contains(g.owner, `slurm_job="7"`)
				pod := strings.Contains(g.owner, `pod="p"`)
				if (by == "job" || by == "account") && !job || (by == "pod" || by == "namespace" || by == "container") && !pod {
					continue
				}
				watts += g.watts
				held += heldSpan
				used += g.sm * heldSpan
			}
			name := fmt.Sprintf("from %s step %s --by=%s", w.from, w.step, by)
			checks = append(checks,
				energyCheck{name + " energy J", cs.energy, 3.6e6, watts * span},
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
