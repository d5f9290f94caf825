//go:build linux

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The windows TestReportInvariants checks the report's invariants over
// (report_invariants_test.go).

// invariantHistory is how much of the demo's history the checks read:
// long enough for windows of many lengths, and for checkRulesAgree's two
// evaluations 30 s apart after the counters' first seconds.
const invariantHistory = 40 * time.Second

// settleTime is how long after a moment its samples are all in
// Prometheus: the last accounting tick before a scrape, the scrape, and a
// margin for a loaded machine.
const settleTime = 3 * time.Second

// randomWindows is how many windows of random start, length and step
// TestReportInvariants draws beside its named edge cases.
const randomWindows = 2

// invariantSeed is the seed of TestReportInvariants' random windows:
// $GPUWATCH_REPORT_SEED when set (to draw a failed run's windows again),
// else the clock's.
func invariantSeed(t *testing.T) uint64 {
	t.Helper()
	if env := os.Getenv("GPUWATCH_REPORT_SEED"); env != "" {
		seed, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("GPUWATCH_REPORT_SEED=%s: want an unsigned integer", env)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

type invariantWindow struct {
	name     string
	from, to time.Time
	step     time.Duration
}

// invariantWindows are the edge cases, a window that starts before any
// data and one inside the counters' first seconds, and the random windows
// from seed, which lie wholly before first+invariantHistory-settleTime
// and partly after first (one wholly before the data is an error). The
// windows depend on first and seed alone, so a seed draws them again
// relative to a new first scrape. Sorted by their end.
func invariantWindows(first time.Time, seed uint64) []invariantWindow {
	rng := rand.New(rand.NewPCG(seed, 0))
	windows := []invariantWindow{
		{"before any data", first.Add(-20 * time.Second).Truncate(time.Second), first.Add(10 * time.Second).Truncate(time.Second), time.Second},
		{"inside the counters' first seconds", first.Add(2 * time.Second).Truncate(time.Second), first.Add(22 * time.Second).Truncate(time.Second), 2 * time.Second},
	}
	end := first.Add(invariantHistory - settleTime)
	for i := range randomWindows {
		step := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}[rng.IntN(3)]
		steps := 2 + rng.IntN(8)
		length := time.Duration(steps) * step
		latest := end.Add(-length)
		earliest := first.Add(-length / 2)
		from := earliest.Add(time.Duration(rng.Int64N(int64(latest.Sub(earliest)) + 1))).Truncate(time.Second)
		windows = append(windows, invariantWindow{fmt.Sprintf("random %d", i), from, from.Add(length), step})
	}
	slices.SortStableFunc(windows, func(a, b invariantWindow) int { return a.to.Compare(b.to) })
	return windows
}

// TestReportInvariants: windows of random starts and lengths over the
// demo's history, including one that starts before any data, one that
// starts inside the counters' first minute and one that ends now, at every
// --by. Each window is checked once its data has settled, while the rest
// of the history accumulates. Its file sorts after the other report
// tests', so that in a run of the package the shared demo, started by
// TestREADMEQueriesAgainstTheDemo, has gathered its history meanwhile.
func TestReportInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo and Prometheus; skipped with -short")
	}
	seed := invariantSeed(t)
	url, first := sharedDemoPrometheus(t)
	// The last test of the package that reads the demo.
	t.Cleanup(stopSharedDemo)
	windows := invariantWindows(first, seed)
	t.Logf("random windows from seed %d (GPUWATCH_REPORT_SEED=%d draws them again)", seed, seed)
	for _, w := range windows {
		t.Logf("%s: first scrape %+v to %+v, step %s", w.name, w.from.Sub(first), w.to.Sub(first), w.step)
	}
	for _, w := range windows {
		time.Sleep(time.Until(w.to.Add(settleTime)))
		checkWindow(t, url, w)
	}
	// The end of the history the checks below read, like the random
	// windows' latest: fixed from the first scrape, so that however long
	// the shared demo has run, its data has settled before they read it.
	settled := first.Add(invariantHistory - settleTime).Truncate(time.Second)
	time.Sleep(time.Until(first.Add(invariantHistory)))
	// Ending now, with --last, at the default step and a short one: every
	// --by at one of them, in turn.
	lasts := [][]string{{"--last=30s", "--step=5s"}, {"--last=20s", "--step=1s"}}
	for i, by := range allBy {
		args := lasts[i%len(lasts)]
		r, _ := reportJSONOf(t, append([]string{"--prometheus.url=" + url, "--by=" + by}, args...)...)
		checkInvariants(t, fmt.Sprintf("%v --by=%s", args, by), r)
	}
	checkOneMeaningPerOwner(t, url, settled)
	checkPrintedFiguresAddUp(t, url, settled)
	checkRulesAgree(t, url, first)
	checkEnergyAcrossBases(t, url, first, settled)
}

// checkWindow checks every --by's report over w, and that the views which
// divide the same hours agree on their totals.
func checkWindow(t *testing.T, url string, w invariantWindow) {
	t.Helper()
	totals := map[string]invariantReport{}
	for _, by := range allBy {
		what := fmt.Sprintf("%s (%s to %s, step %s) --by=%s", w.name, w.from.Format(time.TimeOnly), w.to.Format(time.TimeOnly), w.step, by)
		r, _ := reportJSONOf(t, "--prometheus.url="+url, "--by="+by, "--step="+w.step.String(),
			"--from="+strconv.FormatInt(w.from.Unix(), 10), "--to="+strconv.FormatInt(w.to.Unix(), 10))
		checkInvariants(t, what, r)
		totals[by] = r
	}
	for _, views := range partitions {
		a := totals[views[0]]
		for _, other := range views[1:] {
			b := totals[other]
			if a.Basis != b.Basis {
				t.Errorf("%s: --by=%s on the %s basis, --by=%s on the %s", w.name, views[0], a.Basis, other, b.Basis)
			}
			for name, pair := range map[string][2]float64{
				"allocated": {a.Totals.Allocated, b.Totals.Allocated}, "used": {val(a.Totals.Used), val(b.Totals.Used)},
				"idle-allocated": {a.Totals.Idle, b.Totals.Idle}, "no util reading": {a.Totals.Unmeasured, b.Totals.Unmeasured},
				"energy": {val(a.Totals.Energy), val(b.Totals.Energy)},
			} {
				if !sumsEqual(pair[0], pair[1]) {
					t.Errorf("%s: --by=%s totals %g %s, --by=%s %g: they divide the same hours", w.name, views[0], pair[0], name, other, pair[1])
				}
			}
		}
	}
}
