package attribution

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The procfs cache: Attributor.pids maps each PID to what /proc said about
// its process. Entries are changed only through putPid and removePid,
// which keep the groups' reference counts (groups.go), pidEntry.cached and
// Attributor.current right.

// listedProc is one process of a snapshot and its cache entry (nil when
// it has none). Kept from one Enrich to the next: when a PID is listed at
// the same position as in the previous snapshot, as it usually is, its
// entry is found there rather than by hashing the PID.
type listedProc struct {
	pid   uint32
	entry *pidEntry
}

// entryFor returns the entry of pid if l is pid's and its entry is still
// cached, and nil if pid must be looked up.
func (l listedProc) entryFor(pid uint32) *pidEntry {
	if l.pid == pid && l.entry != nil && l.entry.cached {
		return l.entry
	}
	return nil
}

// pidEntry is the cached procfs view of one process. The fields every
// warm Enrich reads come first, to share a cache line.
type pidEntry struct {
	cached bool   // still the entry in Attributor.pids for its PID
	exited bool   // its pidfd reported that the process exited: re-read the PID when listed
	pidfd  int32  // the process's pidfd in Attributor.watch, or -1: then checkAt applies
	gen    uint64 // the latest Enrich that listed the process
	// checkAt is when to re-read the start time of a process without a
	// pidfd.
	checkAt time.Time
	// The process's container and Slurm job (nil when no resolver or no
	// Slurm is asked about them), set when the entry is created.
	container  *containerGroup
	job        *jobGroup
	resolvedAt [2]uint64 // the container and job versions resolved holds; 0 before the first

	owner snapshot.Owner // the parts procfs and the cgroup give
	// resolved is owner with its container's and job's details; kept so
	// that a warm Enrich copies each owner once and merges nothing.
	resolved snapshot.Owner
}

// newPidEntry returns a cache entry for owner, seen in the current Enrich,
// in the groups of its container and job.
func (a *Attributor) newPidEntry(owner snapshot.Owner, checkAt time.Time) *pidEntry {
	return &pidEntry{
		pidfd:     -1,
		owner:     owner,
		checkAt:   checkAt,
		gen:       a.gen,
		container: a.containerGroupFor(owner.Container.Runtime, owner.Container.ID),
		job:       a.jobGroupFor(owner.Slurm.JobID),
	}
}

// uncachedEntry returns an entry, not cached, for a process that procfs
// has not been read for (yet) but whose owner the caller filled in, so
// that its container and job are resolved as they are; nil when there is
// nothing to resolve.
func (a *Attributor) uncachedEntry(o *snapshot.Owner) *pidEntry {
	if o.Container.ID == "" && o.Slurm.JobID == "" {
		return nil
	}
	return &pidEntry{
		pidfd:     -1,
		owner:     *o,
		container: a.containerGroupFor(o.Container.Runtime, o.Container.ID),
		job:       a.jobGroupFor(o.Slurm.JobID),
	}
}

// putPid caches e for pid, replacing any previous entry.
func (a *Attributor) putPid(pid uint32, e *pidEntry) {
	if old := a.pids[pid]; old != nil {
		a.release(old)
	}
	if e.container != nil {
		e.container.refs++
	}
	if e.job != nil {
		e.job.refs++
	}
	if e.gen == a.gen {
		a.current++
	}
	e.cached = true
	a.pids[pid] = e
}

// removePid forgets pid, whose entry is e.
func (a *Attributor) removePid(pid uint32, e *pidEntry) {
	a.release(e)
	delete(a.pids, pid)
}

// release closes e's pidfd, drops e's references to its groups and forgets
// groups left without any.
func (a *Attributor) release(e *pidEntry) {
	if a.watch != nil {
		a.watch.remove(e)
	}
	e.cached = false
	if e.gen == a.gen {
		a.current--
	}
	if g := e.container; g != nil {
		if g.refs--; g.refs <= 0 && a.containers[g.key] == g {
			delete(a.containers, g.key)
		}
	}
	if g := e.job; g != nil {
		if g.refs--; g.refs <= 0 && a.jobs[g.id] == g {
			delete(a.jobs, g.id)
		}
	}
}

// markSeen records that e's process is in the current Enrich.
func (a *Attributor) markSeen(e *pidEntry) {
	if e.gen != a.gen {
		e.gen = a.gen
		a.current++
	}
}

// watchEntry hands fd, the pidfd opened for e's process, to the exit
// watcher, or closes it when it cannot be watched; e is then checked
// periodically.
func (a *Attributor) watchEntry(e *pidEntry, fd int32) {
	if fd < 0 {
		return
	}
	if a.watch == nil {
		closePidfd(fd)
		return
	}
	if err := a.watch.add(int(fd), e); err != nil {
		closePidfd(fd)
		a.log.Debug("not watching process for exit; it will be checked periodically", "err", err)
	}
}

// noteExits marks the entries of watched processes that exited since the
// previous Enrich, so that readProcfs re-reads their PIDs if listed. It
// costs one non-blocking epoll_wait.
func (a *Attributor) noteExits() {
	if a.watch == nil {
		return
	}
	if err := a.watch.exited(func(e *pidEntry) { e.exited = true }); err != nil {
		// Not expected. Periodic checks take over: every entry's
		// checkAt is due or will be.
		a.log.Warn("watching processes for exit failed; checking them periodically instead", "err", err)
		a.watch.close()
		a.watch = nil
	}
}

// everyGPUListed says whether s lists the processes of every GPU. The
// accounting's reader, which shares the Attributor with the scrapes, lists
// them only every few ticks (snapshot.Device.ProcessesNotListed): a
// process missing from such a snapshot has not ended, and evicting it
// would have the next scrape read it again.
func everyGPUListed(s *snapshot.Snapshot) bool {
	for i := range s.Devices {
		if s.Devices[i].ProcessesNotListed {
			return false
		}
	}
	return true
}

// evictUnseen forgets the processes not in the current Enrich, which is
// also what makes a PID that comes back get re-read. When every cached
// process was seen, as in most scrapes, it costs nothing.
func (a *Attributor) evictUnseen() {
	if a.current == len(a.pids) {
		return
	}
	for pid, e := range a.pids {
		if e.gen != a.gen {
			a.removePid(pid, e)
		}
	}
}

// resolvedOwner returns e's owner with its container's and job's details
// merged in, computing it again only when they changed.
func (e *pidEntry) resolvedOwner() *snapshot.Owner {
	at := [2]uint64{1, 1} // an entry without groups needs resolving once
	if e.container != nil {
		at[0] = e.container.version
	}
	if e.job != nil {
		at[1] = e.job.version
	}
	if at == e.resolvedAt {
		return &e.resolved
	}
	o := &e.resolved
	*o = e.owner
	if c := e.container; c != nil {
		mergeContainer(o, c.meta)
	}
	if j := e.job; j != nil {
		o.Slurm.User, o.Slurm.Account = j.job.User, j.job.Account
		o.Slurm.Partition, o.Slurm.JobName = j.job.Partition, j.job.JobName
	}
	e.resolvedAt = at
	return o
}
