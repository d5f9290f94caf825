package accounting

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Defaults of Options.
const (
	// DefaultInterval is the tick. The driver samples each process's
	// utilization about every 1/6 s, keeps the samples in a buffer and
	// answers each process's mean since the time asked from (nvml.h:
	// "read utilization since the previous query"): a tick within that
	// buffer integrates every sample whatever its length. NVIDIA's own
	// per-process monitor reads as seldom as every 10 s (nvidia-smi pmon
	// -d), DCGM's job statistics every 30 s. Shorter ticks cost CPU (each
	// reads the processes and the energy counter of every GPU, and wakes
	// the process) and gain no SM time; longer ones make held time, idle
	// allocations and job peaks coarser. docs/accounting.md, "Why 5 s".
	DefaultInterval = 5 * time.Second
	// DefaultIdleThreshold: an allocation whose own processes used less
	// than 5 % of its GPU's (or MIG instance's) SM time over an interval
	// was idle in it. Below 5 %, a job is loading data or waiting on the
	// CPU, not computing; a notebook left open reads 0–2 %.
	DefaultIdleThreshold = 0.05
	// DefaultNewOwnerHold is how long a new owner's totals read 0 before
	// they count up, so that Prometheus, scraping at any interval up to
	// this, stores the 0 first and increase() counts all of a short job
	// (it cannot count a series' first sample). What is accumulated
	// meanwhile is not lost: it shows at the end of the hold.
	DefaultNewOwnerHold = time.Minute
	// DefaultRetention is how long an ended owner's (or allocation's)
	// totals stay listed after it was last seen, so that its last value
	// is scraped (after the hold, too) before the series goes.
	DefaultRetention = 10 * time.Minute
	// DefaultTickTimeout is Options.TickTimeout's default: above the 5 s
	// collection timeout and the 1 s of attribution after it.
	DefaultTickTimeout = 7 * time.Second
	// ListInterval is how often, at most, the accounting's reader lists a
	// GPU's processes (and the attribution names their owners) when its
	// samples show no change but its used memory moved: a process that
	// starts or ends while busy is listed at once, one that starts or
	// ends idle (its memory comes or goes) is noticed within this.
	// Between lists each owner holds the memory listed last. A list per
	// tick cost several times a scrape (bench/RESULTS.md).
	ListInterval = 16 * time.Second
	// SteadyListInterval is how often every GPU is listed when neither
	// its samples nor its used memory moved: a list then finds the same
	// processes holding the same memory, and was, on a busy fleet, about
	// a third of the accounting's CPU. It bounds what the memory cannot
	// show: one process's memory growing as another's shrinks by as much.
	SteadyListInterval = 64 * time.Second
	// AllocationMaxAge is how old an allocation source's cached answer
	// (the kubelet's) a tick takes before it asks the source itself: the
	// scrapes and the live page refresh the cache at their own pace (15 s
	// for the live page), and the kubelet's 5 s cache would otherwise have
	// every third tick call it. Slurm's allocations are polled every
	// --slurm.poll-interval (30 s) anyway: so a pod's allocation, as a
	// job's, is seen to start or end within about this.
	AllocationMaxAge = 30 * time.Second
)

// ListProcessesEvery is the reader's nvmlbackend.AccountingOptions.ListProcessesEvery
// for ticks of interval: a list at least every ListInterval.
func ListProcessesEvery(interval time.Duration) int {
	if interval <= 0 {
		return 1
	}
	return max(1, int(ListInterval/interval))
}

// ListProcessesSteadyEvery is the reader's
// nvmlbackend.AccountingOptions.ListProcessesSteadyEvery for ticks of interval:
// every GPU listed at least every SteadyListInterval.
func ListProcessesSteadyEvery(interval time.Duration) int {
	if interval <= 0 {
		return 1
	}
	return max(1, int(SteadyListInterval/interval))
}

// Options tunes an Accountant. Zero values mean the defaults.
type Options struct {
	IdleThreshold float64
	NewOwnerHold  time.Duration
	Retention     time.Duration
	// TickTimeout is how long Run waits for a tick's collection before it
	// leaves it behind and ticks on from another goroutine (run.go). Keep
	// it above the collection's own deadlines (read and attribution).
	TickTimeout time.Duration
}

