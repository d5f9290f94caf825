// Package attribution finds who owns each GPU process: the unix user and
// command, the container (Docker, containerd, CRI-O, Podman), the
// Kubernetes pod and the Slurm job.
//
// The Attributor fills snapshot.Process.Owner in place. What /proc says
// about a process (uid, command, cgroup → container id, pod UID, job id) is
// read once per process and cached per (pid, start time); what the runtime
// APIs and Slurm say is cached per container id and per job id. With warm
// caches Enrich makes no system call per process. Every lookup that can
// block runs with a timeout, in the background, so Enrich returns within
// its context's budget however slow a socket is; the answer serves the next
// scrape.
//
// A PID that the kernel reuses for a new process must not keep the old
// process's owner. Where ProcRoot is the procfs of the exporter's own PID
// namespace, each cached process is watched through a pidfd, and the next
// Enrich after it exits re-reads its PID if the driver still lists it (one
// non-blocking epoll_wait per Enrich, exitwatch.go). Elsewhere, and for
// processes no pidfd could be opened for, the start time is re-checked
// every Options.RevalidateInterval. Close releases the pidfds.
package attribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Attribution sources, the keys of Snapshot.AttributionErrors.
const (
	SourceProcfs  = "procfs"
	SourceDocker  = "docker"
	SourceCRI     = "cri"
	SourceKubelet = "kubelet"
	SourceSlurm   = "slurm"
)

// Options configures an Attributor. The zero value of each field means its
// default.
type Options struct {
	// ProcRoot is where procfs is mounted (--path.procfs). Default "/proc".
	ProcRoot string
	// RootFS is the host's root as mounted in the exporter's container
	// (--path.rootfs). When set, user names come from RootFS/etc/passwd
	// instead of /etc/passwd.
	RootFS string
	// DockerSocket is the Docker Engine API endpoint (--docker.socket),
	// "unix:///var/run/docker.sock" or a Podman service socket. "" turns
	// the Docker resolver off.
	DockerSocket string
	// Timeout bounds each lookup (one socket call, one Slurm query).
	// Default 1s.
	Timeout time.Duration
	// Logger receives failures; lookups that fail repeatedly are logged
	// at debug level only. Default: discard.
	Logger *slog.Logger
	// Slurm resolves job ids to job details; nil leaves them out (the job
	// id and step from the cgroup are still reported).
	Slurm SlurmLookup
	// Resolvers are further container resolvers (the CRI resolver), tried
	// after the Docker one for the runtimes they handle.
	Resolvers []ContainerResolver
	// AllocationSources fill Snapshot.Allocations (kubelet pod-resources).
	AllocationSources []AllocationSource

	// RevalidateInterval is how often a cached process without a pidfd is
	// checked against /proc (its start time re-read) to catch a reused
	// PID. Default 30s. Checks are spread over the interval, so the cost
	// is a few reads per scrape rather than a burst. Processes watched
	// through a pidfd (ProcRoot the procfs of this PID namespace, Linux
	// 5.3 or later, pidfd_open allowed) are not checked periodically: their
	// exit is noticed at the next Enrich.
	RevalidateInterval time.Duration
	// CacheTTL is how long a runtime's or Slurm's answer is kept. Default 5m.
	CacheTTL time.Duration
	// NegativeCacheTTL is how long a failed lookup is not retried, and how
	// long an unreachable socket is left alone. Default 30s.
	NegativeCacheTTL time.Duration
	// FullCommandLines makes Owner.Command the whole command line, every
	// argument included (--attribution.full-command-lines, and `gpuwatch
	// ps`). Off, Owner.Command is the executable's base name only and the
	// command line is never read: arguments often carry secrets.
	FullCommandLines bool
}

