package accounting

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/pidindex"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// smFromSamples integrates the driver's per-process samples of the
// interval. nvml.h admits two drivers, and gpuwatch tells them apart by
// what they answer:
//
//   - One sample per process per read (what drivers are seen to do): the
//     process's utilization since the last seen time. It stands for the
//     time from the process's sample of the previous read (a process
//     sampled then), else from the newest sample of the previous read
//     (a process that started or resumed since): that is the window the
//     driver averaged over. A GPU's first read stands for the interval.
//   - Every buffered sample (several of one process in one read): each
//     stands for the driver's sample period, learnt as the smallest gap
//     between two samples of one process. When the buffer is shorter
//     than the interval, the samples it still holds stand for all of it
//     (see bufferScale).
//
// A reading served again (its GPU's read missed the deadline) has only
// samples integrated already: the next read's samples stand for its
// interval too.
func (st *state) smFromSamples(tk *deviceTick, tr *deviceTrack) {
	if !tr.buffered && oneSampleEachPath && tr.smFromOneSampleEach(tk) {
		return
	}
	readBefore := tr.readBefore(tk.dev)
	tr.sums.add(tk.dev.ProcessSamples, readBefore)
	if len(tr.sums.list) == 0 && len(tk.dev.ProcessSamples) > 0 {
		tr.servedAgain += tk.dt
		return
	}
	dt := tk.dt + tr.servedAgain
	tr.servedAgain = 0
	tr.noteSampleTimes()
	period := tr.period.Seconds()
	perSample := period * tr.bufferScale(period, dt)
	var server float64
	for i := range tr.sums.list {
		ps := &tr.sums.list[i]
		server += tk.addProcessSM(tr, ps.pid, ps.slot, tr.smSeconds(ps, perSample, readBefore, dt))
	}
	if server > 0 {
		tk.shareMPSServer(server)
	}
}

// readBefore is the time (µs) this read's samples are newer than: the
// newest sample of the reads before, or, when later, the time the reader
// asked from (it asks again from one interval back when the newest it
// had seen is far behind: nvmlbackend's sampleWindowStart).
func (tr *deviceTrack) readBefore(d *snapshot.Device) uint64 {
	return max(tr.newest, d.ProcessSamplesSince)
}

// addProcessSM gives w SM-seconds of process pid (its slot slot) to its
// owner, and returns them when the process is an MPS daemon (they go to
// the clients, shareMPSServer), else 0.
func (tk *deviceTick) addProcessSM(tr *deviceTrack, pid uint32, slot int32, w float64) (server float64) {
	switch j := tr.listedOwnerOf(pid, slot); {
	case j == ownerDaemon:
		return w
	case j >= 0:
		tk.list.owners[j].sm += w
	default:
		if k, ok := tk.before.owner(pid); ok {
			tk.addSM(k, w)
		}
		// else a process that lived and ended between two lists: no owner known
	}
	return 0
}

// What listedOwnerOf answers besides an index in the list's owners.
const (
	ownerDaemon    = -1 // an MPS daemon: its samples go to the clients
	ownerNotInList = -2 // not in the last list (ended since the list before, or never listed)
)

// listedOwnerOf is process pid's (in slot slot) owner's index in the
// last list's owners, or ownerDaemon or ownerNotInList. It is kept in the process's slot until
// the next list: one map lookup per process per list, not per tick.
func (tr *deviceTrack) listedOwnerOf(pid uint32, slot int32) int32 {
	sl := &tr.sums.slots[slot]
	if sl.ownerOfList == tr.lists+1 {
		return sl.owner
	}
	sl.ownerOfList, sl.owner = tr.lists+1, ownerNotInList
	if tr.list.daemons[pid] {
		sl.owner = ownerDaemon
	} else if j, ok := tr.list.pid[pid]; ok {
		sl.owner = j
	}
	return sl.owner
}

// noteSampleTimes learns from this read's sample times: each process's
// gap since its samples of the previous read, the driver's sample period
// and whether it gives several samples of a process in one read; and
// keeps each process's newest sample time for the next read.
func (tr *deviceTrack) noteSampleTimes() {
	sums := &tr.sums
	sums.noted++
	for i := range sums.list {
		ps := &sums.list[i]
		sl := &sums.slots[ps.slot]
		if prev := sl.last; sl.lastNoted != 0 && sl.lastNoted == sums.noted-1 && ps.first > prev {
			ps.sinceLastRead = ps.first - prev
			if gap := ps.first - prev; ps.minGap == 0 || gap < ps.minGap {
				ps.minGap = gap
			}
		}
		tr.notePeriod(ps.minGap)
		sl.last, sl.lastNoted = ps.last, sums.noted
		tr.newest = max(tr.newest, ps.last)
		if ps.n > 1 {
			tr.buffered = true
		}
	}
	sums.prune()
}

