//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/pidindex"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// processListing decides, for the accounting's reader, which reads of one
// GPU list its processes (AccountingOptions.ListProcessesEvery): every so many reads
// the reader lists every GPU's (Reader.listsAll), and in between a GPU's
// when what the read measured says they may have changed. A list costs
// the three list calls per GPU and MIG device, and then the attribution of
// every process; the samples, read at every read anyway, say when the
// processes may have changed:
//
//   - a sample from a PID not seen since the last list: a process started
//     (it is listed, and so attributed, at the read of its first sample);
//   - a PID sampled at the previous read and not at this one: a busy
//     process ended, or went idle (the driver samples only processes with
//     some utilization);
//   - on a MIG GPU, which has no per-process samples, GPM: an instance
//     turned busy with no process listed in it, or one busy at the
//     previous read and idle now.
//
// A GPU with none of these measures (the samples or GPM unsupported, or
// their read failed) is listed at every read. What a list every few reads
// misses, a process that starts or ends while idle, is noticed at the next
// one.
//
// With AccountingOptions.ListProcessesSteadyEvery, that periodic list is made only
// when the GPU's used memory moved since its last list: a process that
// starts or ends, idle or not, allocates or frees memory (a CUDA context
// alone holds hundreds of MiB), and so does one that grows or shrinks.
// A GPU whose memory stands still is listed with every GPU every
// ListProcessesSteadyEvery reads, and when its samples show a change.
type processListing struct {
	// reads counts the reads since the last list, to tell the samples
	// of the previous read.
	reads int
	// listedOnce is false until the first list.
	listedOnce bool
	// memoryAtList is the GPU's used memory at the last list.
	memoryAtList usedMemory
	// pid indexes seen: the PIDs of the last list and those sampled
	// since. Looked up in the order of the samples, which is that of the
	// read before (pidindex).
	pid  pidindex.Index
	seen []seenPID
	// sampledLast is how many PIDs the previous read sampled (those of
	// seen whose sampledAt is reads-1 at this read's start).
	sampledLast int
	// migListed holds the MIG devices with a process at the last list;
	// migBusy those GPM showed busy at the previous read.
	migListed, migBusy map[string]bool
}

type seenPID struct {
	pid uint32
	// sampledAt is the read (counted by reads) of its newest sample, -1
	// for none since the last list, ended for a PID sampled but not listed.
	sampledAt int
}

// ended marks a PID that the list did not hold although the same read
// sampled it.
const ended = -2

// usedMemory is a GPU's used memory in bytes; known is false when it was
// not read (no steady listing) or could not be.
type usedMemory struct {
	bytes uint64
	known bool
}

// due says whether this read lists the processes, after noting what its
// samples (sampled: the driver answered) and MIG instances show. listAll
// is the reader's periodic list of every GPU. every (0: none) is, with
// ListProcessesSteadyEvery, how many reads after its last list a GPU whose
// used memory moved is listed.
func (l *processListing) due(listAll bool, every int, samples []nvml.ProcessUtilizationSample, sampled bool, migs []snapshot.MIGInstance, memory usedMemory) bool {
	l.reads++
	changed := l.noteSamples(samples)
	measured := sampled
	if len(migs) > 0 {
		measured, changed = l.noteMIG(migs, changed)
	}
	if every > 0 && l.reads >= every {
		moved := !memory.known || !l.memoryAtList.known || memory.bytes != l.memoryAtList.bytes
		changed = changed || moved
	}
	return listAll || !l.listedOnce || !measured || changed
}

// noteSamples records which PIDs this read sampled and reports a new PID
// or one no longer sampled.
func (l *processListing) noteSamples(samples []nvml.ProcessUtilizationSample) (changed bool) {
	// Counted, not looked for: a PID of the previous read missing now
	// shows as fewer of them sampled again than the previous read had.
	sampled, again := 0, 0
	for i := range samples {
		pid := samples[i].Pid
		j, ok := l.pid.Get(i, pid)
		if !ok {
			changed = true
			j = int32(len(l.seen))
			l.seen = append(l.seen, seenPID{pid: pid})
			l.pid.Set(i, pid, j)
		}
		s := &l.seen[j]
		if s.sampledAt == l.reads {
			continue // another sample of it in this read
		}
		if s.sampledAt == l.reads-1 {
			again++
		}
		s.sampledAt = l.reads
		sampled++
	}
	if again < l.sampledLast {
		changed = true // sampled at the previous read, not at this one
	}
	l.sampledLast = sampled
	return changed
}

// noteMIG reads the instances' GPM activity; measured is false when an
// instance has none.
func (l *processListing) noteMIG(migs []snapshot.MIGInstance, changed bool) (measured, changedNow bool) {
	if l.migBusy == nil {
		l.migBusy = map[string]bool{}
	}
	measured = true
	for i := range migs {
		m := &migs[i]
		active, ok := m.GPM.SMActive.Get()
		if !ok {
			measured = false
			continue
		}
		busy, wasBusy := active > 0, l.migBusy[m.UUID]
		// Transitions only: an instance that stays busy with nobody
		// listed (a process the lists do not show) must not have every
		// read list.
		if (busy && !wasBusy && !l.migListed[m.UUID]) || (!busy && wasBusy) {
			changed = true
		}
		l.migBusy[m.UUID] = busy
	}
	return measured, changed
}

// listed starts over from this read's list: its PIDs and those of its
// samples (a PID sampled but not listed ended before the list; its
// samples must not ask for another).
func (l *processListing) listed(procs []snapshot.Process, samples []nvml.ProcessUtilizationSample, memory usedMemory) {
	l.listedOnce, l.reads, l.memoryAtList = true, 0, memory
	l.pid.Clear()
	l.seen = l.seen[:0]
	l.sampledLast = 0
	for i := range procs {
		if _, ok := l.pid.Get(-1, procs[i].PID); !ok {
			l.pid.Set(-1, procs[i].PID, int32(len(l.seen)))
			l.seen = append(l.seen, seenPID{pid: procs[i].PID, sampledAt: -1})
		}
	}
	for i := range samples {
		pid := samples[i].Pid
		j, ok := l.pid.Get(i, pid)
		switch {
		case !ok:
			// Sampled, not listed: it ended before the list. Known, and
			// not expected at the next read.
			l.pid.Set(i, pid, int32(len(l.seen)))
			l.seen = append(l.seen, seenPID{pid: pid, sampledAt: ended})
		case l.seen[j].sampledAt == -1:
			l.seen[j].sampledAt = 0
			l.sampledLast++
		}
	}
	if l.migListed == nil {
		l.migListed = map[string]bool{}
	}
	clear(l.migListed)
	for i := range procs {
		if procs[i].MIGUUID != "" {
			l.migListed[procs[i].MIGUUID] = true
		}
	}
}