// Attributor fills in the owners of GPU processes. It is safe for
// concurrent use; concurrent Enrich calls run one after the other.
type Attributor struct {
	log         *slog.Logger
	timeout     time.Duration
	revalidate  time.Duration
	stuckAfter  time.Duration // a procfs job running longer is abandoned
	now         func() time.Time
	procs       *procReader
	watch       *exitWatcher // nil where pidfds cannot be used, and after Close
	users       *userDB
	errs        *errorCounts
	resolvers   []containerSource
	slurm       *lookupCache[snapshot.SlurmJob]
	allocations []allocationSource

	mu           sync.Mutex
	pids         map[uint32]*pidEntry
	gen          uint64   // Enrich calls so far; entries not seen in the latest are evicted
	job          *procJob // reads of new PIDs, still running after an Enrich stopped waiting
	revalidation *procJob // PID-reuse checks, never waited for
	lastSweep    time.Time
	current      int                              // entries in pids seen in the current Enrich (gen == a.gen)
	containers   map[containerKey]*containerGroup // the containers of cached processes (groups.go)
	jobs         map[string]*jobGroup             // their Slurm jobs
	// Per-call scratch space, kept to spare the warm path allocations.
	entries          []listedProc // per process of the snapshot: its PID and cache entry
	listedContainers []*containerGroup
	listedJobs       []*jobGroup
	queued           map[uint32]struct{}
	// joined is the allocation sources' cached answers of the last
	// Enrich, joined (allocations.go).
	joined joinedAllocations
	// cachedParts is cachedAllocations' buffer.
	cachedParts [][]snapshot.Allocation
}

type containerSource struct {
	resolver ContainerResolver
	cache    *lookupCache[ContainerMeta]
}

// New returns an Attributor. It fails when ProcRoot is not a procfs-like
// directory or DockerSocket is malformed; an absent socket is not an error
// (the daemon may start later).
func New(opts Options) (*Attributor, error) {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RevalidateInterval <= 0 {
		opts.RevalidateInterval = 30 * time.Second
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 5 * time.Minute
	}
	if opts.NegativeCacheTTL <= 0 {
		opts.NegativeCacheTTL = 30 * time.Second
	}
	procs, err := newProcReader(opts.ProcRoot)
	if err != nil {
		return nil, err
	}
	procs.fullCommandLines = opts.FullCommandLines
	// Every step that can fail comes before the exit watcher, whose epoll
	// and pidfd descriptors would otherwise leak on an error return.
	resolvers := opts.Resolvers
	if opts.DockerSocket != "" {
		docker, err := NewDockerResolver(opts.DockerSocket, opts.Timeout)
		if err != nil {
			return nil, err
		}
		resolvers = append([]ContainerResolver{docker}, resolvers...)
	}
	watch, err := newExitWatcher(opts.ProcRoot)
	if err != nil {
		opts.Logger.Info("not watching GPU processes for exit; checking for reused PIDs periodically instead",
			"interval", opts.RevalidateInterval, "reason", err)
	}
	passwd := "/etc/passwd"
	if opts.RootFS != "" {
		passwd = filepath.Join(opts.RootFS, "etc", "passwd")
	}
	a := &Attributor{
		log:         opts.Logger,
		timeout:     opts.Timeout,
		revalidate:  opts.RevalidateInterval,
		stuckAfter:  max(10*opts.Timeout, 10*time.Second),
		now:         time.Now,
		procs:       procs,
		watch:       watch,
		users:       newUserDB(passwd),
		allocations: allocationSources(opts.AllocationSources),
		pids:        make(map[uint32]*pidEntry),
		containers:  make(map[containerKey]*containerGroup),
		jobs:        make(map[string]*jobGroup),
		queued:      make(map[uint32]struct{}),
	}
	clock := func() time.Time { return a.now() }

	sources := []string{SourceProcfs}
	for _, r := range resolvers {
		sources = append(sources, r.Source())
	}
	for _, s := range opts.AllocationSources {
		sources = append(sources, s.Source())
	}
	if opts.Slurm != nil {
		sources = append(sources, SourceSlurm)
	}
	a.errs = newErrorCounts(sources...)

	for _, r := range resolvers {
		a.resolvers = append(a.resolvers, containerSource{
			resolver: r,
			cache:    newLookupCache(r.Source(), r.Resolve, opts.Timeout, opts.CacheTTL, opts.NegativeCacheTTL, a.errs, a.log, clock),
		})
	}
	if opts.Slurm != nil {
		a.slurm = newLookupCache(SourceSlurm, opts.Slurm, opts.Timeout, opts.CacheTTL, opts.NegativeCacheTTL, a.errs, a.log, clock)
	}
	return a, nil
}

