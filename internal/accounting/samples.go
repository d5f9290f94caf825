package accounting

import (
	"time"

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
	readBefore := tr.newest
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
		pid := ps.pid
		w := tr.smSeconds(ps, perSample, readBefore, dt)
		if tk.list.daemons[pid] {
			server += w
			continue
		}
		if j, ok := tk.list.pid[pid]; ok {
			tk.list.owners[j].sm += w
			continue
		}
		if k, ok := tk.before.owner(pid); ok {
			tk.addSM(k, w)
		}
		// else a process that lived and ended between two lists: no owner known
	}
	if server > 0 {
		tk.shareMPSServer(server)
	}
}

// noteSampleTimes learns from this read's sample times: each process's
// gap since its samples of the previous read, the driver's sample period
// and whether it gives several samples of a process in one read; and
// keeps each process's newest sample time for the next read.
func (tr *deviceTrack) noteSampleTimes() {
	last := tr.spareLast
	clear(last)
	if last == nil {
		last = make(map[uint32]uint64, len(tr.sums.list))
	}
	for i := range tr.sums.list {
		ps := &tr.sums.list[i]
		if prev, ok := tr.lastSample[ps.pid]; ok && ps.first > prev {
			ps.sinceLastRead = ps.first - prev
			if gap := ps.first - prev; ps.minGap == 0 || gap < ps.minGap {
				ps.minGap = gap
			}
		}
		if ps.minGap > 0 && (tr.period == 0 || time.Duration(ps.minGap)*time.Microsecond < tr.period) {
			tr.period = time.Duration(ps.minGap) * time.Microsecond
		}
		last[ps.pid] = ps.last
		tr.newest = max(tr.newest, ps.last)
		if ps.n > 1 {
			tr.buffered = true
		}
	}
	tr.spareLast, tr.lastSample = tr.lastSample, last
}

// smSeconds is the SM time that process ps's samples of this read stand
// for (smFromSamples says which rule applies when): perSample is the
// time each buffered sample stands for, readBefore the newest sample
// time of the reads before, dt the time since the last read of new
// samples.
func (tr *deviceTrack) smSeconds(ps *pidSum, perSample float64, readBefore uint64, dt float64) float64 {
	mean := ps.sm / float64(ps.n)
	switch {
	case tr.buffered && perSample > 0:
		return ps.sm * perSample
	case ps.sinceLastRead > 0:
		return mean * float64(ps.sinceLastRead) / 1e6
	case readBefore > 0 && ps.last > readBefore:
		return mean * float64(ps.last-readBefore) / 1e6
	}
	return mean * dt
}

// pidSum is one process's samples in one read.
type pidSum struct {
	pid          uint32
	sm           float64
	n            int
	first, last  uint64 // oldest and newest sample time, µs
	prev, minGap uint64 // the previous sample's time; the smallest gap
	// sinceLastRead is the gap from its newest sample of the previous
	// read to its oldest of this one (0: not sampled in the previous read).
	sinceLastRead uint64
}

// pidSums are one read's samples summed per process, kept by the device
// for reuse from one read to the next.
type pidSums struct {
	index map[uint32]int32
	list  []pidSum
}

// add sums the samples newer than after per process in one pass into
// list (owners are then looked up once per process). Older ones were
// integrated already: a GPU whose read missed the deadline is served
// again from its last completed reading, samples included, and the
// driver never gives a sample older than the last seen one twice.
func (sums *pidSums) add(samples []snapshot.ProcessSample, after uint64) {
	if sums.index == nil {
		sums.index = map[uint32]int32{}
	}
	clear(sums.index)
	sums.list = sums.list[:0]
	for i := range samples {
		smp := &samples[i]
		if smp.TimeMicros <= after {
			continue
		}
		j, ok := sums.index[smp.PID]
		if !ok {
			j = int32(len(sums.list))
			sums.list = append(sums.list, pidSum{pid: smp.PID, first: smp.TimeMicros, last: smp.TimeMicros, prev: smp.TimeMicros})
			sums.index[smp.PID] = j
		}
		ps := &sums.list[j]
		if ok {
			// The driver orders one process's samples by time, either way.
			gap := max(smp.TimeMicros, ps.prev) - min(smp.TimeMicros, ps.prev)
			if gap > 0 && (ps.minGap == 0 || gap < ps.minGap) {
				ps.minGap = gap
			}
			ps.prev = smp.TimeMicros
			ps.first, ps.last = min(ps.first, smp.TimeMicros), max(ps.last, smp.TimeMicros)
		}
		ps.sm += smp.SM
		ps.n++
	}
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
