package slurm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// ErrJobNotFound is returned by Lookup for a job the controller does not
// know (finished and purged, or never existed).
var ErrJobNotFound = errors.New("slurm job not found")

// GPUAllocation says that a job holds GPU index GPU (as Slurm numbers the
// node's GPUs, which is the NVML index order when gres.conf lists
// /dev/nvidia0.. in order, as AutoDetect=nvml does) on Node.
type GPUAllocation struct {
	Node string
	GPU  int
	Type string // "" when Slurm names none
	Job  snapshot.SlurmJob
	// Start is when the job started, zero when Slurm did not say.
	Start time.Time
}

// JobLookupOptions configure a JobLookup. Zero values mean defaults.
type JobLookupOptions struct {
	ScontrolPath string        // default "scontrol"
	SqueuePath   string        // default "squeue"
	Timeout      time.Duration // per command; default 10 s
	// TTL is how long one job's answer is reused; default 30 s. A job
	// that was not found is remembered as such for the same time.
	TTL time.Duration
	// ListInterval is how long the list of jobs running on a node is
	// reused by Allocations; default 30 s.
	ListInterval time.Duration
	Runner       CommandRunner // default ExecRunner{Timeout}
	Now          func() time.Time
}

// JobLookup answers "which job is this?" and "which job holds which GPU on
// this node?" with cached, time-bounded calls to scontrol and squeue. It is
// shared by the attribution resolver (processes with SLURM_JOB_ID) and by
// gpu_slurm_job_info on compute nodes. Safe for concurrent use.
type JobLookup struct {
	opts JobLookupOptions

	mu      sync.Mutex
	jobs    map[string]*jobEntry
	running map[string]*pollCache // per node: job ids running there
	// changes counts the changes to jobs and the new lists of running
	// jobs, to tell a cached answer from one given before
	// (CachedAllocations); atomic, so that NodeAllocations can tell its
	// kept answer still stands without taking the lookup's locks.
	changes atomic.Uint64
}

type jobEntry struct {
	at     time.Time
	job    Job
	err    error
	flight chan struct{} // non-nil while a lookup runs
}

// maxCachedJobs bounds the per-job cache; expired entries are dropped
// first when it is reached.
const maxCachedJobs = 20000