// Enrich fills s.Processes[i].Owner, appends to s.Allocations, and writes
// the cumulative error counts into s.AttributionErrors. It returns when
// everything is known, when ctx is done, or after Options.Timeout,
// whichever is first; what was not known in time stays empty and is
// usually there on the next call. (Waiting for another Enrich to finish
// comes on top: calls run one at a time.)
func (a *Attributor) Enrich(ctx context.Context, s *snapshot.Snapshot) {
	a.enrich(ctx, s, 0)
}

// WithAllocationMaxAge is an enricher that enriches as a does, sharing
// its caches, but takes an allocation source's cached answer up to maxAge
// old (AgedAllocationSource) where Enrich calls the source once its
// answer passed the source's own freshness. For a caller that enriches
// every few seconds (the accounting's ticks), which would otherwise call
// the kubelet every time its 5 s cache ran out, while the scrapes, at
// their own pace, keep the cache refreshed.
func (a *Attributor) WithAllocationMaxAge(maxAge time.Duration) *AgedAttributor {
	return &AgedAttributor{a: a, maxAge: maxAge}
}

// AgedAttributor is an Attributor's WithAllocationMaxAge view.
type AgedAttributor struct {
	a      *Attributor
	maxAge time.Duration
}

// Enrich is Attributor.Enrich with the view's allocation age. Of a
// snapshot that lists no GPU's processes (an accounting tick between two
// lists) only the allocations are needed: when every source has a cached
// answer, Enrich sets them and the error counts and does nothing else. It
// reads no procfs, merges no lookup that finished meanwhile and sweeps no
// cache: the next whole Enrich does, a scrape's or a list's (most of what
// such a tick cost the attribution).
func (v *AgedAttributor) Enrich(ctx context.Context, s *snapshot.Snapshot) {
	if listsNoGPU(s) && v.a.enrichAllocationsOnly(s, v.maxAge) {
		return
	}
	v.a.enrich(ctx, s, v.maxAge)
}

// listsNoGPU says whether s holds no process list at all: every GPU up
// and its processes not listed.
func listsNoGPU(s *snapshot.Snapshot) bool {
	if len(s.Processes) > 0 || len(s.Allocations) > 0 || len(s.Devices) == 0 {
		return false
	}
	for i := range s.Devices {
		if !s.Devices[i].ProcessesNotListed {
			return false
		}
	}
	return true
}

// enrichAllocationsOnly sets s's allocations and error counts when every
// allocation source has an answer up to maxAge old in its cache, and
// reports whether they had.
func (a *Attributor) enrichAllocationsOnly(s *snapshot.Snapshot, maxAge time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	cached, ok := a.cachedAllocations(s.Devices, maxAge)
	if !ok {
		return false
	}
	if cached != nil {
		s.Allocations = a.joined.of(cached)
	}
	a.setErrorCounts(s)
	return true
}

// setErrorCounts hands the cumulative error counts to s: a shared,
// read-only map (as the snapshot once enriched), or into the map s has.
func (a *Attributor) setErrorCounts(s *snapshot.Snapshot) {
	if s.AttributionErrors == nil {
		s.AttributionErrors = a.errs.shared()
	} else {
		a.errs.copyInto(s.AttributionErrors)
	}
}

// enrich is Enrich taking allocation sources' cached answers up to
// allocationMaxAge old (0: each source's own freshness).
func (a *Attributor) enrich(ctx context.Context, s *snapshot.Snapshot, allocationMaxAge time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// The pipelines give their enrichers this very budget already; a
	// context of its own (a timer) only when the caller's ends later.
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > a.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	start := a.now()
	a.gen++
	a.current = 0

	due := a.readProcfs(ctx, s.Processes, start)
	if everyGPUListed(s) {
		a.evictUnseen()
	}
	a.resolve(ctx, s, allocationMaxAge)

	a.setErrorCounts(s)

	// Started last, so that its reads do not compete with this call.
	if len(due) > 0 {
		a.revalidation = startProcJob(a.procs, a.openPidfd(), a.errs, a.log, due, 1, start)
	}

	if start.Sub(a.lastSweep) > time.Minute {
		a.lastSweep = start
		for _, r := range a.resolvers {
			r.cache.sweep()
		}
		if a.slurm != nil {
			a.slurm.sweep()
		}
		a.sweepGroups()
	}
}

