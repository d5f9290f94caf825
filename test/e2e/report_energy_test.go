//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// Energy across the two bases (docs/reports.md, Invariants): each GPU's
// own energy counter (gpu_energy_joules_total) is the reference. On the
// counters basis an owner's energy on its GPUs is at most their counters'
// increase over the report's steps, plus what they draw in energySlack; an
// owner that holds its GPUs alone has their increase, within the same
// slack. On the gauges basis (--by=gpu) a GPU's energy is its power
// samples times the step, within the power's spread over the range (and a
// scrape at each end) of its counter's increase.

// energySlack is the time either way by which the owners' energy may
// differ from their GPUs' energy counters: the counters' totals are as of
// the last accounting tick before a scrape, the energy counter as of the
// scrape (one tick, demoPrometheus's --accounting.interval); a range's
// first step counts the owners' held time from the range's start, the
// energy counter from the sample before it (one scrape); one second more
// for a tick that a loaded machine runs late.
const energySlack = 3 * time.Second

// scrapeInterval is demoPrometheus's scrape interval.
const scrapeInterval = time.Second

// energyView says, for one --by, which of the accounting's series make a
// row's owner hold a GPU and whose a series is (the row's key).
type energyView struct {
	by string
	// key is the row's key of a series (empty: no owner of this view), and
	// whether the series makes that owner hold the GPU.
	key func(s map[string]string, alloc bool) (string, bool)
	// rowKey is the key of a report row.
	rowKey func(owner map[string]string) string
}

var energyViews = []energyView{
	{"job", func(s map[string]string, alloc bool) (string, bool) {
		return s["slurm_job"], alloc && s["slurm_job"] != ""
	},
		func(o map[string]string) string { return o["job_id"] }},
	{"pod", func(s map[string]string, alloc bool) (string, bool) {
		if s["pod"] == "" {
			return "", false
		}
		return s["namespace"] + "/" + s["pod"], alloc
	}, func(o map[string]string) string { return o["namespace"] + "/" + o["pod"] }},
	{"user", func(s map[string]string, alloc bool) (string, bool) {
		return s["user"], s["user"] != "" && (!alloc || s["slurm_job"] != "")
	}, func(o map[string]string) string { return o["user"] }},
	{"container", func(s map[string]string, alloc bool) (string, bool) {
		if s["container"] == "" || alloc {
			return "", false
		}
		return s["instance"] + "/" + s["container"], true
	}, func(o map[string]string) string { return o["instance"] + "/" + o["container"] }},
}

// promSeriesAt is every series of an instant query at ts, with its labels.
func promSeriesAt(t *testing.T, promURL, query string, ts time.Time) []map[string]string {
	t.Helper()
	u := promURL + "/api/v1/query?query=" + url.QueryEscape(query) + "&time=" + strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)
	resp, err := httpGetNoFail(u)
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp), &r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %s", query, resp)
	}
	out := make([]map[string]string, 0, len(r.Data.Result))
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out
}

// gpuEnergy is what the test reads of each GPU (by uuid) over a report's
// range: its energy counter's increase over the report's steps (J), and
// its lowest and highest power sample (W).
type gpuEnergy struct{ joules, minW, maxW float64 }

func gpuEnergies(t *testing.T, promURL string, from, to time.Time, step time.Duration) map[string]gpuEnergy {
	t.Helper()
	at := strconv.FormatFloat(float64(to.UnixMilli())/1000, 'f', 3, 64)
	rng := to.Sub(from)
	// The report's steps: (from, to] at multiples of step, each the
	// counter's increase since the step before, never extrapolated.
	steps := fmt.Sprintf("[%dms:%dms]", (rng - time.Millisecond).Milliseconds(), step.Milliseconds())
	off := fmt.Sprintf("%dms", step.Milliseconds())
	inc := "((gpu_energy_joules_total - gpu_energy_joules_total offset " + off + ") >= 0 or gpu_energy_joules_total * 1)"
	joules := promVectorAt(t, promURL, "sum by (uuid) (sum_over_time("+inc+steps+"))", at, "uuid")
	window := fmt.Sprintf("[%dms]", (rng + step + scrapeInterval).Milliseconds())
	maxW := promVectorAt(t, promURL, "max by (uuid) (max_over_time(gpu_power_usage_watts"+window+"))", at, "uuid")
	minW := promVectorAt(t, promURL, "min by (uuid) (min_over_time(gpu_power_usage_watts"+window+"))", at, "uuid")
	out := map[string]gpuEnergy{}
	for uuid, j := range joules {
		out[uuid] = gpuEnergy{joules: j, minW: minW[uuid], maxW: maxW[uuid]}
	}
	return out
}

