package accounting

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// tickMaps are one tick's per-device maps, kept for reuse.
type tickMaps struct {
	pidKey  *pidOwners
	present map[snapshot.OwnerKey]*presence
	sm      map[snapshot.OwnerKey]float64
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
