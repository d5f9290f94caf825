//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The invariants docs/reports.md promises a reader, checked as properties
// of many windows over a real Prometheus that scraped the demo (8 GPUs, with
// Slurm jobs, an idle job, pods, a GPU shared by two users, a MIG GPU): every
// --by, the JSON field by field.

// invariantRow is a row (or the totals) of the JSON report.
type invariantRow struct {
	Owner      map[string]string `json:"owner"`
	Allocated  float64           `json:"allocated_gpu_hours"`
	Unmeasured float64           `json:"unmeasured_gpu_hours"`
	Used       *float64          `json:"used_gpu_hours"`
	Mean       *float64          `json:"mean_utilization_per_gpu"`
	P95        *float64          `json:"p95_utilization_per_gpu"`
	Energy     *float64          `json:"energy_kwh_summed"`
	Idle       float64           `json:"idle_allocated_gpu_hours"`
	PeakMem    *float64          `json:"peak_memory_bytes_summed"`
	MeanMem    *float64          `json:"mean_memory_bytes_summed"`
}

type invariantReport struct {
	From   time.Time      `json:"from"`
	To     time.Time      `json:"to"`
	Step   string         `json:"step"`
	Basis  string         `json:"basis"`
	Hours  string         `json:"hours_meaning"`
	Rows   []invariantRow `json:"rows"`
	Totals invariantRow   `json:"totals"`
	Fleet  struct {
		GPUs   int      `json:"gpus"`
		Energy *float64 `json:"energy_kwh_summed"`
	} `json:"fleet"`
}

// ruleEvaluation is the evaluation interval of the shipped recording rules
// in demoPrometheus: the resolution of their gpu_hours subqueries, coarse
// enough that hour-long subqueries cost the server little.
const ruleEvaluation = 5 * time.Second

// demoPrometheus starts the demo with a fast accounting tick and a short
// new-owner hold, and a Prometheus scraping it every second with the
// shipped recording rules; it returns Prometheus' URL and the two
// processes, gpuwatch first.
func demoPrometheus(t testing.TB) (string, []*testenv.Process) {
	t.Helper()
	promBin := testenv.RequireTool(t, "prometheus", "prometheus")
	base, demo := testenv.StartGpuwatch(t, nil, gpuwatchBin, "--backend=sim", "--sim.profile=dgx-h100", "--accounting.interval=1s", "--accounting.new-owner-hold=3s")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "recording.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("global: {scrape_interval: %s, scrape_timeout: 900ms, evaluation_interval: %s}\nrule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: gpuwatch\n    static_configs:\n      - targets: [%q]\n",
		scrapeInterval, ruleEvaluation, rules, strings.TrimPrefix(base, "http://"))
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	prom := testenv.StartProcess(t, nil, promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr)
	return "http://" + addr, []*testenv.Process{demo, prom}
}

// firstScrape waits for the Prometheus at url to scrape the demo and
// returns the time of its first scrape.
func firstScrape(t *testing.T, url string) time.Time {
	t.Helper()
	var first time.Time
	testenv.WaitFor(t, 60*time.Second, "Prometheus to scrape the demo", func() bool {
		v, ok := promQuery(t, url, `min(timestamp(gpu_up))`)
		if ok {
			first = time.Unix(int64(v), 0)
		}
		return ok
	})
	return first
}

func reportJSONOf(t *testing.T, args ...string) (invariantReport, string) {
	t.Helper()
	out, code := runReport(t, append(args, "--format=json")...)
	var r invariantReport
	if code != 0 {
		t.Fatalf("report %v exited %d:\n%s", args, code, out)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report %v: %v\n%s", args, err, out)
	}
	return r, out
}