// readProcfs brings the procfs cache up to date for the reported PIDs,
// marks their entries seen and leaves them in a.entries.
//
// A PID whose watched process exited (noteExits) is re-read like a new
// one, with its cached start time: a new process gets a new entry; when
// /proc/PID is gone, or still shows the exited process (a zombie), the
// entry keeps its owner, as the driver may list an exited process's PID
// for a while.
//
// New PIDs are read in a background job that Enrich waits for until ctx is
// done: a process stuck in the kernel (a read of /proc/PID/cmdline can
// block on the process's memory lock) cannot hold Enrich past its budget. A
// job that outlives its Enrich is merged by the next one, and no second
// job starts meanwhile.
//
// Cached PIDs due for their PID-reuse check are returned, for Enrich to
// re-check in a second background job that it starts last and does not
// wait for at all: its results are merged by the next Enrich. This keeps
// the checks' system calls out of the scrape's latency, at the price of
// one more scrape before a reused PID is noticed.
func (a *Attributor) readProcfs(ctx context.Context, procs []snapshot.Process, now time.Time) (due []procRequest) {
	coldBusy := a.collect(&a.job, now)
	revalidateBusy := a.collect(&a.revalidation, now)
	a.noteExits()

	var cold []procRequest
	clear(a.queued)
	prev := len(a.entries)
	if len(procs) < prev {
		clear(a.entries[len(procs):]) // not to keep evicted entries alive
	}
	a.entries = slices.Grow(a.entries, max(len(procs)-prev, 0))[:len(procs)]
	for i := range procs {
		pid := procs[i].PID
		var e *pidEntry
		if i < prev {
			e = a.entries[i].entryFor(pid)
		}
		if e == nil {
			e = a.pids[pid]
		}
		a.entries[i] = listedProc{pid, e}
		if e != nil {
			a.markSeen(e)
		}
		switch {
		case e == nil || e.exited:
			// A process on several GPUs is listed several times.
			if _, dup := a.queued[pid]; !dup && !coldBusy {
				a.queued[pid] = struct{}{}
				req := procRequest{pid: pid}
				if e != nil {
					req.knownStart, req.exited = e.owner.StartTime, true
				}
				cold = append(cold, req)
			}
		case e.pidfd < 0 && !now.Before(e.checkAt) && !revalidateBusy:
			// Not due again until the check comes back.
			e.checkAt = now.Add(a.revalidate)
			due = append(due, procRequest{pid: pid, knownStart: e.owner.StartTime})
		}
	}
	if len(cold) > 0 {
		job := startProcJob(a.procs, a.openPidfd(), a.errs, a.log, cold, procWorkers, now)
		select {
		case <-job.done:
			a.merge(job, now)
			for i := range a.entries {
				// New, or replaced: the PID's exited process was
				// followed by another.
				if e := a.entries[i].entry; e == nil || !e.cached {
					a.entries[i].entry = a.pids[procs[i].PID]
				}
			}
		case <-ctx.Done():
			a.job = job
		}
	}
	return due
}

// collect merges the job in *slot if it has finished, abandons it if it is
// stuck, and reports whether it is still running.
func (a *Attributor) collect(slot **procJob, now time.Time) (busy bool) {
	job := *slot
	if job == nil {
		return false
	}
	select {
	case <-job.done:
		a.merge(job, now)
		*slot = nil
		return false
	default:
	}
	if now.Sub(job.started) < a.stuckAfter {
		return true
	}
	if job.giveUp() {
		a.abandon(job, now)
	} else {
		// It finished just now.
		<-job.done
		a.merge(job, now)
	}
	*slot = nil
	return false
}

// openPidfd returns the function that the procfs jobs open pidfds with, or
// nil when processes are not watched for exit.
func (a *Attributor) openPidfd() func(pid int) (int, error) {
	if a.watch == nil {
		return nil
	}
	return a.watch.open
}

// Close releases the pidfds that watch the cached processes for exit, and
// the pidfds of procfs reads still running. Enrich may still be called
// afterwards; PID reuse is then checked for periodically. Close is
// idempotent.
func (a *Attributor) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, slot := range []**procJob{&a.job, &a.revalidation} {
		if job := *slot; job != nil {
			if !job.giveUp() {
				<-job.done
				job.closePidfds()
			}
			*slot = nil
		}
	}
	if a.watch == nil {
		return nil
	}
	err := a.watch.close()
	a.watch = nil
	if err != nil {
		return fmt.Errorf("attribution: closing the exit watcher: %w", err)
	}
	return nil
}