// NewJobLookup checks the options and returns a lookup.
func NewJobLookup(opts JobLookupOptions) (*JobLookup, error) {
	if opts.ScontrolPath == "" {
		opts.ScontrolPath = "scontrol"
	}
	if opts.SqueuePath == "" {
		opts.SqueuePath = "squeue"
	}
	if opts.Timeout < 0 || opts.TTL < 0 || opts.ListInterval < 0 {
		return nil, fmt.Errorf("slurm job lookup: negative timeout, TTL or list interval")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultPollInterval
	}
	if opts.ListInterval == 0 {
		opts.ListInterval = DefaultPollInterval
	}
	if opts.Runner == nil {
		opts.Runner = ExecRunner{Timeout: opts.Timeout, MaxOutput: 64 << 20}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &JobLookup{opts: opts, jobs: map[string]*jobEntry{}, running: map[string]*pollCache{}}, nil
}

// ValidJobID accepts what SLURM_JOB_ID and squeue print: digits, with an
// optional array task (_N) or het component (+N). Anything else is refused
// before it reaches a command line.
func ValidJobID(id string) bool {
	base, rest := id, ""
	if i := strings.IndexAny(id, "_+"); i >= 0 {
		base, rest = id[:i], id[i+1:]
		if !isDigits(rest) {
			return false
		}
	}
	return isDigits(base) && len(id) <= 32
}

// Lookup returns the job's identity. Concurrent lookups of one job share
// one scontrol call; answers are cached for TTL.
func (l *JobLookup) Lookup(ctx context.Context, jobID string) (snapshot.SlurmJob, error) {
	j, err := l.job(ctx, jobID)
	if err != nil {
		return snapshot.SlurmJob{}, err
	}
	return toSnapshot(j, jobID), nil
}

func toSnapshot(j Job, id string) snapshot.SlurmJob {
	if id == "" {
		id = j.ID
	}
	return snapshot.SlurmJob{
		JobID: id, User: j.User, Account: j.Account,
		Partition: j.Partition, JobName: j.Name,
	}
}

func (l *JobLookup) job(ctx context.Context, jobID string) (Job, error) {
	if !ValidJobID(jobID) {
		return Job{}, fmt.Errorf("slurm job lookup: %q is not a job id", jobID)
	}
	for {
		l.mu.Lock()
		e := l.jobs[jobID]
		if e != nil && e.flight == nil && l.opts.Now().Sub(e.at) < l.opts.TTL {
			l.mu.Unlock()
			return e.job, e.err
		}
		if e != nil && e.flight != nil {
			wait := e.flight
			l.mu.Unlock()
			select {
			case <-wait:
				continue // re-read the finished entry
			case <-ctx.Done():
				return Job{}, ctx.Err()
			}
		}
		if len(l.jobs) >= maxCachedJobs {
			l.pruneLocked()
		}
		e = &jobEntry{flight: make(chan struct{})}
		l.jobs[jobID] = e
		l.mu.Unlock()

		// Not bound to ctx: other callers may be waiting on this flight.
		job, err := l.fetchJob(context.Background(), jobID)

		l.mu.Lock()
		e.job, e.err, e.at = job, err, l.opts.Now()
		l.changes.Add(1)
		close(e.flight)
		e.flight = nil
		l.mu.Unlock()
		return job, err
	}
}

func (l *JobLookup) pruneLocked() {
	now := l.opts.Now()
	for id, e := range l.jobs {
		if e.flight == nil && now.Sub(e.at) >= l.opts.TTL {
			delete(l.jobs, id)
			l.changes.Add(1)
		}
	}
	// Still full of fresh entries: drop the oldest half.
	if len(l.jobs) >= maxCachedJobs {
		type idAt struct {
			id string
			at time.Time
		}
		var all []idAt
		for id, e := range l.jobs {
			if e.flight == nil {
				all = append(all, idAt{id, e.at})
			}
		}
		sort.Slice(all, func(a, b int) bool { return all[a].at.Before(all[b].at) })
		for _, x := range all[:len(all)/2] {
			delete(l.jobs, x.id)
			l.changes.Add(1)
		}
	}
}

func (l *JobLookup) fetchJob(ctx context.Context, jobID string) (Job, error) {
	out, err := l.opts.Runner.Run(ctx, l.opts.ScontrolPath, "show", "job", "-d", "-o", jobID)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "Invalid job id") {
			return Job{}, fmt.Errorf("job %s: %w", jobID, ErrJobNotFound)
		}
		return Job{}, err
	}
	jobs, err := ParseScontrolJobs(out)
	if err != nil {
		return Job{}, err
	}
	// An array job id lists every task; take the one asked for, else the
	// first.
	for _, j := range jobs {
		if j.ID == jobID {
			return j, nil
		}
	}
	if len(jobs) > 0 {
		return jobs[0], nil
	}
	return Job{}, fmt.Errorf("job %s: %w", jobID, ErrJobNotFound)
}

// Allocations returns, for every job running on node, the GPU indexes it
// holds there, sorted by GPU index. The list of running jobs comes from
// `squeue -h -w NODE -t RUNNING -o %i` (cached for ListInterval); each job's
// GPU indexes from `scontrol show job -d -o ID` (cached for TTL), so an
// idle job still shows up as holding its GPUs.
func (l *JobLookup) Allocations(ctx context.Context, node string) ([]GPUAllocation, error) {
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	r := l.runningCache(node).get(ctx)
	if r.Err != nil {
		return nil, r.Err
	}
	return l.allocationsOf(node, r.Value.([]string), func(id string) (Job, bool, error) {
		j, err := l.job(ctx, id)
		return j, true, err
	})
}

// CachedAllocations is Allocations answered from the caches alone, when
// the running jobs and every one of them are cached and fresh: no command
// runs and nothing waits. ok is false when Allocations must be asked.
// version changes whenever the answer may have: equal versions, equal
// answers.
func (l *JobLookup) CachedAllocations(node string) (allocs []GPUAllocation, version CacheVersion, ok bool) {
	ids, version, _, ok := l.cachedRunning(node)
	if !ok {
		return nil, CacheVersion{}, false
	}
	allocs, err := l.allocationsOf(node, ids, func(id string) (Job, bool, error) {
		j, _, ok, err := l.cachedJob(id)
		return j, ok, err
	})
	if err != nil {
		return nil, CacheVersion{}, false
	}
	return allocs, version, true
}

// CacheVersion tells one state of a JobLookup's caches for a node from
// another (CachedAllocations).
type CacheVersion struct{ running, jobs uint64 }

// cachedVersionUntil is the version CachedAllocations would answer with,
// without building the answer (ok is false when it would not answer), and
// until when it stands unless the caches change (changeCount): the first of
// the running jobs' list and their answers to expire.
func (l *JobLookup) cachedVersionUntil(node string) (version CacheVersion, until time.Time, ok bool) {
	ids, version, until, ok := l.cachedRunning(node)
	if !ok {
		return CacheVersion{}, time.Time{}, false
	}
	for _, id := range ids {
		_, at, ok, err := l.cachedJob(id)
		if !ok || (err != nil && !errors.Is(err, ErrJobNotFound)) {
			return CacheVersion{}, time.Time{}, false
		}
		if expires := at.Add(l.opts.TTL); expires.Before(until) {
			until = expires
		}
	}
	return version, until, true
}

