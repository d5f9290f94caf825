package smibackend

import (
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// lacking are the readings of each group that no nvidia-smi query gives,
// whatever the driver: what the NVML backend reads and this one cannot.
var lacking = map[string]struct {
	all  bool
	what string
}{
	snapshot.GroupPower:       {false, "energy counter"},
	snapshot.GroupPCIe:        {false, "traffic counters, replay counter"},
	snapshot.GroupNVLink:      {true, "NVLink state, traffic or error counters"},
	snapshot.GroupXID:         {true, "XID events"},
	snapshot.GroupGPM:         {true, "GPM profiling"},
	snapshot.GroupMIG:         {false, "MIG instances"},
	snapshot.GroupTemperature: {false, "slowdown and shutdown thresholds"},
	snapshot.GroupMemory:      {false, "BAR1 memory"},
}

// limits lists, in group order, the enabled groups this backend cannot
// fully serve: what nvidia-smi never gives, and the properties this
// driver's nvidia-smi does not list.
func limits(q query, groups map[string]bool) []snapshot.DriverLimit {
	var out []snapshot.DriverLimit
	for _, g := range snapshot.AllGroups {
		if !groups[g] {
			continue
		}
		var lost []string
		l := lacking[g]
		if l.what != "" {
			lost = append(lost, l.what)
		}
		lost = append(lost, q.missing[g]...)
		if len(lost) == 0 {
			continue
		}
		state := "partial"
		if l.all {
			state = "unavailable"
		}
		out = append(out, snapshot.DriverLimit{Group: g, Unavailable: l.all, Reason: state + ": no " + strings.Join(lost, ", ") + " from nvidia-smi", Missing: q.missing[g]})
	}
	return out
}