// abandon gives up on a job that has been stuck for stuckAfter, so that one
// process hung in the kernel does not stop new processes from being read.
// The processes it is stuck on are cached with an empty owner (or keep the
// one they had) until their next check, and counted as errors; its
// goroutines stay blocked until the kernel lets them go.
func (a *Attributor) abandon(job *procJob, now time.Time) {
	for _, pid := range job.stuckPIDs() {
		a.errs.add(SourceProcfs)
		a.log.Warn("reading process is stuck; skipping it until it is next checked", "pid", pid, "for", now.Sub(job.started))
		if e := a.pids[pid]; e == nil {
			a.putPid(pid, a.newPidEntry(snapshot.Owner{}, now.Add(a.revalidate)))
		} else {
			// An exited process's PID is re-read at every Enrich that
			// lists it; stuck, it is left to the periodic check, or
			// every scrape would wait for it.
			e.exited = false
			e.checkAt = now.Add(a.revalidate)
		}
	}
}

// merge stores the results of a finished procfs job in the cache.
func (a *Attributor) merge(job *procJob, now time.Time) {
	if err := a.users.refresh(); err != nil {
		a.log.Warn("user names unavailable; reporting uids only", "err", err)
	}
	for _, res := range job.results {
		old := a.pids[res.pid]
		if res.unchanged {
			// Still the same process (for an exited one, its zombie);
			// its next check is already set.
			continue
		}
		if errors.Is(res.err, errReadBusy) {
			// Not read: an earlier read is still stuck. Treated as the
			// stuck process it is (see abandon), until its next check.
			if old == nil {
				a.putPid(res.pid, a.newPidEntry(snapshot.Owner{}, now.Add(a.revalidate)))
			} else {
				old.exited = false
				old.checkAt = now.Add(a.revalidate)
			}
			continue
		}
		if res.err != nil && errors.Is(res.err, errProcGone) && old != nil && res.facts.StartTime == 0 {
			// The process exited while the driver still lists it: its
			// memory was the old process's, so keep that owner.
			closePidfd(res.pidfd)
			continue
		}
		// New process, or a reused PID. Spread first checks over the
		// interval so that a burst of new processes does not become a
		// burst of checks.
		jitter := time.Duration(rand.Int64N(int64(a.revalidate)/2 + 1))
		e := a.newPidEntry(a.ownerFromFacts(res.facts), now.Add(a.revalidate/2+jitter))
		a.putPid(res.pid, e)
		a.watchEntry(e, res.pidfd)
	}
}

func (a *Attributor) ownerFromFacts(f procFacts) snapshot.Owner {
	o := snapshot.Owner{
		StartTime: f.StartTime,
		UID:       f.UID,
		Command:   f.Command,
	}
	if o.Command == "" {
		// Kernel threads and zombies have an empty cmdline.
		o.Command = f.Comm
	}
	if f.UID != "" {
		o.User = a.users.name(f.UID)
	}
	cg := f.Cgroup
	o.Container.Runtime, o.Container.ID = cg.Runtime, cg.ContainerID
	o.Pod.UID, o.Pod.QoSClass = cg.PodUID, cg.QoSClass
	o.Slurm.JobID, o.Slurm.Step = cg.SlurmJobID, cg.SlurmStep
	if o.Slurm.JobID == "" {
		o.Slurm.JobID, o.Slurm.Step = f.EnvSlurmJobID, f.EnvSlurmStep
	}
	return o
}

// resolve asks the runtimes and Slurm about the containers and jobs in s,
// each unique one once, concurrently, and fills in the owners (from
// a.entries) with what is known by the time ctx is done or Timeout has
// passed.
func (a *Attributor) resolve(ctx context.Context, s *snapshot.Snapshot, allocationMaxAge time.Duration) {
	waits := a.startLookups(s)
	allocations := a.listAllocations(s.Devices, allocationMaxAge)
	if len(waits) > 0 || allocations != nil {
		awaitLookups(ctx, waits)
		if allocations != nil {
			s.Allocations = a.addAllocations(ctx, s.Allocations, allocations)
		}
	}
	a.takeContainerAnswers()
	a.takeJobAnswers()
	for i := range a.entries {
		if e := a.entries[i].entry; e != nil {
			s.Processes[i].Owner = *e.resolvedOwner()
		}
	}
}