// checkEnergyAcrossBases: over a range from the counters' first scrape and
// one that ends at settled, every owner's energy on the counters basis
// against its GPUs' energy counters, and every GPU's on the gauges basis.
func checkEnergyAcrossBases(t *testing.T, promURL string, first, settled time.Time) {
	t.Helper()
	type window struct {
		from, to time.Time
		step     time.Duration
	}
	// The demo's owners appear at gpuwatch's first tick and keep their
	// GPUs. A range from the counters' first scrape starts at each owner's
	// first sample; demoPrometheus begins scraping after the owners'
	// new-owner hold, so no range here starts inside one: the report's unit
	// tests check that case (internal/report, energy_test.go).
	start := first.Add(time.Second).Truncate(time.Second)
	windows := []window{
		{start, start.Add(20 * time.Second), time.Second},
		{settled.Add(-30 * time.Second), settled, 5 * time.Second},
	}
	for _, w := range windows {
		args := []string{"--prometheus.url=" + promURL, "--step=" + w.step.String(),
			"--from=" + strconv.FormatInt(w.from.Unix(), 10), "--to=" + strconv.FormatInt(w.to.Unix(), 10)}
		gpus := gpuEnergies(t, promURL, w.from, w.to, w.step)
		checkGaugesEnergy(t, args, w.to.Sub(w.from), w.step, gpus)
		rng := fmt.Sprintf("[%dms]", w.to.Sub(w.from).Milliseconds())
		allocs := promSeriesAt(t, promURL, "max_over_time(gpu_allocation_seconds_total"+rng+")", w.to)
		procs := promSeriesAt(t, promURL, "max_over_time(gpu_process_seconds_total"+rng+")", w.to)
		for _, v := range energyViews {
			what := fmt.Sprintf("range %s to %s (step %s) --by=%s", w.from.Format(time.TimeOnly), w.to.Format(time.TimeOnly), w.step, v.by)
			r, _ := reportJSONOf(t, append(args, "--by="+v.by)...)
			if r.Basis != "counters" {
				t.Errorf("%s: basis %q; the counters cover the range", what, r.Basis)
				continue
			}
			checkCountersEnergy(t, what, r, v, gpus, allocs, procs)
		}
	}
}

// checkCountersEnergy: each row's energy against the energy counters of
// the GPUs it held; where it held them alone, equal within energySlack,
// whether or not its processes ran there (an idle job's energy is its
// GPU's, its new-owner hold included).
func checkCountersEnergy(t *testing.T, what string, r invariantReport, v energyView, gpus map[string]gpuEnergy, allocs, procs []map[string]string) {
	t.Helper()
	held := map[string]map[string]bool{} // row key → uuids it held
	others := map[string]map[string]bool{}
	note := func(series []map[string]string, alloc bool) {
		for _, s := range series {
			key, holds := v.key(s, alloc)
			if holds {
				if held[key] == nil {
					held[key] = map[string]bool{}
				}
				held[key][s["uuid"]] = true
			}
			// Whose series are on the GPU: the row holds it alone where
			// every series on it is the row's.
			if others[s["uuid"]] == nil {
				others[s["uuid"]] = map[string]bool{}
			}
			others[s["uuid"]][key] = true
		}
	}
	note(allocs, true)
	note(procs, false)
	var viewGPUs = map[string]bool{}
	for _, row := range r.Rows {
		key := v.rowKey(row.Owner)
		if row.Energy == nil {
			continue
		}
		var counter, slack float64
		alone := len(held[key]) > 0
		var list []string
		for uuid := range held[key] {
			g, ok := gpus[uuid]
			if !ok {
				t.Fatalf("%s: no energy counter for GPU %s", what, uuid)
			}
			counter += g.joules
			slack += g.maxW * energySlack.Seconds()
			alone = alone && len(others[uuid]) == 1
			list = append(list, uuid)
			viewGPUs[uuid] = true
		}
		got := *row.Energy * 3.6e6
		if got > counter+slack {
			t.Errorf("%s: row %v: %.0f J on the counters basis, above its GPUs' energy counters' %.0f J (%d GPUs, slack %.0f J): time from before the range counted?",
				what, row.Owner, got, counter, len(list), slack)
		}
		if alone && got < counter-slack {
			t.Errorf("%s: row %v: %.0f J on the counters basis, but it held its %d GPUs alone and their energy counters rose %.0f J (slack %.0f J)",
				what, row.Owner, got, len(list), counter, slack)
		}
	}
	var counter, slack float64
	for uuid := range viewGPUs {
		counter += gpus[uuid].joules
		slack += gpus[uuid].maxW * energySlack.Seconds()
	}
	if got := val(r.Totals.Energy) * 3.6e6; got > counter+slack {
		t.Errorf("%s: the owners' %.0f J, above their %d GPUs' energy counters' %.0f J (slack %.0f J)", what, got, len(viewGPUs), counter, slack)
	}
}