// Check refuses options that make no sense, naming the option.
func (o Options) Check() error {
	switch {
	case o.IdleThreshold < 0 || o.IdleThreshold > 1 || o.IdleThreshold != o.IdleThreshold:
		return fmt.Errorf("idle threshold %g is not a ratio between 0 and 1", o.IdleThreshold)
	case o.NewOwnerHold < 0:
		return fmt.Errorf("new-owner hold %s is negative", o.NewOwnerHold)
	case o.Retention < 0:
		return fmt.Errorf("retention %s is negative", o.Retention)
	case o.TickTimeout < 0:
		return fmt.Errorf("tick timeout %s is negative", o.TickTimeout)
	case o.Retention > 0 && o.Retention <= o.withDefaults().NewOwnerHold:
		return fmt.Errorf("retention %s must be longer than the new-owner hold %s, or an owner that ends within its hold would never show its totals", o.Retention, o.withDefaults().NewOwnerHold)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.IdleThreshold == 0 {
		o.IdleThreshold = DefaultIdleThreshold
	}
	if o.NewOwnerHold == 0 {
		o.NewOwnerHold = DefaultNewOwnerHold
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.TickTimeout == 0 {
		o.TickTimeout = DefaultTickTimeout
	}
	return o
}

// Accountant integrates snapshots into running totals. Observe and Run
// are for the accounting's own goroutine; Enrich and Totals are safe for
// concurrent use with them.
type Accountant struct {
	opts Options

	mu sync.Mutex
	st state

	// published is what Enrich hands to outputs, never modified after;
	// stale says a tick integrated since it was built. It is built when
	// an output asks (a scrape every 15 s or so), not at every tick.
	published *snapshot.Accounting
	stale     bool

	// afterTick is told of every tick Run integrated (see AfterTick).
	afterTick func(s *snapshot.Snapshot, totals *snapshot.Accounting)

	// ticks and tickCPU are what Run's ticks cost (tickcpu.go);
	// cpuMeasured says the thread's clock answered at least once.
	ticks       uint64
	tickCPU     time.Duration
	cpuMeasured bool
}

// New returns an Accountant; it refuses options Check refuses.
func New(opts Options) (*Accountant, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	return &Accountant{opts: opts.withDefaults(), st: newState(), published: &snapshot.Accounting{}}, nil
}

// Observe integrates one enriched snapshot: the interval since the
// previous one it observed. The first snapshot only sets the start.
func (a *Accountant) Observe(s *snapshot.Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.st.integrate(s, a.opts) {
		return
	}
	a.st.expire(s.Time, a.opts.Retention)
	a.stale = true
}

// Enrich hands the totals of the last tick to a snapshot that outputs
// render (a pipeline.Enricher, last after attribution).
func (a *Accountant) Enrich(_ context.Context, s *snapshot.Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stale {
		a.published, a.stale = a.viewLocked(a.opts.NewOwnerHold), false
	}
	s.Accounting = a.published
}

// viewLocked is the totals for the outputs (hold: the new-owner hold),
// with what the ticks cost; a.mu held.
func (a *Accountant) viewLocked(hold time.Duration) *snapshot.Accounting {
	acc := a.st.view(a.st.last, hold)
	acc.Ticks = a.ticks
	if a.cpuMeasured {
		acc.TickCPUSeconds = snapshot.Some(a.tickCPU.Seconds())
	}
	return acc
}

// addTick counts one of Run's ticks and the CPU it took (measured false:
// the thread's clock could not be read).
func (a *Accountant) addTick(cpu time.Duration, measured bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ticks++
	if measured {
		a.tickCPU += cpu
		a.cpuMeasured = true
	}
	a.stale = true
}

// Totals returns a copy of the running totals without the new-owner hold:
// every figure as integrated so far. For a checkpoint or a record.
func (a *Accountant) Totals() *snapshot.Accounting {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.viewLocked(0)
}

// ReaderGroups are the collector groups the accounting's own backend
// reader reads: processes (with their samples), the energy counter, MIG
// instances with their GPM activity, and the MIG mode.
func ReaderGroups() map[string]bool {
	return map[string]bool{
		snapshot.GroupInfo: true, snapshot.GroupPower: true, snapshot.GroupProcesses: true,
		snapshot.GroupMIG: true, snapshot.GroupGPM: true,
	}
}