// notePeriod takes gap (µs, 0: none) as the driver's sample period when
// it is the smallest seen.
func (tr *deviceTrack) notePeriod(gap uint64) {
	if gap > 0 && (tr.period == 0 || time.Duration(gap)*time.Microsecond < tr.period) {
		tr.period = time.Duration(gap) * time.Microsecond
	}
}

// smSeconds is the SM time that process ps's samples of this read stand
// for (smFromSamples says which rule applies when): perSample is the
// time each buffered sample stands for, readBefore the newest sample
// time of the reads before, dt the time since the last read of new
// samples.
func (tr *deviceTrack) smSeconds(ps *pidSum, perSample float64, readBefore uint64, dt float64) float64 {
	if tr.buffered && perSample > 0 {
		return ps.sm * perSample
	}
	return sampleSeconds(ps.sm/float64(ps.n), ps.sinceLastRead, ps.last, readBefore, dt)
}

// sampleSeconds is the SM time of a process's one sample of mean
// utilization mean (or the mean of its samples) in a read: it stands for
// the time since the process's sample of the previous read (since, µs;
// 0: not sampled then), else since the newest sample of the reads before
// (readBefore) until its own (last), else for the interval dt.
func sampleSeconds(mean float64, since, last, readBefore uint64, dt float64) float64 {
	switch {
	case since > 0:
		return mean * float64(since) / 1e6
	case readBefore > 0 && last > readBefore:
		return mean * float64(last-readBefore) / 1e6
	}
	return mean * dt
}

// pidSum is one process's samples in one read.
type pidSum struct {
	pid          uint32
	slot         int32 // its slot in pidSums.slots
	sm           float64
	n            int
	first, last  uint64 // oldest and newest sample time, µs
	prev, minGap uint64 // the previous sample's time; the smallest gap
	// sinceLastRead is the gap from its newest sample of the previous
	// read to its oldest of this one (0: not sampled in the previous read).
	sinceLastRead uint64
}

// pidSums are one read's samples summed per process (list), and what is
// kept of each process from one read to the next (slots), kept by the
// device for reuse.
type pidSums struct {
	list []pidSum
	// index gives each PID sampled its slot. It is looked up in the
	// order of the samples, which the driver keeps from one read to the
	// next: most lookups are answered without hashing (pidindex).
	index pidindex.Index
	slots []pidSlot
	// read is, in the one-sample-each path, each sample's slot (-1: a
	// sample integrated before) (samples_one_each.go).
	read []int32
	// adds counts add's and markRead's reads, noted the reads whose
	// sample times were noted.
	adds, noted uint64
}

// pidSlot is what is kept of one process between reads.
type pidSlot struct {
	// inList is the last read (pidSums.adds) that sampled the process:
	// add's list holds it at listAt (markRead sets inList alone).
	inList uint64
	listAt int32
	// owner is its owner's index in the device's list (or ownerDaemon,
	// ownerNotInList) as of the list counted by ownerOfList - 1
	// (deviceTrack.lists; ownerOfList 0: not looked up yet).
	owner       int32
	ownerOfList uint64
	// last is its newest sample time (µs) as of the read counted by
	// lastNoted (0: none yet).
	last, lastNoted uint64
}

