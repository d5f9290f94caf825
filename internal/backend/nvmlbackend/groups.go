//go:build cgo

package nvmlbackend

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// groupID indexes the collector groups in fixed-size arrays, so that the
// per-device bookkeeping of a scrape allocates nothing.
type groupID int

const (
	gInfo groupID = iota
	gUtilization
	gMemory
	gTemperature
	gFan
	gClocks
	gClockEvents
	gPower
	gPCIe
	gECC
	gNVLink
	gXID
	gGPM
	gMIG
	gProcesses
	numGroups
)

var groupNames = [numGroups]string{
	gInfo:        snapshot.GroupInfo,
	gUtilization: snapshot.GroupUtilization,
	gMemory:      snapshot.GroupMemory,
	gTemperature: snapshot.GroupTemperature,
	gFan:         snapshot.GroupFan,
	gClocks:      snapshot.GroupClocks,
	gClockEvents: snapshot.GroupClockEvents,
	gPower:       snapshot.GroupPower,
	gPCIe:        snapshot.GroupPCIe,
	gECC:         snapshot.GroupECC,
	gNVLink:      snapshot.GroupNVLink,
	gXID:         snapshot.GroupXID,
	gGPM:         snapshot.GroupGPM,
	gMIG:         snapshot.GroupMIG,
	gProcesses:   snapshot.GroupProcesses,
}

func (g groupID) String() string { return groupNames[g] }

// groupSet says which groups are read.
type groupSet [numGroups]bool

// AllGroups returns an Options.Groups value that enables every group.
func AllGroups() map[string]bool {
	m := make(map[string]bool, len(snapshot.AllGroups))
	for _, g := range snapshot.AllGroups {
		m[g] = true
	}
	return m
}

// parseGroups turns Options.Groups into a groupSet. An unknown name is an
// error, so that a typo in a flag or config is not silently ignored.
func parseGroups(m map[string]bool) (groupSet, error) {
	var set groupSet
	var unknown []string
	for name, on := range m {
		found := false
		for g := range numGroups {
			if groupNames[g] == name {
				set[g] = on
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return set, fmt.Errorf("unknown collector group(s) %s; known: %s",
			strings.Join(unknown, ", "), strings.Join(snapshot.AllGroups, ", "))
	}
	return set, nil
}

// groupStats is one device's (or one scrape's) time and first error per group.
type groupStats [numGroups]struct {
	dur time.Duration
	err error
}

// fail records err for g unless an earlier error is already recorded: the
// status reports the first error, which is usually the cause of the rest.
func (s *groupStats) fail(g groupID, err error) {
	if s[g].err == nil {
		s[g].err = err
	}
}

// add merges a device's stats into the scrape's: durations add up, the first
// error (in device order) wins.
func (s *groupStats) add(o *groupStats) {
	for g := range numGroups {
		s[g].dur += o[g].dur
		if s[g].err == nil {
			s[g].err = o[g].err
		}
	}
}

// statusMap renders the stats of the enabled groups for Snapshot.Groups,
// into m (empty) or, when nil, a new map.
func (s *groupStats) statusMap(enabled groupSet, m map[string]snapshot.GroupStatus) map[string]snapshot.GroupStatus {
	if m == nil {
		n := 0
		for g := range numGroups {
			if enabled[g] {
				n++
			}
		}
		m = make(map[string]snapshot.GroupStatus, n)
	}
	for g := range numGroups {
		if enabled[g] {
			m[groupNames[g]] = snapshot.GroupStatus{Duration: s[g].dur, Err: s[g].err}
		}
	}
	return m
}
