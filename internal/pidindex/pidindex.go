// Package pidindex indexes PIDs for code that looks up every process of a
// driver's list at every read: the accounting's reader and integration
// look up each of a GPU's per-process samples (hundreds of processes per
// GPU in the benchmark's fleet) several times a tick, and a map lookup per sample was
// most of what a tick cost (bench/RESULTS.md).
package pidindex

// Index maps PIDs to int32 values (positions in the caller's own lists).
// It is a map with a memo by position: callers look PIDs up in the order of
// a list, and the driver gives each read's list in the order of the one
// before, so a lookup at the same position as in the last pass, for the
// same PID, is answered from the memo without hashing. A list in another
// order is answered by the map: right, only slower. The zero Index is
// ready to use; it is not safe for concurrent use.
type Index struct {
	m    map[uint32]int32
	memo []memoEntry // by position in the caller's pass
	// gen is bumped by every change that can make a memo entry wrong (a
	// PID removed or given another value), which voids them all. It is
	// never 0, so that the memo's zero entries never match.
	gen uint32
}

type memoEntry struct {
	pid, gen uint32
	v        int32
}

// maxMemo bounds the memo: positions past it are looked up in the map.
// Far more processes than one GPU can hold.
const maxMemo = 1 << 16

// Get is pid's value, looked up at position pos of the caller's pass.
func (x *Index) Get(pos int, pid uint32) (int32, bool) {
	if pos >= 0 && pos < len(x.memo) {
		if e := x.memo[pos]; e.pid == pid && e.gen == x.gen {
			return e.v, true
		}
	}
	v, ok := x.m[pid]
	if ok {
		x.remember(pos, pid, v)
	}
	return v, ok
}

// Set gives pid the value v, found at position pos of the caller's pass
// (a negative pos: in no pass worth remembering).
func (x *Index) Set(pos int, pid uint32, v int32) {
	if x.m == nil {
		x.m = map[uint32]int32{}
	}
	if old, ok := x.m[pid]; ok && old != v {
		x.void()
	}
	x.m[pid] = v
	x.remember(pos, pid, v)
}

// Len is the number of PIDs indexed.
func (x *Index) Len() int { return len(x.m) }

// Clear forgets every PID.
func (x *Index) Clear() {
	clear(x.m)
	x.void()
}

// DeleteFunc forgets the PIDs for which del is true.
func (x *Index) DeleteFunc(del func(pid uint32, v int32) bool) {
	for pid, v := range x.m {
		if del(pid, v) {
			delete(x.m, pid)
			x.void()
		}
	}
}

func (x *Index) remember(pos int, pid uint32, v int32) {
	if pos < 0 || pos >= maxMemo {
		return
	}
	if x.gen == 0 {
		x.gen = 1
	}
	if pos >= len(x.memo) {
		x.memo = append(x.memo, make([]memoEntry, pos+1-len(x.memo))...)
	}
	x.memo[pos] = memoEntry{pid: pid, gen: x.gen, v: v}
}

// void makes every memo entry miss.
func (x *Index) void() {
	x.gen++
	if x.gen == 0 {
		// Wrapped: entries of generation 0 are the memo's zero ones,
		// and those of old generation 1 may still be there.
		clear(x.memo)
		x.gen = 1
	}
}