// changeCount counts the changes to the caches: a cached answer, and the
// time it stands until (cachedVersionUntil), stand while it does not
// move.
func (l *JobLookup) changeCount() uint64 { return l.changes.Load() }

// cachedRunning is node's running jobs when their list is cached and
// fresh, with the caches' version as of now and when the list expires.
func (l *JobLookup) cachedRunning(node string) ([]string, CacheVersion, time.Time, bool) {
	if checkNodeName(node) != nil {
		return nil, CacheVersion{}, time.Time{}, false
	}
	jobs := l.changes.Load()
	pc := l.runningCache(node)
	r, run, fresh := pc.fresh()
	if !fresh || r.Err != nil {
		return nil, CacheVersion{}, time.Time{}, false
	}
	return r.Value.([]string), CacheVersion{running: run, jobs: jobs}, r.At.Add(pc.interval), true
}

// errNotCached stops CachedAllocations at a job its cache cannot answer.
var errNotCached = errors.New("not cached")

// cachedJob is job's answer when it is cached and fresh, and when it was
// fetched (ok false, with errNotCached, when it is not cached).
func (l *JobLookup) cachedJob(jobID string) (Job, time.Time, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[jobID]
	if e == nil || e.flight != nil || l.opts.Now().Sub(e.at) >= l.opts.TTL {
		return Job{}, time.Time{}, false, errNotCached
	}
	return e.job, e.at, true, e.err
}

func checkNodeName(node string) error {
	if node == "" || strings.ContainsAny(node, " ,[]\t\n") || strings.HasPrefix(node, "-") {
		return fmt.Errorf("slurm allocations: %q is not a node name", node)
	}
	return nil
}

// allocationsOf builds the allocations on node of the running jobs ids,
// each looked up by job (ok false: stop, with its error).
func (l *JobLookup) allocationsOf(node string, ids []string, job func(id string) (j Job, ok bool, err error)) ([]GPUAllocation, error) {
	var out []GPUAllocation
	var firstErr error
	for _, id := range ids {
		j, ok, err := job(id)
		if !ok {
			return nil, err
		}
		if err != nil {
			if errors.Is(err, ErrJobNotFound) {
				continue // finished since squeue ran
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		sj := toSnapshot(j, id)
		for _, a := range j.GPUAlloc {
			if a.Node != node {
				continue
			}
			for _, idx := range a.Indexes {
				out = append(out, GPUAllocation{Node: node, GPU: idx, Type: a.Type, Job: sj, Start: j.Start})
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].GPU != out[b].GPU {
			return out[a].GPU < out[b].GPU
		}
		return out[a].Job.JobID < out[b].Job.JobID
	})
	return out, firstErr
}

func (l *JobLookup) runningCache(node string) *pollCache {
	l.mu.Lock()
	defer l.mu.Unlock()
	pc := l.running[node]
	if pc == nil {
		pc = &pollCache{
			interval: l.opts.ListInterval,
			now:      l.opts.Now,
			changed:  &l.changes,
			fetch: func(ctx context.Context) (any, error) {
				out, err := l.opts.Runner.Run(ctx, l.opts.SqueuePath, "-h", "-w", node, "-t", "RUNNING", "-o", "%i")
				if err != nil {
					return nil, err
				}
				var ids []string
				for i, line := range strings.Split(string(out), "\n") {
					line = strings.TrimSpace(line)
					if line == "" {
						continue
					}
					if !ValidJobID(line) {
						return nil, fmt.Errorf("squeue -o %%i: line %d: %q is not a job id", i+1, line)
					}
					ids = append(ids, line)
				}
				return ids, nil
			},
		}
		l.running[node] = pc
	}
	return pc
}

// ToSnapshotAllocations maps GPU allocations to snapshot.Allocations,
// filling GPUUUID from the devices of the snapshot (index → UUID). An index
// the snapshot does not have is kept with an empty UUID.
func ToSnapshotAllocations(allocs []GPUAllocation, devices []snapshot.Device) []snapshot.Allocation {
	uuid := make(map[int]string, len(devices))
	for _, d := range devices {
		uuid[d.Index] = d.UUID
	}
	out := make([]snapshot.Allocation, 0, len(allocs))
	for _, a := range allocs {
		out = append(out, snapshot.Allocation{GPU: a.GPU, GPUUUID: uuid[a.GPU], Slurm: a.Job, Start: a.Start})
	}
	return out
}
