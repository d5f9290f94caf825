//go:build cgo

package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// summarize sets out what the reads say about the driver: its sample
// period per process, samples per process per read, the buffer's reach,
// and, per window, which account of the incremental history the answer
// matches.
func summarize(incremental []sample, windows []window, clockAhead time.Duration, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "samplesprobe: GPU %d for %s; incremental reads every %s, depth reads every %s\n", o.device, o.duration, o.poll, o.depthEvery)
	fmt.Fprintf(&b, "driver clock: sample times up to %s ahead of the wall clock at their read (negative: behind)\n", clockAhead.Round(time.Millisecond))
	byPID := historyByPID(incremental)
	period := summarizePeriods(&b, byPID)
	summarizeCounts(&b, incremental, windows)
	summarizeBuffer(&b, windows)
	start := historyStart(incremental)
	summarizeWindows(&b, windows, byPID, period, start)
	summarizeReach(&b, windows, byPID, period, start, o.depths)
	return b.String()
}

// historyByPID is each process's incremental samples in time order, one
// per sample time.
func historyByPID(incremental []sample) map[uint32][]sample {
	out := map[uint32][]sample{}
	for _, s := range incremental {
		out[s.pid] = append(out[s.pid], s)
	}
	for pid, h := range out {
		slices.SortFunc(h, func(a, b sample) int { return cmp.Compare(a.micros, b.micros) })
		out[pid] = slices.CompactFunc(h, func(a, b sample) bool { return a.micros == b.micros })
	}
	return out
}

// summarizePeriods prints each process's gaps between sample times and
// returns their median over every process (0: too few samples).
func summarizePeriods(b *strings.Builder, byPID map[uint32][]sample) time.Duration {
	fmt.Fprintf(b, "\nprocesses sampled: %d\n", len(byPID))
	var all []float64
	for _, pid := range sortedPIDs(byPID) {
		h := byPID[pid]
		var gaps []float64
		var sum float64
		for i, s := range h {
			sum += float64(s.sm)
			if i > 0 {
				gaps = append(gaps, float64(s.micros-h[i-1].micros)/1e3)
			}
		}
		all = append(all, gaps...)
		fmt.Fprintf(b, "  pid %d: %d samples, mean SM %.1f %%", pid, len(h), sum/float64(len(h)))
		if len(gaps) > 0 {
			fmt.Fprintf(b, "; gaps between sample times: median %.0f ms (p10 %.0f, p90 %.0f)", quantile(gaps, 0.5), quantile(gaps, 0.1), quantile(gaps, 0.9))
		}
		b.WriteString("\n")
	}
	if len(all) == 0 {
		return 0
	}
	median := quantile(all, 0.5)
	fmt.Fprintf(b, "  all processes: median gap %.0f ms: the driver's sample period per process\n", median)
	return time.Duration(median * float64(time.Millisecond))
}

// summarizeCounts prints the most samples one read gave one process.
func summarizeCounts(b *strings.Builder, incremental []sample, windows []window) {
	type key struct {
		read uint64
		pid  uint32
	}
	most := func(samples []sample) int {
		n := map[key]int{}
		best := 0
		for _, s := range samples {
			k := key{s.readMicros, s.pid}
			n[k]++
			best = max(best, n[k])
		}
		return best
	}
	var deep []sample
	for _, w := range windows {
		deep = append(deep, w.samples...)
	}
	fmt.Fprintf(b, "\nsamples per process per read: at most %d in the incremental reads, %d in the depth reads\n", most(incremental), most(deep))
	b.WriteString("  (1: one sample per process per read; more: every sample newer than lastSeenTimeStamp)\n")
}

// historyStart is the time of the first incremental sample: windows that
// reach back before it cannot be set against the history.
func historyStart(incremental []sample) uint64 {
	if len(incremental) == 0 {
		return math.MaxUint64
	}
	start := incremental[0].micros
	for _, s := range incremental {
		start = min(start, s.micros)
	}
	return start
}

// summarizeBuffer prints how old the oldest sample of a read with
// lastSeenTimeStamp 0 was: how far back the driver's buffer reaches when
// it gives every sample (with one sample per process, the time is the
// newest period's, and summarizeReach tells the reach from the values).
func summarizeBuffer(b *strings.Builder, windows []window) {
	var ages []float64
	for _, w := range windows {
		if w.depth != 0 || len(w.samples) == 0 {
			continue
		}
		oldest := w.samples[0].micros
		for _, s := range w.samples {
			oldest = min(oldest, s.micros)
		}
		ages = append(ages, (float64(w.now)-float64(oldest))/1e6)
	}
	if len(ages) == 0 {
		b.WriteString("\nbuffer: no read with lastSeenTimeStamp 0 gave a sample\n")
		return
	}
	fmt.Fprintf(b, "\nbuffer: the oldest sample of a read with lastSeenTimeStamp 0 was %.1f s old (median of %d reads; at most %.1f s)\n",
		quantile(ages, 0.5), len(ages), slices.Max(ages))
}

// windowFit is how one window's answers compare with three accounts of
// the incremental samples in the window, in percentage points.
type windowFit struct {
	answers, noHistory            int
	newest, meanOfSamples, perPer float64 // summed absolute errors
	sameTime                      int     // answers whose time is the window's newest sample's
}

