package accounting

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// The driver gives one sample per process per read (what drivers are seen
// to do; smFromSamples): then a read's sums per process are the samples
// themselves. smFromOneSampleEach integrates such a read by the same rules
// without them, in two passes over the samples: the first finds each
// process's slot (and a process sampled twice, which it leaves to
// smFromSamples), the second integrates. At 2048 processes, writing the
// per-process sums (a cache line each, cold after two seconds) was the
// largest part of integrating a read.

// oneSampleEachPath lets tests integrate reads through smFromSamples'
// general path alone, to compare the two.
var oneSampleEachPath = true

// smFromOneSampleEach is smFromSamples for a driver that has never given a
// process several samples in one read (tr.buffered false). It returns
// false, having changed nothing but the slots' read marks (and given new
// processes their slots), when this read gives one several: smFromSamples
// then integrates the read.
func (tr *deviceTrack) smFromOneSampleEach(tk *deviceTick) bool {
	sums := &tr.sums
	samples := tk.dev.ProcessSamples
	readBefore := tr.readBefore(tk.dev)
	n, oneEach := sums.markRead(samples, readBefore)
	if !oneEach {
		return false
	}
	if n == 0 && len(samples) > 0 {
		tr.servedAgain += tk.dt // a reading served again: samples integrated already
		return true
	}
	dt := tk.dt + tr.servedAgain
	tr.servedAgain = 0
	sums.noted++
	var server float64
	for i, slot := range sums.read {
		if slot < 0 {
			continue
		}
		smp := &samples[i]
		sl := &sums.slots[slot]
		var since uint64
		if sl.lastNoted != 0 && sl.lastNoted == sums.noted-1 && smp.TimeMicros > sl.last {
			since = smp.TimeMicros - sl.last
			tr.notePeriod(since)
		}
		sl.last, sl.lastNoted = smp.TimeMicros, sums.noted
		tr.newest = max(tr.newest, smp.TimeMicros)
		server += tk.addProcessSM(tr, smp.PID, slot, sampleSeconds(smp.SM, since, smp.TimeMicros, readBefore, dt))
	}
	sums.pruneKeeping(n, func(moved func(pid uint32, slot *int32)) {
		for i := range sums.read {
			if sums.read[i] >= 0 {
				moved(samples[i].PID, &sums.read[i])
			}
		}
	})
	if server > 0 {
		tk.shareMPSServer(server)
	}
	return true
}

// markRead finds the slot of each sample newer than after, in read (-1
// for the others), and marks each slot read; n is how many. oneEach is
// false, and read unfinished, when a process has two samples.
func (sums *pidSums) markRead(samples []snapshot.ProcessSample, after uint64) (n int, oneEach bool) {
	sums.adds++
	sums.read = sums.read[:0]
	for i := range samples {
		smp := &samples[i]
		if smp.TimeMicros <= after {
			sums.read = append(sums.read, -1)
			continue
		}
		slot := sums.slotOf(i, smp.PID)
		sl := &sums.slots[slot]
		if sl.inList == sums.adds {
			return n, false
		}
		sl.inList = sums.adds
		sums.read = append(sums.read, slot)
		n++
	}
	return n, true
}
