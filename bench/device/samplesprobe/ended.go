//go:build cgo

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A tick integrates a process's last periods at the tick after them. If
// the process ended in between, whether the driver still answers for it
// then decides whether those periods count: nvml.h speaks of samples "per
// process running". So the probe lists the GPU's compute processes at
// every poll, and when a process it has sampled leaves the list it asks,
// at once and endCheckAfter later, for the samples newer than a second
// before the poll that last listed it: what a reader whose tick fell a
// second before the end gets at its next tick.
var endCheckAfter = []time.Duration{0, time.Second, 3 * time.Second}

// ending is a sampled process that left the GPU's process list.
type ending struct {
	pid        uint32
	lastListed uint64 // wall µs of the last poll that listed it
	since      uint64 // the checks' lastSeenTimeStamp, on the driver's clock
	checks     []endCheck
}

// endCheck is one read after an ending: whether the process was answered,
// and its sample.
type endCheck struct {
	after    time.Duration
	answered bool
	sm       uint32
}

// endWatch follows the GPU's process list from poll to poll.
type endWatch struct {
	listed     map[uint32]bool // the processes the last poll that listed them listed
	listedAt   uint64          // that poll's wall time, µs
	sampled    map[uint32]bool
	endings    []*ending
	listFailed int
}

// poll lists the GPU's compute processes at wall time now (µs), notes the
// processes in samples, and starts an ending for each sampled process
// gone from the list since the poll before.
func (w *endWatch) poll(dev nvml.Device, now uint64, samples []sample, driverClock func(int64) int64) {
	if w.sampled == nil {
		w.sampled = map[uint32]bool{}
	}
	for _, s := range samples {
		w.sampled[s.pid] = true
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		w.listFailed++
		return
	}
	listed := make(map[uint32]bool, len(procs))
	for _, p := range procs {
		listed[p.Pid] = true
	}
	for pid := range w.listed {
		if !listed[pid] && w.sampled[pid] {
			w.endings = append(w.endings, &ending{pid: pid, lastListed: w.listedAt,
				since: uint64(max(0, driverClock(int64(w.listedAt))-time.Second.Microseconds()))})
		}
	}
	w.listed, w.listedAt = listed, now
}

// due runs the checks whose time has come (wall time now, µs), with read
// asking the driver for the samples newer than a time.
func (w *endWatch) due(now uint64, read func(since uint64) ([]sample, error)) {
	for _, e := range w.endings {
		for len(e.checks) < len(endCheckAfter) {
			after := endCheckAfter[len(e.checks)]
			if now < e.lastListed+uint64(after.Microseconds()) {
				break
			}
			got, err := read(e.since)
			if err != nil {
				break // asked again at the next poll
			}
			c := endCheck{after: after}
			for _, s := range got {
				if s.pid == e.pid {
					c.answered, c.sm = true, s.sm
				}
			}
			e.checks = append(e.checks, c)
		}
	}
}

// summarize prints each ending's checks.
func (w *endWatch) summarize(b *strings.Builder, start uint64) {
	b.WriteString("\nprocesses that ended while probed (asked from 1 s before the last poll that listed each: what the next tick of a reader gets):\n")
	if w.listFailed > 0 {
		fmt.Fprintf(b, "  (the process list failed at %d polls)\n", w.listFailed)
	}
	if len(w.endings) == 0 {
		b.WriteString("  none\n")
		return
	}
	for _, e := range w.endings {
		fmt.Fprintf(b, "  pid %d, last listed at +%.1f s:", e.pid, float64(e.lastListed-start)/1e6)
		if len(e.checks) == 0 {
			b.WriteString(" not checked (the probe ended first)")
		}
		for _, c := range e.checks {
			if c.answered {
				fmt.Fprintf(b, " after %s answered (SM %d %%);", c.after, c.sm)
			} else {
				fmt.Fprintf(b, " after %s not answered;", c.after)
			}
		}
		b.WriteString("\n")
	}
}
