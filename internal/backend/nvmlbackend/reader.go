//go:build cgo

package nvmlbackend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Options configure a Reader.
type Options struct {
	// Groups names the snapshot.Group* groups to read. A group not in the
	// map (or mapped to false) is not read: it makes no NVML call. Use
	// AllGroups() to read everything.
	Groups map[string]bool
	// Now is the clock for Snapshot.Time (the simulator passes its own
	// clock). Default time.Now.
	Now func() time.Time
	// Logger receives warnings (XID watcher failures, GPM set-up). Default:
	// discard.
	Logger *slog.Logger
	// Parallel is how many devices are read concurrently. Default
	// min(2*NumCPU, 8).
	Parallel int
	// Library names the driver library in Snapshot.Driver.Library. Default:
	// the path libnvidia-ml was loaded from.
	Library string
	// WaitForGPM makes the first Read wait until the GPM windows opened by
	// New span a second (see gpmMinWindow), so that a one-shot reading
	// (textfile, ps) has GPM values. A server leaves it off: its first
	// scrape simply has none yet.
	WaitForGPM bool
	// DownAfter is how long a device's read may run before the device is
	// reported down (not_answering). Until then a device whose read
	// misses the collection's deadline is served from its newest
	// completed reading (Device.ReadingAge says how old), so that a slow
	// driver's GPUs stay up. Default DownAfterTimeouts × StartTimeout.
	DownAfter time.Duration
	// StartTimeout bounds how long New waits for each device's start-up
	// calls (the first GPM sample, XID registration). A device that has
	// not answered by then is treated as hung: New returns without it,
	// and Read reports it down until its call returns. Default 5s; the
	// commands pass --collection.timeout.
	StartTimeout time.Duration
}

// AccountingOptions configure the accounting stage's reader
// (NewAccountingReader). Its Options are the scrape reader's, less
// Parallel: that reader reads its GPUs one after another on its caller.
type AccountingOptions struct {
	Options
	// GPMOnlyMIG reads GPM only on MIG-enabled GPUs, per instance, and of
	// it only the SM activity: the accounting needs that alone, there
	// alone (per-process samples measure whole GPUs), and a GPM sample of
	// every GPU at every tick costs, as does each metric the driver
	// computes from two samples.
	GPMOnlyMIG bool
	// ListProcessesEvery lists every GPU's processes only at every this
	// many reads (the first, and then all GPUs at the same read), and a
	// GPU's at any read where what the read measured says they may have
	// changed: a sample from a PID the last list did not hold, a PID
	// sampled at the previous read and not at this one, a MIG instance
	// turned busy with nobody listed in it or turned idle
	// (process_listing.go). A GPU with no such measure is listed at every
	// read. A read that does not list a GPU marks it
	// Device.ProcessesNotListed. 0 or 1: every read lists.
	ListProcessesEvery int
	// ListProcessesSteadyEvery, when above ListProcessesEvery, lists
	// every GPU only every this many reads; in between, a GPU's periodic
	// list (ListProcessesEvery reads after its last) is made only when its
	// used memory (the MIG instances' together on a MIG GPU) is not what
	// it was at its last list, or cannot be read. A process that starts
	// or ends, or grows or shrinks its memory, changes it; a GPU whose
	// processes and memory stand still is not listed again and again to
	// find the same list (process_listing.go).
	ListProcessesSteadyEvery int
	// XIDFrom, when that reader reads the xid group, gives this one its
	// XID counts instead of a watcher of its own: a second reader of the same
	// library (the accounting's, whose job records count XIDs) would
	// otherwise wait on every GPU a second time, another goroutine and
	// thread per GPU woken twice a second, for the same events. XIDFrom
	// must be closed after this reader; closing this one leaves its
	// watcher running.
	XIDFrom *Reader
}