// startLookups lists, once per collection, the containers and Slurm jobs
// of this collection's processes and starts the runtime and Slurm lookups
// their caches need; it returns what to wait for.
func (a *Attributor) startLookups(s *snapshot.Snapshot) []<-chan struct{} {
	a.listedContainers = a.listedContainers[:0]
	a.listedJobs = a.listedJobs[:0]
	var waits []<-chan struct{}
	for i := range a.entries {
		e := a.entries[i].entry
		if e == nil {
			if e = a.uncachedEntry(&s.Processes[i].Owner); e == nil {
				continue
			}
			a.entries[i].entry = e
		}
		if c := e.container; c != nil && c.seen != a.gen {
			c.seen = a.gen
			a.listedContainers = append(a.listedContainers, c)
			for _, ri := range c.resolvers {
				if ch := a.resolvers[ri].cache.refresh(c.key.id); ch != nil {
					waits = append(waits, ch)
				}
			}
		}
		if j := e.job; j != nil && j.seen != a.gen {
			j.seen = a.gen
			a.listedJobs = append(a.listedJobs, j)
			if ch := a.slurm.refresh(j.id); ch != nil {
				waits = append(waits, ch)
			}
		}
	}
	return waits
}

// awaitLookups waits for the lookups until ctx ends; those still running
// then finish in the background and serve the next call.
func awaitLookups(ctx context.Context, waits []<-chan struct{}) {
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// takeContainerAnswers merges the resolvers' cached answers into each
// listed container, versioning it when they changed so that its processes'
// owners are rebuilt.
func (a *Attributor) takeContainerAnswers() {
	for _, c := range a.listedContainers {
		var meta ContainerMeta
		for _, ri := range c.resolvers {
			m, _ := a.resolvers[ri].cache.get(c.key.id)
			meta.fillFrom(m)
		}
		if meta != c.meta || c.version == 0 {
			c.meta = meta
			c.version++
		}
	}
}

// takeJobAnswers does the same for the listed Slurm jobs.
func (a *Attributor) takeJobAnswers() {
	for _, j := range a.listedJobs {
		if job, _ := a.slurm.get(j.id); job != j.job || j.version == 0 {
			j.job = job
			j.version++
		}
	}
}

// fillFrom fills m's empty fields from other: merged in resolver order, an
// earlier resolver's answer wins.
func (m *ContainerMeta) fillFrom(other ContainerMeta) {
	fill(&m.Name, other.Name)
	fill(&m.Image, other.Image)
	fill(&m.ComposeProject, other.ComposeProject)
	fill(&m.ComposeService, other.ComposeService)
	fill(&m.PodName, other.PodName)
	fill(&m.PodNamespace, other.PodNamespace)
	fill(&m.PodContainer, other.PodContainer)
}

// mergeContainer fills the owner's empty fields from meta.
func mergeContainer(o *snapshot.Owner, meta ContainerMeta) {
	fill(&o.Container.Name, meta.Name)
	fill(&o.Container.Image, meta.Image)
	fill(&o.Container.ComposeProject, meta.ComposeProject)
	fill(&o.Container.ComposeService, meta.ComposeService)
	fill(&o.Pod.Name, meta.PodName)
	fill(&o.Pod.Namespace, meta.PodNamespace)
	fill(&o.Pod.Container, meta.PodContainer)
}

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// String describes the configuration, for the startup log.
func (a *Attributor) String() string {
	names := []string{SourceProcfs}
	for _, r := range a.resolvers {
		names = append(names, r.resolver.Source())
	}
	for _, s := range a.allocations {
		names = append(names, s.Source())
	}
	if a.slurm != nil {
		names = append(names, SourceSlurm)
	}
	// Slurm is both a job lookup and an allocation source: name it once.
	slices.Sort(names[1:])
	names = slices.Compact(names)
	a.mu.Lock()
	watched := a.watch != nil
	a.mu.Unlock()
	reuse := fmt.Sprintf("PID reuse checked every %s", a.revalidate)
	if watched {
		reuse = "processes watched for exit through pidfds"
	}
	return fmt.Sprintf("attribution sources %v, timeout %s, %s", names, a.timeout, reuse)
}