// sumsEqual compares sums of float64 figures: equal up to rounding.
func sumsEqual(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func fmtOpt(p *float64) string {
	if p == nil {
		return "absent"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func val(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// checkInvariants checks one report's own invariants and returns what it
// says of itself for the cross-view checks.
func checkInvariants(t *testing.T, what string, r invariantReport) {
	t.Helper()
	const eps = 1e-9
	var sum invariantRow
	var sumUsed, sumEnergy float64
	for _, row := range r.Rows {
		who := fmt.Sprintf("%s: row %v", what, row.Owner)
		for name, p := range map[string]*float64{"mean": row.Mean, "p95": row.P95} {
			if p != nil && (*p < 0 || *p > 1+eps) {
				t.Errorf("%s: %s utilization per GPU %g, outside [0, 100 %%]", who, name, *p)
			}
		}
		// The mean and the p95 come from one basis: both or neither. (The
		// p95 may lie below the mean: docs/reports.md, Invariants.)
		if (row.Mean == nil) != (row.P95 == nil) {
			t.Errorf("%s: mean utilization %v, p95 %v: one shown without the other", who, fmtOpt(row.Mean), fmtOpt(row.P95))
		}
		if row.PeakMem != nil && row.MeanMem != nil && *row.MeanMem > *row.PeakMem*(1+eps) {
			t.Errorf("%s: mean memory %g bytes above the peak %g", who, *row.MeanMem, *row.PeakMem)
		}
		if row.Allocated < 0 || row.Idle < 0 || row.Unmeasured < 0 || val(row.Used) < 0 || val(row.Energy) < 0 {
			t.Errorf("%s: a negative figure: %+v", who, row)
		}
		if val(row.Used) > row.Allocated+eps || row.Idle > row.Allocated+eps || row.Unmeasured > row.Allocated+eps {
			t.Errorf("%s: used %g, idle %g or unmeasured %g GPU-h above the %g allocated", who, val(row.Used), row.Idle, row.Unmeasured, row.Allocated)
		}
		sum.Allocated += row.Allocated
		sum.Idle += row.Idle
		sum.Unmeasured += row.Unmeasured
		sumUsed += val(row.Used)
		sumEnergy += val(row.Energy)
	}
	for name, pair := range map[string][2]float64{
		"allocated": {sum.Allocated, r.Totals.Allocated}, "idle-allocated": {sum.Idle, r.Totals.Idle},
		"no util reading": {sum.Unmeasured, r.Totals.Unmeasured}, "used": {sumUsed, val(r.Totals.Used)}, "energy": {sumEnergy, val(r.Totals.Energy)},
	} {
		if !sumsEqual(pair[0], pair[1]) {
			t.Errorf("%s: the rows' %s add up to %g, the totals row says %g", what, name, pair[0], pair[1])
		}
	}
	step, err := time.ParseDuration(r.Step)
	if err != nil {
		t.Fatalf("%s: step %q: %v", what, r.Step, err)
	}
	// The range is a whole number of steps in every window below, so the
	// fleet holds at most GPUs × range.
	rng := r.To.Sub(r.From)
	if rng%step == 0 {
		if bound := float64(r.Fleet.GPUs) * rng.Hours(); r.Totals.Allocated > bound+eps {
			t.Errorf("%s: %g GPU-h allocated, more than %d GPUs × %s = %g", what, r.Totals.Allocated, r.Fleet.GPUs, rng, bound)
		}
	} else if bound := float64(r.Fleet.GPUs) * (rng + step).Hours(); r.Totals.Allocated > bound+eps {
		t.Errorf("%s: %g GPU-h allocated, more than %d GPUs × (%s + one step) = %g", what, r.Totals.Allocated, r.Fleet.GPUs, rng, bound)
	}
	if r.Fleet.Energy != nil && r.Totals.Energy != nil && *r.Totals.Energy > *r.Fleet.Energy*(1+1e-6)+eps {
		t.Errorf("%s: the owners' energy %g kWh is above the fleet's %g", what, *r.Totals.Energy, *r.Fleet.Energy)
	}
	if r.Hours == "" {
		t.Errorf("%s: no line says what the hours mean", what)
	}
}

var allBy = []string{"user", "job", "account", "partition", "pod", "namespace", "container", "compose_service", "node", "gpu"}

// partitions are views that divide the same hours: their totals are equal.
var partitions = [][]string{{"gpu", "node"}, {"job", "account", "partition"}, {"pod", "namespace"}}

// hourRules are the shipped gpu_hours recording rules that mean what a
// report view means, with the label that names a row in both.
var hourRules = []struct{ rule, by, key string }{
	{"namespace_pod:gpu_hours:1h", "pod", "pod"},
	{"namespace:gpu_hours:1h", "namespace", "namespace"},
	{"slurm_job:gpu_hours:1h", "job", "job_id"},
	{"slurm_account:gpu_hours:1h", "account", "account"},
	{"instance_container:gpu_hours:1h", "container", "container"},
}

// checkRulesAgree: the shipped gpu_hours recording rules give each owner
// the hours the report's view gives it, on both of the report's bases.
// A rule at its evaluation time E holds the hour's evaluation steps
// before E, over the engine's count of steps in an hour; over a range
// that starts before any data the report (gauges basis) counts the same
// steps, and over (E0, E], later than the counters' start, the report
// (counters basis) counts the seconds that rule(E) - rule(E0) counts in
// steps.
func checkRulesAgree(t *testing.T, url string, first time.Time) {
	t.Helper()
	stepsPerHour := float64(time.Hour / ruleEvaluation)
	unix := func(ts float64) string { return strconv.FormatFloat(ts, 'f', 3, 64) }
	for _, hr := range hourRules {
		// An evaluation late enough that one 30 s before it follows the
		// counters' first seconds (below).
		var evalAt float64
		testenv.WaitFor(t, 60*time.Second, hr.rule+" evaluated 40 s after the first scrape", func() bool {
			var ok bool
			evalAt, ok = promQuery(t, url, "max(timestamp("+hr.rule+"))")
			return ok && evalAt >= float64(first.Add(40*time.Second).Unix())
		})
		steps := func(at float64) map[string]float64 {
			inHour := promVectorAt(t, url, "count_over_time(vector(1)[1h:"+ruleEvaluation.String()+"])", unix(at), "")[""]
			out := promVectorAt(t, url, hr.rule, unix(at), hr.key)
			for k, v := range out {
				out[k] = v * inHour
			}
			return out
		}
		ruleSteps := steps(evalAt)
		end := time.UnixMilli(int64(evalAt * 1000)).UTC()
		args := []string{"--prometheus.url=" + url, "--by=" + hr.by, "--step=" + ruleEvaluation.String(), "--to=" + end.Format(time.RFC3339Nano)}
		gauges, _ := reportJSONOf(t, append(args, "--from="+first.Add(-10*time.Second).Format(time.RFC3339Nano))...)
		if gauges.Basis != "gauges" {
			t.Errorf("--by=%s from before any data: basis %q, want the gauges", hr.by, gauges.Basis)
		}
		for _, row := range gauges.Rows {
			// The report and the rule read the same samples at the same
			// steps; one step may differ where a scrape landed between.
			if got, want := row.Allocated*stepsPerHour, ruleSteps[row.Owner[hr.key]]; math.Abs(got-want) > 1+1e-6 {
				t.Errorf("--by=%s %s: the report (gauges) counts %g steps held, %s %g", hr.by, row.Owner[hr.key], got, hr.rule, want)
			}
		}
		if len(gauges.Rows) != len(ruleSteps) {
			t.Errorf("--by=%s: %d rows, %s %d owners", hr.by, len(gauges.Rows), hr.rule, len(ruleSteps))
		}
		// An evaluation 30 s earlier, well after the counters began.
		startAt, ok := promVectorAt(t, url, "max(timestamp("+hr.rule+"))", unix(evalAt-30), "")[""]
		if !ok || time.UnixMilli(int64(startAt*1000)).Before(first.Add(10*time.Second)) {
			t.Fatalf("%s: no evaluation 30 s before %s, after the counters began (%v, %v)", hr.rule, end, startAt, ok)
		}
		before := steps(startAt)
		start := time.UnixMilli(int64(startAt * 1000)).UTC()
		counters, _ := reportJSONOf(t, append(args, "--from="+start.Format(time.RFC3339Nano))...)
		if counters.Basis != "counters" {
			t.Errorf("--by=%s from %s: basis %q, want the counters", hr.by, start, counters.Basis)
		}
		window := end.Sub(start).Hours()
		for _, row := range counters.Rows {
			key := row.Owner[hr.key]
			want := (ruleSteps[key] - before[key]) / stepsPerHour
			// The counters count seconds, the rule steps: at each end of
			// the range a GPU may differ by a step and a scrape.
			gpus := math.Ceil(row.Allocated/window + 0.5)
			if tol := gpus * 2 * (ruleEvaluation + time.Second).Hours(); math.Abs(row.Allocated-want) > tol {
				t.Errorf("--by=%s %s: the report (counters) %g GPU-h, %s %g over the same range (tolerance %g)", hr.by, key, row.Allocated, hr.rule, want, tol)
			}
		}
	}
}

// checkOneMeaningPerOwner: --by=user counts alice's idle Slurm job (GPU 5)
// as hers, like --by=job; GPU 6, which carol and dave share, is split
// between them by SM share (carol 35 %, dave 2 %), not counted whole for
// each; the energy is split the same way.
func checkOneMeaningPerOwner(t *testing.T, url string, to time.Time) {
	t.Helper()
	from := to.Add(-20 * time.Second)
	args := []string{"--prometheus.url=" + url, "--step=1s", "--from=" + strconv.FormatInt(from.Unix(), 10), "--to=" + strconv.FormatInt(to.Unix(), 10)}
	byUser, _ := reportJSONOf(t, append(args, "--by=user")...)
	byJob, _ := reportJSONOf(t, append(args, "--by=job")...)
	byGPU, _ := reportJSONOf(t, append(args, "--by=gpu")...)
	rowOf := func(r invariantReport, label, value string) invariantRow {
		for _, row := range r.Rows {
			if row.Owner[label] == value {
				return row
			}
		}
		t.Fatalf("no row with %s=%s in %+v", label, value, r.Rows)
		return invariantRow{}
	}
	alice := rowOf(byUser, "user", "alice")
	var aliceJobs, aliceJobsIdle float64
	for _, row := range byJob.Rows {
		if row.Owner["user"] == "alice" {
			aliceJobs += row.Allocated
			aliceJobsIdle += row.Idle
		}
	}
	if !sumsEqual(alice.Allocated, aliceJobs) || !sumsEqual(alice.Idle, aliceJobsIdle) || alice.Idle == 0 {
		t.Errorf("--by=user alice: %g GPU-h, %g idle-allocated; her jobs in --by=job: %g, %g (the idle job 4225 included)", alice.Allocated, alice.Idle, aliceJobs, aliceJobsIdle)
	}
	carol, dave := rowOf(byUser, "user", "carol"), rowOf(byUser, "user", "dave")
	gpu6 := rowOf(byGPU, "gpu", "6")
	// One second of the window may fall to one side of a tick.
	tol := 1.5 / 3600
	if math.Abs(carol.Allocated+dave.Allocated-gpu6.Allocated) > tol {
		t.Errorf("GPU 6: carol %g + dave %g GPU-h, the GPU held %g: shared, it is split, not counted whole for each", carol.Allocated, dave.Allocated, gpu6.Allocated)
	}
	if share := dave.Allocated / (carol.Allocated + dave.Allocated); share < 0.02 || share > 0.1 {
		t.Errorf("GPU 6: dave's share of the hours %.3f, want his SM share 2/37 = 0.054", share)
	}
	if carol.Energy == nil || dave.Energy == nil {
		t.Fatalf("GPU 6: energy carol %v dave %v", carol.Energy, dave.Energy)
	}
	hoursShare, energyShare := dave.Allocated/carol.Allocated, *dave.Energy / *carol.Energy
	if math.Abs(hoursShare-energyShare) > 0.3*hoursShare {
		t.Errorf("GPU 6: dave/carol is %.3f of the hours and %.3f of the energy: both are split by SM share", hoursShare, energyShare)
	}
	if byUser.Totals.Allocated > byGPU.Totals.Allocated+8*tol {
		t.Errorf("--by=user sums to %g GPU-h, more than the GPUs held (%g)", byUser.Totals.Allocated, byGPU.Totals.Allocated)
	}
}

var markdownCell = regexp.MustCompile(`\*\*([0-9.]+)\*\*`)

// checkPrintedFiguresAddUp: in the table people read, a short range is in
// GPU-minutes with digits enough, every summed column's printed rows add up
// to its printed total, and the HTML bars are drawn from their labels.
func checkPrintedFiguresAddUp(t *testing.T, url string, to time.Time) {
	t.Helper()
	from := to.Add(-30 * time.Second)
	for _, by := range []string{"user", "gpu", "job"} {
		out, code := runReport(t, "--prometheus.url="+url, "--by="+by, "--step=5s", "--format=markdown",
			"--from="+strconv.FormatInt(from.Unix(), 10), "--to="+strconv.FormatInt(to.Unix(), 10))
		if code != 0 {
			t.Fatalf("--by=%s: exit %d\n%s", by, code, out)
		}
		var header []string
		var rows [][]string
		var total []string
		for line := range strings.SplitSeq(out, "\n") {
			if !strings.HasPrefix(line, "| ") {
				continue
			}
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			switch {
			case header == nil:
				header = cells
			case strings.Contains(line, "**TOTAL**"):
				total = cells
			default:
				rows = append(rows, cells)
			}
		}
		if total == nil || len(rows) == 0 {
			t.Fatalf("--by=%s: no table:\n%s", by, out)
		}
		for i, title := range header {
			summed := strings.HasPrefix(title, "GPU-min ") || strings.HasPrefix(title, "energy ")
			if strings.HasPrefix(title, "GPU-h ") {
				t.Errorf("--by=%s: a 30 s report in GPU-hours (%q):\n%s", by, title, out)
			}
			if !summed {
				continue
			}
			m := markdownCell.FindStringSubmatch(total[i])
			if m == nil {
				t.Errorf("--by=%s: %s total %q", by, title, total[i])
				continue
			}
			decimals := len(m[1]) - strings.Index(m[1], ".") - 1
			var sum float64
			for _, row := range rows {
				if v, err := strconv.ParseFloat(row[i], 64); err == nil {
					sum += v
				}
			}
			if printed := strconv.FormatFloat(sum, 'f', decimals, 64); printed != m[1] {
				t.Errorf("--by=%s: %s rows add up to %s, the total says %s:\n%s", by, title, printed, m[1], out)
			}
			if want, _ := strconv.ParseFloat(m[1], 64); strings.HasSuffix(title, " allocated") && want > 0 && len(strings.TrimLeft(strings.ReplaceAll(m[1], ".", ""), "0")) < 3 {
				t.Errorf("--by=%s: %s total %s shows fewer than 3 significant digits", by, title, m[1])
			}
		}
	}
	page, code := runReport(t, "--prometheus.url="+url, "--by=user", "--step=5s", "--format=html",
		"--from="+strconv.FormatInt(from.Unix(), 10), "--to="+strconv.FormatInt(to.Unix(), 10))
	if code != 0 {
		t.Fatalf("html: exit %d\n%s", code, page)
	}
	checkBarsMatchLabels(t, page)
}

var svgBar = regexp.MustCompile(`<rect class="alloc" x="310" y="4" width="([0-9.e+-]+)"[^>]*>.*?</rect>\s*<rect class="used" x="310" y="4" width="([0-9.e+-]+)"[^>]*>.*?</rect>\s*<text[^>]*>([0-9.]+|n/a) / ([0-9.]+)</text>`)

// checkBarsMatchLabels: each bar's used/allocated widths are in the ratio
// of the figures its label prints, and the longest bar is the largest figure.
func checkBarsMatchLabels(t *testing.T, page string) {
	t.Helper()
	bars := svgBar.FindAllStringSubmatch(page, -1)
	if len(bars) == 0 {
		t.Fatalf("html: no bars:\n%s", page)
	}
	var longestW, longestV float64
	for _, b := range bars {
		allocW, _ := strconv.ParseFloat(b[1], 64)
		usedW, _ := strconv.ParseFloat(b[2], 64)
		used, _ := strconv.ParseFloat(b[3], 64)
		alloc, _ := strconv.ParseFloat(b[4], 64)
		if allocW > 0 && math.Abs(usedW/allocW-used/alloc) > 1e-6 {
			t.Errorf("html: a bar labelled %s / %s is drawn at %.1f %%", b[3], b[4], 100*usedW/allocW)
		}
		if allocW > longestW {
			longestW, longestV = allocW, alloc
		}
	}
	for _, b := range bars {
		allocW, _ := strconv.ParseFloat(b[1], 64)
		alloc, _ := strconv.ParseFloat(b[4], 64)
		if math.Abs(allocW/longestW-alloc/longestV) > 1e-6 {
			t.Errorf("html: a bar of %s is drawn at %.3f of the longest (%g)", b[4], allocW/longestW, longestV)
		}
	}
}