// readMode is how a reader reads beyond its Options. New's (the scrape
// reader's) is the zero value; NewAccountingReader sets the accounting's.
type readMode struct {
	// processSamples hands every per-process utilization sample newer than
	// this reader's previous read to Device.ProcessSamples, and reads them
	// even when no process is listed (one that ended since the last read
	// leaves its samples). For the accounting stage, whose reader is its
	// own: the samples are then read exactly once each. A snapshot's
	// Devices (with their ProcessSamples) and Processes stay valid until
	// the read after the next one begins (two buffers take turns,
	// alternating.go): such a reader's snapshots are for one consumer
	// that is done with each before reading the next but one.
	processSamples bool
	gpmOnlyMIG     bool // AccountingOptions.GPMOnlyMIG
	// countersOnly reads, of the info, power and memory groups, what the
	// accounting's counters and job records use: the identity and the
	// MIG mode, not the persistence, compute and ECC modes; the energy
	// counter, not the power draw and limits; the framebuffer, not BAR1.
	// Eight calls fewer per GPU at every tick, each a round trip into the
	// driver on a real GPU.
	countersOnly bool
	listEvery    int // AccountingOptions.ListProcessesEvery
	// listSteady is AccountingOptions.ListProcessesSteadyEvery when above
	// listEvery; else 0.
	listSteady int
	// onCaller reads the GPUs one after another on the Read's own
	// goroutine, not each on a worker (read_on_caller.go): no goroutine
	// hand-offs, for a reader with one caller, called often, whose reads
	// are short (the accounting's tick). A call that hangs holds the
	// caller: the caller must be ready to leave it behind and Read again
	// from another goroutine (accounting.Accountant.Run does); that Read
	// serves the hung GPU late or as down, and the Read left behind stops,
	// with an error, when its call returns.
	onCaller bool
	xidFrom  *Reader // AccountingOptions.XIDFrom
}

// defaultStartTimeout is Options.StartTimeout's default.
const defaultStartTimeout = 5 * time.Second

// shutdownTimeout bounds how long Close waits for nvmlShutdown, which may
// wait in turn on a call blocked in a hung GPU.
const shutdownTimeout = 2 * time.Second

// closeWaitsForReads bounds how long Close waits for Reads in progress.
// Close comes at the process's end: a Read still running then is most
// likely blocked in a hung GPU, and NVML is left to the exit.
const closeWaitsForReads = 500 * time.Millisecond

// Reader reads every GPU of one NVML library into snapshots. It keeps
// per-device state between reads (static identity, GPM samples, the last
// process-utilization timestamp), so one Reader should serve all scrapes.
// Read is safe for concurrent use.
type Reader struct {
	lib    nvml.Interface
	groups groupSet
	// caps says which calls the loaded library exports; no call outside
	// it is ever made (it would end the process).
	caps capabilities
	// driver is fixed after New and copied into every snapshot.
	driver   snapshot.Driver
	now      func() time.Time
	log      *slog.Logger
	parallel int

	readMode

	// lifecycle is held for reading by Read and for writing by Close, so
	// Close waits for in-flight reads before it frees NVML resources.
	lifecycle sync.RWMutex
	closed    bool

	mu     sync.Mutex
	states map[int]*deviceState // by device index
	// reads counts the reads, for ListProcessesEvery.
	reads uint64
	// processes and devices hold the snapshots' process and device lists
	// of the accounting's reader (readMode.processSamples;
	// alternating.go), results its device results, by device index.
	processes alternating[snapshot.Process]
	devices   alternating[snapshot.Device]
	results   []*resultPair
	// groupStatus are the snapshots' Groups maps of the accounting's
	// reader, taking turns (takeGroupStatus).
	groupStatus     [2]map[string]snapshot.GroupStatus
	groupStatusTurn int
	versions        versions
	// gpmFirstWindow is when the GPM windows opened by New span
	// gpmMinWindow; zero once the first Read has passed it.
	gpmFirstWindow time.Time
	waitForGPM     bool

	// latestRead numbers the Reads on the caller: a Read whose number is
	// no longer the latest was left behind (read_on_caller.go).
	latestRead atomic.Uint64

	blocked blockedReads
	workers deviceWorkers
	// completed keeps each device's newest completed reading, for the
	// collections its next read does not answer in time (latereads.go).
	completed completedReadings
	downAfter time.Duration
	// dropped counts the readings validation dropped (validate.go).
	dropped droppedReadings

	xid *xidWatcher // nil when the xid group is off or no device supports it
	// xidBorrowed says xid is AccountingOptions.XIDFrom's: Close leaves it running.
	xidBorrowed bool
	// xidSetupErr is reported in Groups["xid"].Err on every read: the
	// watcher could not be started for a reason other than NOT_SUPPORTED.
	xidSetupErr error
}

// New initialises NVML and returns a Reader for the scrapes. When the
// library cannot be loaded the error wraps ErrLibraryNotFound.
func New(lib nvml.Interface, opts Options) (*Reader, error) {
	return openReader(lib, opts, readMode{})
}