// checkGaugesEnergy: --by=gpu (the gauges) against each GPU's energy
// counter. Each step's power sample lies between the GPU's lowest and
// highest draw, as does the counter's mean over that step; the samples'
// span may differ from the counter's by a scrape at each end.
func checkGaugesEnergy(t *testing.T, args []string, rng, step time.Duration, gpus map[string]gpuEnergy) {
	t.Helper()
	r, _ := reportJSONOf(t, append(args, "--by=gpu")...)
	if len(r.Rows) != len(gpus) {
		t.Errorf("--by=gpu %v: %d rows, %d GPUs with an energy counter", args, len(r.Rows), len(gpus))
	}
	for _, row := range r.Rows {
		g, ok := gpus[row.Owner["uuid"]]
		if !ok || row.Energy == nil {
			t.Errorf("--by=gpu %v: GPU %v: energy %s, counter present %v", args, row.Owner, fmtOpt(row.Energy), ok)
			continue
		}
		// Held for the whole range (the demo's owners never leave).
		got := *row.Energy * 3.6e6
		tol := (g.maxW-g.minW)*(rng+step).Seconds() + 2*g.maxW*scrapeInterval.Seconds()
		if d := got - g.joules; d > tol || -d > tol {
			t.Errorf("--by=gpu %v: GPU %s: %.0f J from the power samples, its energy counter %.0f J: %+.0f J, more than the power's spread allows (%.0f J)",
				strings.Join(args[1:], " "), row.Owner["gpu"], got, g.joules, d, tol)
		}
	}
}

// ownersHold is the new-owner hold of TestReportRangeInsideANewOwnersHold:
// long enough that a range can start well inside it.
const ownersHold = 12 * time.Second

// TestReportRangeInsideANewOwnersHold: a Prometheus that scrapes the demo
// from its first second stores the owners' counters at 0 through their
// new-owner hold, then their jump to everything since they appeared.
// Reports over ranges that start inside the hold keep every invariant
// (utilization at most 100 %, no more hours than the GPUs had) and count
// no energy from before the range: the jump's time before it is the
// range's start is not counted. An idle job (no process on its GPU) gets
// its GPU's energy through the part of its hold in the range, though its
// counters read 0 then.
func TestReportRangeInsideANewOwnersHold(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo and Prometheus; skipped with -short")
	}
	t.Parallel()
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	// Prometheus first, its target still down, so that it scrapes the
	// demo from its first second.
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs:\n      - targets: [%q]\n", addr))
	promURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	testenv.StartProcess(t, nil, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+strings.TrimPrefix(promURL, "http://"))
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape its (still absent) target", func() bool {
		return len(promVectorAt(t, promURL, `up{job="gpuwatch"}`, "", "job")) > 0
	})
	testenv.StartProcess(t, nil, gpuwatchBin, "--web.listen-address="+addr, "--backend=sim", "--sim.profile=dgx-h100",
		"--accounting.interval=1s", "--accounting.new-owner-hold="+ownersHold.String())
	var first time.Time
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape the demo", func() bool {
		v, ok := promQuery(t, promURL, `min(timestamp(gpu_up))`)
		first = time.UnixMilli(int64(v * 1000))
		return ok
	})
	// Job 4211's hold ends at its first energy sample above 0.
	var jump time.Time
	testenv.WaitFor(t, 2*ownersHold+time.Minute, "job 4211's counters to leave their hold", func() bool {
		v, ok := promQuery(t, promURL, `min(min_over_time(timestamp(gpu_process_energy_joules_total{slurm_job="4211"} > 0)[5m:1s]))`)
		jump = time.UnixMilli(int64(v * 1000))
		return ok
	})
	from := jump.Add(-ownersHold / 2).Truncate(time.Second)
	if !from.After(first) {
		t.Fatalf("the hold ended at %s, %s after Prometheus's first scrape of the demo (%s): no range starts inside it", jump, jump.Sub(first), first)
	}
	to := from.Add(20 * time.Second)
	time.Sleep(time.Until(to.Add(2 * time.Second)))
	for _, step := range []time.Duration{time.Second, 5 * time.Second} {
		args := []string{"--prometheus.url=" + promURL, "--step=" + step.String(),
			"--from=" + strconv.FormatInt(from.Unix(), 10), "--to=" + strconv.FormatInt(to.Unix(), 10)}
		gpus := gpuEnergies(t, promURL, from, to, step)
		rng := fmt.Sprintf("[%dms]", to.Sub(from).Milliseconds())
		allocs := promSeriesAt(t, promURL, "max_over_time(gpu_allocation_seconds_total"+rng+")", to)
		procs := promSeriesAt(t, promURL, "max_over_time(gpu_process_seconds_total"+rng+")", to)
		for _, v := range energyViews {
			what := fmt.Sprintf("%s into the hold (%s to %s, step %s) --by=%s", from.Sub(jump.Add(-ownersHold)).Round(time.Second),
				from.Format(time.TimeOnly), to.Format(time.TimeOnly), step, v.by)
			r, _ := reportJSONOf(t, append(args, "--by="+v.by)...)
			checkInvariants(t, what, r)
			if r.Basis != "counters" {
				t.Errorf("%s: basis %q; the counters cover the range", what, r.Basis)
				continue
			}
			checkCountersEnergy(t, what, r, v, gpus, allocs, procs)
		}
	}
}
