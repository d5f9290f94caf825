package slurm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Diag is the scheduler health that `sdiag` reports cheaply (one RPC to the
// controller, answered from counters it keeps anyway). Times are seconds.
// A field sdiag did not print stays unset.
type Diag struct {
	ServerThreads       Opt
	AgentQueueSize      Opt
	DBDAgentQueueSize   Opt
	LastCycle           Opt // main scheduler, seconds
	MeanCycle           Opt
	MaxCycle            Opt
	QueueLength         Opt // main scheduler's last queue length
	BackfillLastCycle   Opt
	BackfillMeanCycle   Opt
	BackfillQueueLength Opt
	BackfilledJobs      Opt // since slurmctld start
}

// Opt is an optional float.
type Opt struct {
	Value float64
	Valid bool
}

func some(v float64) Opt { return Opt{Value: v, Valid: true} }

// ParseSdiag reads the text output of `sdiag` (Slurm 17.x to 24.x share
// the "Name: value" layout, with sections for the main and the backfill
// scheduler).
func ParseSdiag(data []byte) (Diag, error) {
	var d Diag
	section := ""
	seen := 0
	backfillCycles := -1 // unknown until "Total cycles" is read
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(text, "Main schedule statistics"):
			section = "main"
			continue
		case strings.HasPrefix(text, "Backfilling stats"):
			section = "backfill"
			continue
		case strings.HasPrefix(text, "Remote Procedure Call"), strings.HasPrefix(text, "Latency for"):
			section = "other"
			continue
		}
		key, val, ok := strings.Cut(text, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if section == "backfill" && key == "Total cycles" {
			backfillCycles, _ = strconv.Atoi(val)
		}
		target, divisor := d.field(section, key)
		if target == nil {
			continue
		}
		if val == "N/A" {
			continue
		}
		n, err := strconv.ParseFloat(strings.Fields(val + " x")[0], 64)
		if err != nil {
			return Diag{}, fmt.Errorf("sdiag: line %d: %q: value %q is not a number", line, key, val)
		}
		*target = some(n / divisor)
		seen++
	}
	if err := sc.Err(); err != nil {
		return Diag{}, fmt.Errorf("sdiag: line %d: %w", line+1, err)
	}
	// Before its first cycle the backfill scheduler prints zeros, which
	// are not durations.
	if backfillCycles == 0 {
		d.BackfillLastCycle, d.BackfillMeanCycle = Opt{}, Opt{}
	}
	if seen == 0 {
		return Diag{}, fmt.Errorf("sdiag: none of the expected fields (Server thread count, Last cycle, ...) in %d lines of output", line)
	}
	return d, nil
}

// microsecondsPerSecond converts sdiag's microseconds into seconds.
const microsecondsPerSecond = 1e6

// field maps a "Key" in a section to the Diag field and the divisor that
// converts its value to base units.
func (d *Diag) field(section, key string) (*Opt, float64) {
	switch section {
	case "":
		switch key {
		case "Server thread count":
			return &d.ServerThreads, 1
		case "Agent queue size":
			return &d.AgentQueueSize, 1
		case "DBD Agent queue size":
			return &d.DBDAgentQueueSize, 1
		}
	case "main":
		switch key {
		case "Last cycle":
			return &d.LastCycle, microsecondsPerSecond
		case "Mean cycle":
			return &d.MeanCycle, microsecondsPerSecond
		case "Max cycle":
			return &d.MaxCycle, microsecondsPerSecond
		case "Last queue length":
			return &d.QueueLength, 1
		}
	case "backfill":
		switch key {
		case "Last cycle":
			return &d.BackfillLastCycle, microsecondsPerSecond
		case "Mean cycle":
			return &d.BackfillMeanCycle, microsecondsPerSecond
		case "Last queue length":
			return &d.BackfillQueueLength, 1
		case "Total backfilled jobs (since last slurm start)":
			return &d.BackfilledJobs, 1
		}
	}
	return nil, 0
}
