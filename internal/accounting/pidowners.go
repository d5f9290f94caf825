package accounting

import (
	"maps"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// ownerList is who one GPU's last process list named: its owners, each
// PID's owner and the MPS daemons. The reader lists processes only every
// few ticks (or when the samples say they changed), so a list stands for
// every tick until the next one; the figures of a tick are kept beside
// each owner, so that a tick looks up owners by PID and index, never by
// their key (152 bytes to hash).
type ownerList struct {
	owners  []listedOwner
	pid     map[uint32]int32            // PID → index in owners
	index   map[snapshot.OwnerKey]int32 // owner → index in owners
	daemons map[uint32]bool
}

// listedOwner is one owner of a list, and its figures of the current tick.
type listedOwner struct {
	key       snapshot.OwnerKey
	memory    uint64 // summed over its processes on the GPU
	hasMemory bool
	mpsClient bool
	// total is its running total, looked up by key at its first tick
	// with this list and again after totals expired (totalGen).
	total    *snapshot.OwnerTotal
	totalGen uint64

	// This tick's SM-seconds and energy share.
	sm, energy float64
}

// fill lists the processes of device d in snapshot s, reusing the maps.
func (l *ownerList) fill(s *snapshot.Snapshot, d *snapshot.Device) {
	if l.pid == nil {
		l.pid, l.index, l.daemons = map[uint32]int32{}, map[snapshot.OwnerKey]int32{}, map[uint32]bool{}
	}
	clear(l.pid)
	clear(l.daemons)
	l.owners = l.owners[:0]
	// The owners' keys stay in index, marked unlisted, and are reused:
	// a Go map stores keys over 128 bytes out of line, one allocation per
	// insert, and most owners of one list are those of the last.
	for k := range l.index {
		l.index[k] = -1
	}
	for i := range s.Processes {
		p := &s.Processes[i]
		if p.GPUUUID != d.UUID && (p.GPUUUID != "" || p.GPU != d.Index) {
			continue
		}
		if isMPSDaemon(p) {
			l.daemons[p.PID] = true
			continue
		}
		k := keyOf(d, p)
		j, ok := l.index[k]
		if !ok || j < 0 {
			j = int32(len(l.owners))
			l.owners = append(l.owners, listedOwner{key: k})
			l.index[k] = j
		}
		l.pid[p.PID] = j
		o := &l.owners[j]
		if v, ok := p.UsedMemory.Get(); ok {
			o.memory += v
			o.hasMemory = true
		}
		if strings.Contains(p.Type, "mps") {
			o.mpsClient = true
		}
	}
	maps.DeleteFunc(l.index, func(_ snapshot.OwnerKey, j int32) bool { return j < 0 })
}

// owner is the owner of pid in this list.
func (l *ownerList) owner(pid uint32) (snapshot.OwnerKey, bool) {
	j, ok := l.pid[pid]
	if !ok {
		return snapshot.OwnerKey{}, false
	}
	return l.owners[j].key, true
}

// startTick clears the figures of the previous tick.
func (l *ownerList) startTick() {
	for i := range l.owners {
		l.owners[i].sm, l.owners[i].energy = 0, 0
	}
}