// NewAccountingReader initialises NVML and returns the accounting stage's
// Reader: one caller, the accounting's ticker, reading often. It hands
// every per-process utilization sample once (Device.ProcessSamples; each
// snapshot stays valid until the read after the next one begins), reads of
// the info, power and memory groups only what the counters and job records
// use, and reads on its caller (read_on_caller.go): a call that hangs
// holds the caller, which must be ready to leave it behind and Read again
// from another goroutine (accounting.Accountant.Run does). When the
// library cannot be loaded the error wraps ErrLibraryNotFound.
func NewAccountingReader(lib nvml.Interface, opts AccountingOptions) (*Reader, error) {
	mode := readMode{processSamples: true, countersOnly: true, onCaller: true, gpmOnlyMIG: opts.GPMOnlyMIG,
		listEvery: opts.ListProcessesEvery, xidFrom: opts.XIDFrom}
	if opts.ListProcessesSteadyEvery > max(opts.ListProcessesEvery, 1) {
		mode.listSteady = opts.ListProcessesSteadyEvery
	}
	return openReader(lib, opts.Options, mode)
}

// openReader is New and NewAccountingReader.
func openReader(lib nvml.Interface, opts Options, mode readMode) (*Reader, error) {
	groups, err := parseGroups(opts.Groups)
	if err != nil {
		return nil, err
	}
	r := &Reader{
		lib:      lib,
		groups:   groups,
		now:      opts.Now,
		log:      opts.Logger,
		parallel: opts.Parallel,
		states:   make(map[int]*deviceState),

		waitForGPM: opts.WaitForGPM,
		readMode:   mode,
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.parallel <= 0 {
		r.parallel = min(2*runtime.NumCPU(), 8)
	}

	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("nvml init: %w", ErrLibraryNotFound)
	default:
		return nil, initError(lib, ret)
	}
	if err := r.inspectDriver(opts.Library); err != nil {
		return nil, err
	}

	start := opts.StartTimeout
	if start <= 0 {
		start = defaultStartTimeout
	}
	r.downAfter = opts.DownAfter
	if r.downAfter <= 0 {
		r.downAfter = DownAfterTimeouts * start
	}
	var hung []int
	if r.groups[gGPM] {
		hung = r.primeGPM(start)
	}
	if from := mode.xidFrom; r.groups[gXID] && from != nil && from.groups[gXID] {
		r.xid, r.xidSetupErr, r.xidBorrowed = from.xid, from.xidSetupErr, true
	} else if r.groups[gXID] && r.caps.xid() {
		var skipped []int
		r.xid, skipped, r.xidSetupErr = startXIDWatcher(lib, &r.caps, &r.blocked, start, r.log)
		hung = append(hung, skipped...)
	}
	r.logHungAtStart(hung, start)
	return r, nil
}

// logHungAtStart names the GPUs that did not answer New's calls in time:
// they are reported down (not_answering) until their calls return.
func (r *Reader) logHungAtStart(hung []int, timeout time.Duration) {
	slices.Sort(hung)
	hung = slices.Compact(hung)
	for _, i := range hung {
		if r.blocked.isAbandoned(i) {
			r.log.Warn("gpu did not answer NVML at start; reported down (gpu_up 0, not_answering) until it does",
				"gpu", i, "waited", timeout)
		}
	}
}

// Close stops the XID watcher (unless it is AccountingOptions.XIDFrom's), frees GPM
// samples and shuts NVML down. It waits for reads in progress, for up to
// closeWaitsForReads: a Read on the caller left behind in a hung GPU's
// call (readMode.onCaller) may never end, and then NVML is left as it
// is. Calling it twice is harmless.
func (r *Reader) Close() error {
	if !lockWithin(&r.lifecycle, closeWaitsForReads) {
		return fmt.Errorf("an nvml read did not end within %s (a GPU's call is blocked); leaving nvml as it is", closeWaitsForReads)
	}
	defer r.lifecycle.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.workers.stop()
	if r.xid != nil && !r.xidBorrowed {
		r.xid.stop()
	}
	r.mu.Lock()
	for _, st := range r.states {
		// A device whose read is blocked in a hung GPU holds its lock
		// for as long as the call blocks: its samples are left to the
		// process's exit.
		if !st.mu.TryLock() {
			continue
		}
		st.gpm.free()
		st.mu.Unlock()
	}
	r.mu.Unlock()
	if !r.caps.can(callShutdown) {
		return nil // a library without nvmlShutdown: the process ends anyway
	}
	shut := make(chan nvml.Return, 1)
	go func() { shut <- r.lib.Shutdown() }()
	select {
	case ret := <-shut:
		if ret != nvml.SUCCESS {
			return fmt.Errorf("nvml shutdown: %w", nvmlErr(ret))
		}
		return nil
	case <-time.After(shutdownTimeout):
		return fmt.Errorf("nvml shutdown did not return within %s (a GPU may be hung); leaving it", shutdownTimeout)
	}
}