// add sums the samples newer than after per process in one pass into
// list (owners are then looked up once per process). Older ones were
// integrated already: a GPU whose read missed the deadline is served
// again from its last completed reading, samples included, and the
// driver never gives a sample older than the last seen one twice.
func (sums *pidSums) add(samples []snapshot.ProcessSample, after uint64) {
	sums.adds++
	sums.list = sums.list[:0]
	for i := range samples {
		smp := &samples[i]
		if smp.TimeMicros <= after {
			continue
		}
		slot := sums.slotOf(i, smp.PID)
		sl := &sums.slots[slot]
		if sl.inList != sums.adds {
			sl.inList, sl.listAt = sums.adds, int32(len(sums.list))
			sums.list = append(sums.list, pidSum{pid: smp.PID, slot: slot, first: smp.TimeMicros, last: smp.TimeMicros, prev: smp.TimeMicros})
		} else {
			ps := &sums.list[sl.listAt]
			// The driver orders one process's samples by time, either way.
			gap := max(smp.TimeMicros, ps.prev) - min(smp.TimeMicros, ps.prev)
			if gap > 0 && (ps.minGap == 0 || gap < ps.minGap) {
				ps.minGap = gap
			}
			ps.prev = smp.TimeMicros
			ps.first, ps.last = min(ps.first, smp.TimeMicros), max(ps.last, smp.TimeMicros)
		}
		ps := &sums.list[sl.listAt]
		ps.sm += smp.SM
		ps.n++
	}
}

// slotOf is the slot of process pid, the sample at position pos of the
// read; a new one for a process not seen before.
func (sums *pidSums) slotOf(pos int, pid uint32) int32 {
	slot, known := sums.index.Get(pos, pid)
	if !known {
		slot = int32(len(sums.slots))
		sums.slots = append(sums.slots, pidSlot{})
		sums.index.Set(pos, pid, slot)
	}
	return slot
}

// prune forgets the processes not sampled at this read once they are
// most of the slots: what a slot keeps is needed only from one read to
// the next (the newest sample time) or until the next list (the owner),
// which a process sampled again finds anew. So the slots stay bounded by
// the processes of a read or two, as the maps they replace were.
func (sums *pidSums) prune() {
	sums.pruneKeeping(len(sums.list), func(moved func(pid uint32, slot *int32)) {
		for i := range sums.list {
			moved(sums.list[i].pid, &sums.list[i].slot)
		}
	})
}

// pruneKeeping is prune for a read of n processes, which each calls
// moved for, with its PID and its slot (renumbered).
func (sums *pidSums) pruneKeeping(n int, each func(moved func(pid uint32, slot *int32))) {
	if len(sums.slots) <= 2*n+64 {
		return
	}
	remap := make([]int32, len(sums.slots)) // old slot → new, -1: pruned
	kept := sums.slots[:0]
	for i, sl := range sums.slots {
		remap[i] = -1
		if sl.lastNoted == sums.noted {
			remap[i] = int32(len(kept))
			kept = append(kept, sl)
		}
	}
	sums.slots = kept
	sums.index.DeleteFunc(func(_ uint32, slot int32) bool { return remap[slot] < 0 })
	// The survivors' slots moved: index them again.
	each(func(pid uint32, slot *int32) {
		*slot = remap[*slot]
		sums.index.Set(-1, pid, *slot)
	})
}

// bufferScale is how many times the interval is longer than what the
// samples of this read cover, when the driver's buffer ran out before the
// previous read: every process sampled in both reads (busy throughout)
// shows a gap of more than a period between its last sample then and its
// first now. Then the samples held stand for the whole interval.
// Otherwise (a process that started or paused shows a gap alone) 1.
func (tr *deviceTrack) bufferScale(period, dt float64) float64 {
	if period == 0 {
		return 1
	}
	var oldest, newest uint64
	continuing := 0
	for i := range tr.sums.list {
		ps := &tr.sums.list[i]
		if ps.sinceLastRead == 0 {
			continue
		}
		continuing++
		if float64(ps.sinceLastRead)/1e6 <= 1.5*period {
			return 1 // this process's samples reach back to the last read
		}
		if oldest == 0 || ps.first < oldest {
			oldest = ps.first
		}
		newest = max(newest, ps.last)
	}
	if continuing == 0 {
		return 1
	}
	covered := float64(newest-oldest)/1e6 + period
	return max(1, dt/covered)
}

// shareMPSServer gives the SM time the driver reported for the MPS server
// to the MPS clients on the GPU, in proportion to their own SM time, or
// equally when they have none.
func (tk *deviceTick) shareMPSServer(server float64) {
	var own float64
	clients := 0
	for i := range tk.list.owners {
		if o := &tk.list.owners[i]; o.mpsClient {
			clients++
			own += o.sm
		}
	}
	for i := range tk.list.owners {
		o := &tk.list.owners[i]
		switch {
		case !o.mpsClient:
		case own > 0:
			o.sm += server * o.sm / own
		default:
			o.sm += server / float64(clients)
		}
	}
}
