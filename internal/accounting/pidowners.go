package accounting

import (
	"maps"
	"slices"
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
	pid     map[uint32]int32 // PID → index in owners
	index   map[snapshot.OwnerKey]*ownerSlot
	daemons map[uint32]bool
	// fills counts the fills, to tell the slots of this list's owners.
	fills uint64
	// remap is fill's scratch: the previous list's owner indexes → this
	// list's.
	remap []int32
}

// ownerSlot is an owner's index in owners, valid at the fill counted by
// fill. The keys stay in index from one list to the next and are reused:
// a Go map stores keys over 128 bytes out of line, one allocation per
// insert, and most owners of one list are those of the last. Held by
// pointer, so that a fill hashes an owner's key once.
type ownerSlot struct {
	j    int32
	fill uint64
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

// fill lists the processes of device d in snapshot s (procs, their
// indexes in s.Processes), reusing the maps.
// prev is the GPU's list before (possibly empty): a process it held with
// the same owner finds its owner without hashing the key (152 bytes), so
// a fill hashes about one key per owner, not one per process.
func (l *ownerList) fill(s *snapshot.Snapshot, d *snapshot.Device, procs []int32, prev *ownerList) {
	if l.pid == nil {
		l.pid, l.index, l.daemons = map[uint32]int32{}, map[snapshot.OwnerKey]*ownerSlot{}, map[uint32]bool{}
	}
	clear(l.pid)
	clear(l.daemons)
	l.owners = l.owners[:0]
	l.fills++
	l.remap = slices.Grow(l.remap[:0], len(prev.owners))[:len(prev.owners)]
	for i := range l.remap {
		l.remap[i] = -1
	}
	for _, i := range procs {
		p := &s.Processes[i]
		if isMPSDaemon(p) {
			l.daemons[p.PID] = true
			continue
		}
		k := keyOf(d, p)
		var j int32
		if pj, ok := prev.pid[p.PID]; ok && prev.owners[pj].key == k {
			if j = l.remap[pj]; j < 0 {
				j = l.add(&k)
				l.remap[pj] = j
				if o := &l.owners[j]; o.total == nil {
					// Its running total too, found without the key.
					o.total, o.totalGen = prev.owners[pj].total, prev.owners[pj].totalGen
				}
			}
		} else {
			j = l.add(&k)
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
	maps.DeleteFunc(l.index, func(_ snapshot.OwnerKey, slot *ownerSlot) bool { return slot.fill != l.fills })
}

// add is owner k's index in owners, added if this fill has not yet.
func (l *ownerList) add(k *snapshot.OwnerKey) int32 {
	slot := l.index[*k]
	if slot == nil {
		slot = &ownerSlot{}
		l.index[*k] = slot
	}
	if slot.fill != l.fills {
		slot.j, slot.fill = int32(len(l.owners)), l.fills
		l.owners = append(l.owners, listedOwner{key: *k})
	}
	return slot.j
}

// indexOf is owner k's index in owners.
func (l *ownerList) indexOf(k *snapshot.OwnerKey) (int32, bool) {
	if slot, ok := l.index[*k]; ok {
		return slot.j, true
	}
	return 0, false
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

// deviceProcesses are a snapshot's processes by device: each device's
// indexes in s.Processes, found in one pass (a pass per device cost eight
// at eight GPUs). Reused from one tick to the next.
type deviceProcesses struct {
	byDevice [][]int32 // by position in s.Devices
}

// group sorts the processes of s by device: process p is on device d when
// it names d's UUID, or names no UUID and d's index. Device UUIDs are
// unique in a snapshot (the totals are kept by them).
func (g *deviceProcesses) group(s *snapshot.Snapshot) {
	if cap(g.byDevice) < len(s.Devices) {
		g.byDevice = append(g.byDevice[:cap(g.byDevice)], make([][]int32, len(s.Devices)-cap(g.byDevice))...)
	}
	g.byDevice = g.byDevice[:len(s.Devices)]
	for i := range g.byDevice {
		g.byDevice[i] = g.byDevice[i][:0]
	}
	for i := range s.Processes {
		p := &s.Processes[i]
		// The reader's snapshots list device i at position i: try it first.
		if p.GPU >= 0 && p.GPU < len(s.Devices) && onDevice(p, &s.Devices[p.GPU]) {
			g.byDevice[p.GPU] = append(g.byDevice[p.GPU], int32(i))
			continue
		}
		for j := range s.Devices {
			if onDevice(p, &s.Devices[j]) {
				g.byDevice[j] = append(g.byDevice[j], int32(i))
				break
			}
		}
	}
}

// of is device s.Devices[dev]'s processes.
func (g *deviceProcesses) of(dev int) []int32 { return g.byDevice[dev] }

func onDevice(p *snapshot.Process, d *snapshot.Device) bool {
	return p.GPUUUID == d.UUID || (p.GPUUUID == "" && p.GPU == d.Index)
}