// lockWithin locks l for writing, trying for up to d; false when it could
// not.
func lockWithin(l *sync.RWMutex, d time.Duration) bool {
	const poll = 10 * time.Millisecond
	for deadline := time.Now().Add(d); !l.TryLock(); time.Sleep(poll) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// errClosed is returned by Read after Close.
var errClosed = errors.New("nvml reader is closed")

// Read takes one full reading of every GPU. Only a failure to count the
// devices fails the whole read; any per-device or per-group problem is
// reported inside the snapshot (Device.Up, Snapshot.Groups).
func (r *Reader) Read(ctx context.Context) (*snapshot.Snapshot, error) {
	r.lifecycle.RLock()
	defer r.lifecycle.RUnlock()
	if r.closed {
		return nil, errClosed
	}

	var read uint64
	if r.onCaller {
		read = r.latestRead.Add(1)
	}
	snap := &snapshot.Snapshot{Time: r.now(), Driver: r.driver}
	var stats groupStats

	if r.groups[gInfo] {
		start := time.Now()
		v, err := r.readVersions()
		snap.DriverVersion, snap.CUDADriverVersion, snap.NVMLVersion = v.driver, v.cuda, v.nvml
		stats[gInfo].dur += time.Since(start)
		if err != nil {
			stats.fail(gInfo, err)
		}
	}

	count, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %w", nvmlErr(ret))
	}

	if r.groups[gGPM] {
		r.waitFirstGPMWindow(ctx)
	}
	results, err := r.readDevices(ctx, read, count, r.listsAll())
	if err != nil {
		return nil, err
	}
	if r.onCaller && r.latestRead.Load() != read {
		return nil, errSuperseded
	}

	snap.Devices = r.takeDevices(count)
	nprocs := 0
	for i, res := range results {
		snap.Devices[i] = res.device
		stats.add(&res.stats)
		nprocs += len(res.processes)
	}
	if nprocs > 0 {
		snap.Processes = r.takeProcesses(nprocs)
		for _, res := range results {
			snap.Processes = appendSorted(snap.Processes, res.processes)
		}
		r.keepProcesses(snap.Processes)
	}

	if r.groups[gXID] {
		start := time.Now()
		if r.xid != nil {
			r.xid.fill(snap.Devices)
			if err := r.xid.lastError(); err != nil {
				stats.fail(gXID, err)
			}
		}
		if r.xidSetupErr != nil {
			stats.fail(gXID, r.xidSetupErr)
		}
		stats[gXID].dur += time.Since(start)
	}

	snap.Groups = stats.statusMap(r.groups, r.takeGroupStatus())
	snap.ReadingsDropped = r.dropped.copy()
	return snap, nil
}