// summarizeWindows compares each window's answer per process with the
// incremental history of the same window: its newest sample, the mean of
// its samples, and the mean over the window's sample periods with the
// periods that have no sample counted as idle (what gpuwatch's simulator
// answers).
func summarizeWindows(b *strings.Builder, windows []window, byPID map[uint32][]sample, period time.Duration, start uint64) {
	fits := map[time.Duration]*windowFit{}
	var depths []time.Duration
	for _, w := range windows {
		if w.depth == 0 {
			continue
		}
		f := fits[w.depth]
		if f == nil {
			f = &windowFit{}
			fits[w.depth] = f
			depths = append(depths, w.depth)
		}
		fitWindow(f, w, w.since, byPID, period, start)
	}
	slices.Sort(depths)
	b.WriteString("\nwindows (lastSeenTimeStamp = read time minus D: what a reader ticking every D gets),\n")
	b.WriteString("each process's answer against the incremental samples of the same window, mean absolute error in SM percentage points:\n")
	fmt.Fprintf(b, "  %-6s %8s %10s %16s %18s %14s\n", "D", "answers", "newest", "mean of samples", "mean per period", "newest's time")
	for _, d := range depths {
		f := fits[d]
		if f.answers == 0 {
			fmt.Fprintf(b, "  %-6s %8d   (no answer with incremental samples in its window; %d without)\n", d, 0, f.noHistory)
			continue
		}
		n := float64(f.answers)
		fmt.Fprintf(b, "  %-6s %8d %10.2f %16.2f %18s %13.0f%%\n", d, f.answers, f.newest/n, f.meanOfSamples/n,
			perPeriodColumn(f, period), 100*float64(f.sameTime)/n)
	}
	b.WriteString("  (the smallest error says what one answer stands for; \"newest's time\": answers stamped with the window's newest sample's time)\n")
}

// summarizeReach sets each answer to lastSeenTimeStamp 0 against the
// incremental history of the last X seconds, for each X of the depths:
// with one sample per process that is a mean over the whole buffer, the
// X that fits best is about the buffer's length.
func summarizeReach(b *strings.Builder, windows []window, byPID map[uint32][]sample, period time.Duration, start uint64, depths []time.Duration) {
	b.WriteString("\nreach (lastSeenTimeStamp 0), each process's answer against the incremental samples of the last X, mean absolute error in SM percentage points:\n")
	fmt.Fprintf(b, "  %-6s %8s %10s %16s %18s\n", "X", "answers", "newest", "mean of samples", "mean per period")
	for _, x := range depths {
		f := &windowFit{}
		for _, w := range windows {
			if w.depth == 0 && w.now > uint64(x.Microseconds()) {
				fitWindow(f, w, w.now-uint64(x.Microseconds()), byPID, period, start)
			}
		}
		if f.answers == 0 {
			fmt.Fprintf(b, "  %-6s %8d   (the probe's history is shorter)\n", x, 0)
			continue
		}
		n := float64(f.answers)
		fmt.Fprintf(b, "  %-6s %8d %10.2f %16.2f %18s\n", x, f.answers, f.newest/n, f.meanOfSamples/n, perPeriodColumn(f, period))
	}
}

func perPeriodColumn(f *windowFit, period time.Duration) string {
	if period <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", f.perPer/float64(f.answers))
}

// fitWindow adds w's answers to f, each set against the incremental
// samples of its process newer than since (w.since, or for a read of
// lastSeenTimeStamp 0 a window tried for the buffer's reach).
func fitWindow(f *windowFit, w window, since uint64, byPID map[uint32][]sample, period time.Duration, start uint64) {
	answer := map[uint32][]sample{}
	for _, s := range w.samples {
		answer[s.pid] = append(answer[s.pid], s)
	}
	for pid, got := range answer {
		var inWindow []sample
		for _, s := range byPID[pid] {
			if s.micros > since && s.micros <= w.now {
				inWindow = append(inWindow, s)
			}
		}
		if len(inWindow) == 0 || since < start {
			f.noHistory++
			continue
		}
		var answered, sum float64
		newestTime := got[0].micros
		for _, s := range got {
			answered += float64(s.sm)
			newestTime = max(newestTime, s.micros)
		}
		answered /= float64(len(got))
		for _, s := range inWindow {
			sum += float64(s.sm)
		}
		newest := inWindow[len(inWindow)-1]
		f.answers++
		f.newest += math.Abs(answered - float64(newest.sm))
		f.meanOfSamples += math.Abs(answered - sum/float64(len(inWindow)))
		if period > 0 {
			periods := math.Max(1, math.Round(float64(w.now-since)/float64(period.Microseconds())))
			f.perPer += math.Abs(answered - sum/periods)
		}
		if newestTime == newest.micros {
			f.sameTime++
		}
	}
}

// failures lists the reads the driver refused, if any.
func failures(failed map[string]int) string {
	if len(failed) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nreads refused by the driver (left out above):\n")
	for _, msg := range slices.Sorted(maps.Keys(failed)) {
		fmt.Fprintf(&b, "  %d × %s\n", failed[msg], msg)
	}
	return b.String()
}

func sortedPIDs(byPID map[uint32][]sample) []uint32 {
	pids := make([]uint32, 0, len(byPID))
	for pid := range byPID {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// quantile is the q-quantile of xs (nearest rank); xs is not modified.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
