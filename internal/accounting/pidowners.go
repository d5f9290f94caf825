package accounting

import (
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// ownerList is who one GPU's last process list named: each PID's owner,
// each owner's presence, and the MPS daemons. The reader lists processes
// only every few ticks (or when the samples say they changed), so a list
// stands for every tick until the next one.
type ownerList struct {
	pidKey  *pidOwners
	present map[snapshot.OwnerKey]*presence
	daemons map[uint32]bool
}

// reset empties the list for reuse, or makes it.
func (l *ownerList) reset() {
	if l.pidKey == nil {
		*l = ownerList{pidKey: newPIDOwners(), present: map[snapshot.OwnerKey]*presence{}, daemons: map[uint32]bool{}}
		return
	}
	l.pidKey.reset()
	clear(l.present)
	clear(l.daemons)
}

// fill lists the processes of device d in snapshot s.
func (l *ownerList) fill(s *snapshot.Snapshot, d *snapshot.Device) {
	l.reset()
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
		l.pidKey.set(p.PID, k)
		pr := l.present[k]
		if pr == nil {
			pr = &presence{}
			l.present[k] = pr
		}
		if v, ok := p.UsedMemory.Get(); ok {
			pr.memory += v
			pr.hasMemory = true
		}
		if strings.Contains(p.Type, "mps") {
			pr.mpsClient = true
		}
	}
}

// owner is the owner of pid in this list.
func (l *ownerList) owner(pid uint32) (snapshot.OwnerKey, bool) {
	if l.pidKey == nil {
		return snapshot.OwnerKey{}, false
	}
	return l.pidKey.get(pid)
}

// pidOwners maps PIDs to owner keys without a key per PID: a Go map keeps
// values over 128 bytes (an owner key is 152) out of line, one allocation
// per insert, which at 2048 processes was most of a tick's garbage.
type pidOwners struct {
	pid  map[uint32]int32
	keys []snapshot.OwnerKey
	idx  map[snapshot.OwnerKey]int32
}

func newPIDOwners() *pidOwners {
	return &pidOwners{pid: map[uint32]int32{}, idx: map[snapshot.OwnerKey]int32{}}
}

func (po *pidOwners) reset() {
	clear(po.pid)
	clear(po.idx)
	po.keys = po.keys[:0]
}

func (po *pidOwners) set(pid uint32, k snapshot.OwnerKey) {
	i, ok := po.idx[k]
	if !ok {
		i = int32(len(po.keys))
		po.keys = append(po.keys, k)
		po.idx[k] = i
	}
	po.pid[pid] = i
}

func (po *pidOwners) get(pid uint32) (snapshot.OwnerKey, bool) {
	i, ok := po.pid[pid]
	if !ok {
		return snapshot.OwnerKey{}, false
	}
	return po.keys[i], true
}