// takeGroupStatus is the map for a snapshot's group status: the
// accounting's reader's of this read (the two take turns, as its other
// buffers: alternating.go), nil (a new one) for any other reader.
func (r *Reader) takeGroupStatus() map[string]snapshot.GroupStatus {
	if !r.processSamples {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.groupStatus[r.groupStatusTurn]
	if m == nil {
		m = map[string]snapshot.GroupStatus{}
		r.groupStatus[r.groupStatusTurn] = m
	}
	r.groupStatusTurn ^= 1
	clear(m)
	return m
}

// takeDevices is the slice for a snapshot's count devices, each to be
// set whole: the accounting's reader's buffer of this read
// (alternating.go), a new one for any other.
func (r *Reader) takeDevices(count int) []snapshot.Device {
	if !r.processSamples {
		return make([]snapshot.Device, count)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.devices.keep(r.devices.take(count)[:count])
}

// takeProcesses is the slice for a snapshot's n processes: the
// accounting's reader's buffer of this read (alternating.go), a new one
// for any other.
func (r *Reader) takeProcesses(n int) []snapshot.Process {
	if !r.processSamples {
		return make([]snapshot.Process, 0, n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.processes.take(n)
}

// keepProcesses hands the buffer from takeProcesses back.
func (r *Reader) keepProcesses(procs []snapshot.Process) {
	if !r.processSamples {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.processes.keep(procs)
}

// listsAll says whether this read lists every GPU's processes: every read,
// or with ListProcessesEvery (ListProcessesSteadyEvery when set) every so
// many, all GPUs at the same read, so that the attribution sees a whole
// list (and forgets the processes that ended) at least that often.
func (r *Reader) listsAll() bool {
	every := r.listEvery
	if r.listSteady > 0 {
		every = r.listSteady
	}
	if !r.processSamples || every <= 1 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	return r.reads%uint64(every) == 1
}

// appendSorted appends one device's processes to dst in compareProcesses'
// order. The devices come in index order and a device's processes are its
// own, so the snapshot is sorted device by device: a list already in order
// is copied as it is, and another is sorted by index, not by moving its
// 472-byte entries about.
func appendSorted(dst, procs []snapshot.Process) []snapshot.Process {
	sorted := true
	for i := 1; i < len(procs) && sorted; i++ {
		sorted = compareProcesses(&procs[i-1], &procs[i]) <= 0
	}
	if sorted {
		return append(dst, procs...)
	}
	order := make([]int32, len(procs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareProcesses(&procs[a], &procs[b]) })
	for _, i := range order {
		dst = append(dst, procs[i])
	}
	return dst
}

func compareProcesses(a, b *snapshot.Process) int {
	return cmp.Or(
		cmp.Compare(a.GPU, b.GPU),
		cmp.Compare(a.PID, b.PID),
		cmp.Compare(a.Type, b.Type),
		cmp.Compare(a.MIGUUID, b.MIGUUID),
	)
}

// deviceResult is what reading one device produces.
type deviceResult struct {
	device    snapshot.Device
	processes []snapshot.Process
	stats     groupStats
}

// readDevices reads devices 0..count-1 with at most r.parallel at a time
// (readSlots), or one after another on the caller for Read number read
// (readMode.onCaller). Results are indexed by device index, so the
// snapshot is sorted for free.
//
// An NVML call can block for a long time on a GPU in a bad state. When ctx
// ends before a device's read returns, the device is reported down
// ("not_answering") and its read is left to finish on its own; until it
// does, later reads report that device down at once instead of starting
// another read that would block too. The other GPUs are read as usual.
func (r *Reader) readDevices(ctx context.Context, read uint64, count int, listAll bool) ([]*deviceResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	results := make([]*deviceResult, count)
	if r.onCaller {
		return results, r.readOnCaller(ctx, read, count, listAll, results)
	}
	done := make(chan deviceDone, count) // buffered: an abandoned read never blocks on it
	next, pending := 0, 0                // next: the first device not started yet
	slots := newReadSlots(ctx, count, r.parallel)
	defer slots.stop()
	startReads := func() {
		now := time.Now() // one clock read for the reads started together
		for ; next < count && slots.free(); next++ {
			if !r.blocked.start(next, now) {
				results[next] = r.lateOrDown(next)
				continue
			}
			slots.take(next, now)
			pending++
			r.workers.start(r, deviceRead{index: next, listAll: listAll, done: done})
		}
		if next < count {
			slots.wait(now)
		}
	}
	startReads()
	for pending > 0 {
		select {
		case f := <-done:
			results[f.index] = f.result
			pending--
			slots.release(f.index)
			startReads()
		case now := <-slots.expired():
			slots.expire(now)
			startReads()
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, ctx.Err()
			}
			// Deadline: report what answered, and the rest (in a call,
			// or never started) from their last completed reading, or
			// as down.
			for i := range count {
				if results[i] == nil {
					r.blocked.abandon(i)
					results[i] = r.lateOrDown(i)
				}
			}
			return results, nil
		}
	}
	return results, nil
}

// notAnswering is the reading of a device whose read did not return in time.
func (r *Reader) notAnswering(index int) snapshot.Device {
	return snapshot.Device{Index: index, UUID: r.knownUUID(index), DownReason: "not_answering"}
}

// knownUUID is the UUID device index had at its last successful read, or "".
func (r *Reader) knownUUID(index int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.states[index]; st != nil {
		return st.uuid
	}
	return ""
}

// state returns the per-device state for index, starting afresh when the
// UUID changed (a different GPU now has this index).
func (r *Reader) state(index int, uuid string) *deviceState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states[index]
	if st != nil && st.uuid == uuid {
		return st
	}
	if st != nil {
		// Another Read may be using the old state; free its samples under
		// its own lock.
		st.mu.Lock()
		st.retired = true
		st.gpm.free()
		st.mu.Unlock()
	}
	st = &deviceState{uuid: uuid}
	r.states[index] = st
	return st
}
