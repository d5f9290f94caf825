//go:build cgo

package nvmlbackend

import (
	"cmp"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The watcher's intervals. They are variables only so that this package's
// tests can shorten the event wait and the retry (main_test.go): a Close
// waits for each waiter to come back from its wait, and every test would
// otherwise sit that out.
var (
	// xidWaitTimeout bounds each wait for an event.
	xidWaitTimeout = 500 * time.Millisecond
	// xidStopTimeout bounds how long Close waits for the watcher: a wait
	// stuck in a hung driver must not hang the exporter's shutdown.
	xidStopTimeout = time.Second
	// xidRetryInterval paces rebuilding the event set after a failure.
	xidRetryInterval = 5 * time.Second
)

// xidWatcher counts XID errors. NVML delivers them as events on an event
// set, which can only be waited on, so goroutines wait and a Read only
// copies the counts: an XID storm or a hung driver never blocks a scrape.
//
// Each GPU has an event set of its own, waited on by a goroutine of its
// own. Failures are correlated (a baseboard or NVSwitch fault takes
// several GPUs at once, one falling off the bus while another raises an
// XID), and with one set for every GPU, a GPU's loss made the set answer
// GPU_IS_LOST and be rebuilt, and the XIDs other GPUs had pending in it
// were lost with it: nvml.h does not say whether pending events survive
// another GPU's loss, so nothing here depends on it. With a set per GPU a
// loss, a broken set (ERROR_UNKNOWN: nvml.h says it "is in undefined state
// and should be freed") or a wait blocked in a hung GPU touches only that
// GPU's set. The cost is one waiting goroutine (and, while it waits in the
// driver, one thread) per GPU.
type xidWatcher struct {
	lib  nvml.Interface
	caps *capabilities // the watcher is started only when caps.xid()
	log  *slog.Logger

	// blocked is the reader's bookkeeping of calls blocked in hung GPUs:
	// registration is bounded by timeout and skips a GPU known to hang.
	blocked *blockedReads
	timeout time.Duration

	mu     sync.Mutex
	counts map[string]*xidCounts // by GPU UUID, for every GPU ever registered
	// known are the registered devices, to map an event's device handle
	// back to a UUID when the handle can no longer answer GetUUID.
	known []xidDevice
	errs  map[int]error // per GPU: the last unexpected failure, cleared once waiting works again

	quit chan struct{}
	wg   sync.WaitGroup
}

type xidDevice struct {
	handle nvml.Device
	uuid   string
}

// xidCounts are one GPU's XIDs since the watcher started.
type xidCounts struct {
	total  uint64
	last   uint64 // code of the newest XID; 0 while there was none
	byCode map[uint64]uint64
}

// startXIDWatcher gives every device that can report XIDs an event set of
// its own, registers it and starts its waiter. It returns nil without an
// error when no device supports XID events (e.g. the simulator's consumer
// profile) and an error, to report in the xid group's status, for other
// failures. Registration waits at most timeout for each GPU; the GPUs
// that did not answer are returned, and registered later once they do.
func startXIDWatcher(lib nvml.Interface, caps *capabilities, blocked *blockedReads, timeout time.Duration, log *slog.Logger) (*xidWatcher, []int, error) {
	w := &xidWatcher{
		lib:     lib,
		caps:    caps,
		log:     log,
		blocked: blocked,
		timeout: timeout,
		counts:  make(map[string]*xidCounts),
		errs:    make(map[int]error),
		quit:    make(chan struct{}),
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("DeviceGetCount: %w", nvmlErr(ret))
	}
	gpus, missing, err := w.register(allDevices(count))
	if len(gpus) == 0 && len(missing) == 0 {
		return nil, nil, err
	}
	for _, g := range gpus {
		w.wg.Add(1)
		go g.run()
	}
	if len(missing) > 0 {
		w.wg.Add(1)
		go w.registerLater(missing)
	}
	return w, missing, err
}

// xidSet is an event set and the registration still running on it. A
// registration abandoned on a hung GPU may return at any time, so the set
// is freed only after the registration has returned.
type xidSet struct {
	set nvml.EventSet

	mu          sync.Mutex
	registering int  // registrations started and not yet returned
	freeing     bool // free was asked while a registration ran: it frees the set when it returns
}

func (s *xidSet) beginRegistrations(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registering += n
}

func (s *xidSet) endRegistration() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registering--
	if s.registering == 0 && s.freeing {
		freeEventSet(s.set)
	}
}

func (s *xidSet) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registering > 0 {
		s.freeing = true
		return
	}
	freeEventSet(s.set)
}

// xidGPU is one GPU's event set and the goroutine that waits on it.
type xidGPU struct {
	w      *xidWatcher
	index  int
	set    *xidSet // nil while the GPU is lost or its set could not be rebuilt
	device xidDevice
	// rebuiltAt is when the set was last rebuilt after a failure.
	rebuiltAt time.Time
}

// register gives each of the given devices a new event set and registers
// it there, each within w.timeout. It returns the devices registered and
// the ones that did not answer in time (or still have a blocked call); a
// lost GPU or one without XID events is in neither. err is the first
// unexpected failure. No set is kept when EventSetCreate is not supported.
func (w *xidWatcher) register(indices []int) (gpus []*xidGPU, missing []int, err error) {
	sets, ok, err := w.createSets(len(indices))
	if !ok {
		return nil, nil, err
	}
	results := make([]xidRegistration, len(indices))
	slot := make(map[int]int, len(indices)) // device index → position in indices
	for k, i := range indices {
		slot[i] = k
	}
	outcomes := w.blocked.callEach(w.timeout, indices, func(i int) {
		k := slot[i]
		defer sets[k].endRegistration()
		results[k] = w.registerDevice(i, sets[k].set)
	})
	for k, o := range outcomes {
		switch o {
		case callSkipped:
			sets[k].endRegistration() // its call never started
			sets[k].free()
			missing = append(missing, indices[k])
			continue
		case callAbandoned:
			sets[k].free() // once the registration returns
			missing = append(missing, indices[k])
			continue
		}
		res := results[k]
		if res.tried && classify(res.ret) == succeeded {
			gpus = append(gpus, &xidGPU{w: w, index: indices[k], set: sets[k], device: res.device})
			continue
		}
		sets[k].free()
		if res.tried && classify(res.ret) == failed && err == nil {
			err = fmt.Errorf("gpu %d: RegisterEvents: %w", indices[k], nvmlErr(res.ret))
		}
	}
	w.remember(gpus)
	return gpus, missing, err
}

// createSets creates n event sets, each with one registration begun. ok is
// false, and no set is kept, when one could not be created: err says why,
// nil when the driver has no event sets.
func (w *xidWatcher) createSets(n int) (sets []*xidSet, ok bool, err error) {
	sets = make([]*xidSet, n)
	for k := range n {
		created, ret := w.lib.EventSetCreate()
		switch classify(ret) {
		case succeeded:
			sets[k] = &xidSet{set: created}
			sets[k].beginRegistrations(1)
			continue
		case absent:
		default:
			err = fmt.Errorf("EventSetCreate: %w", nvmlErr(ret))
		}
		for _, s := range sets[:k] {
			s.endRegistration()
			s.free()
		}
		return nil, false, err
	}
	return sets, true, nil
}

// xidRegistration is how registering one device for XID events went.
type xidRegistration struct {
	device xidDevice
	ret    nvml.Return
	tried  bool // the device answered and RegisterEvents was called
}

// registerDevice registers device i for XID events on set; it is not tried
// on a lost GPU, which raises no more events, nor on one that says it has
// no XID events.
func (w *xidWatcher) registerDevice(i int, set nvml.EventSet) xidRegistration {
	dev, ret := w.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return xidRegistration{}
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return xidRegistration{}
	}
	// When the device says which events it supports, respect it;
	// otherwise let RegisterEvents decide.
	if w.caps.can(callGetSupportedEventTypes) {
		if types, ret := dev.GetSupportedEventTypes(); ret == nvml.SUCCESS && types&nvml.EventTypeXidCriticalError == 0 {
			return xidRegistration{}
		}
	}
	return xidRegistration{
		device: xidDevice{handle: dev, uuid: uuid},
		ret:    dev.RegisterEvents(nvml.EventTypeXidCriticalError, set),
		tried:  true,
	}
}

// remember starts the XID counts of newly registered GPUs (kept across a
// GPU's loss and return) and adds them to the known devices.
func (w *xidWatcher) remember(gpus []*xidGPU) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range gpus {
		if w.counts[g.device.uuid] == nil {
			w.counts[g.device.uuid] = &xidCounts{byCode: make(map[uint64]uint64)}
		}
		w.known = append(w.known, g.device)
	}
}

// registerLater tries every xidRetryInterval to register the GPUs that did
// not answer at start, and starts a waiter for each that it registers.
func (w *xidWatcher) registerLater(missing []int) {
	defer w.wg.Done()
	for len(missing) > 0 {
		if !w.pause(xidRetryInterval) {
			return
		}
		gpus, stillMissing, err := w.register(missing)
		missing = stillMissing
		if err != nil {
			w.setErr(-1, err)
		}
		for _, g := range gpus {
			w.wg.Add(1)
			go g.run()
		}
		if len(gpus) > 0 {
			w.log.Info("xid: registered GPUs that answer again", "gpus", len(gpus))
		}
	}
}

// freeEventSet frees a set; a panicking binding must not stop the watcher.
func freeEventSet(set nvml.EventSet) {
	defer func() { _ = recover() }()
	set.Free()
}

// run waits for the GPU's events until the watcher stops.
func (g *xidGPU) run() {
	w := g.w
	defer w.wg.Done()
	defer func() {
		if g.set != nil {
			g.set.free()
		}
	}()
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		if g.set == nil {
			// Lost, or its set could not be rebuilt: a GPU that comes
			// back (a reset) is registered again.
			if !w.pause(xidRetryInterval) {
				return
			}
			g.rebuild()
			continue
		}
		data, ret := g.wait()
		switch ret {
		case nvml.SUCCESS:
			w.record(data, g.device)
		case nvml.ERROR_TIMEOUT:
			// Waiting works: an earlier failure is over.
			w.setErr(g.index, nil)
		case nvml.ERROR_UNKNOWN:
			w.setErr(g.index, fmt.Errorf("gpu %d: EventSetWait: %w", g.index, nvmlErr(ret)))
			if time.Since(g.rebuiltAt) < xidRetryInterval {
				// The set rebuilt a moment ago broke again: do not
				// spin on a driver that breaks every set.
				g.set.free()
				g.set = nil
				continue
			}
			g.rebuild()
		case nvml.ERROR_GPU_IS_LOST:
			// This GPU fell off the bus: its set is of no more use. Its
			// counts stay (fill reports them on the down device).
			g.set.free()
			g.set = nil
		default:
			w.setErr(g.index, fmt.Errorf("gpu %d: EventSetWait: %w", g.index, nvmlErr(ret)))
			// Do not spin on a persistent error.
			if !w.pause(xidWaitTimeout) {
				return
			}
		}
	}
}

// rebuild frees the GPU's set and registers the GPU on a new one. XIDs
// raised in between are lost: NVML records only events after a
// registration.
func (g *xidGPU) rebuild() {
	if g.set != nil {
		g.set.free()
		g.set = nil
	}
	g.rebuiltAt = time.Now()
	gpus, _, err := g.w.register([]int{g.index})
	if len(gpus) == 1 {
		g.set, g.device = gpus[0].set, gpus[0].device
		g.w.setErr(g.index, nil)
		g.w.log.Info("xid: event set rebuilt", "gpu", g.index)
		return
	}
	if err != nil {
		g.w.setErr(g.index, err)
	}
}

// pause waits d or until stop; false means stop.
func (w *xidWatcher) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.quit:
		return false
	case <-t.C:
		return true
	}
}

// wait waits for one event; a panic in the binding becomes an error, since
// nothing can recover a panic in this goroutine later.
func (g *xidGPU) wait() (data nvml.EventData, ret nvml.Return) {
	defer func() {
		if p := recover(); p != nil {
			ret = nvml.ERROR_UNKNOWN
			g.w.log.Error("xid: event wait panicked", "gpu", g.index, "panic", p)
		}
	}()
	return g.set.set.Wait(uint32(xidWaitTimeout / time.Millisecond))
}

// record counts one event; own is the device whose set delivered it.
func (w *xidWatcher) record(data nvml.EventData, own xidDevice) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	uuid := w.uuidOf(data.Device, own)
	if uuid == "" {
		w.log.Warn("xid: event from an unknown device", "xid", data.EventData)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.counts[uuid]
	if c == nil {
		c = &xidCounts{byCode: make(map[uint64]uint64)}
		w.counts[uuid] = c
	}
	c.total++
	c.last = data.EventData
	c.byCode[data.EventData]++
}

// uuidOf maps an event's device to its UUID: by asking it, or, when it no
// longer answers (an XID often means the GPU is going away), by comparing
// the handle with the registered ones.
func (w *xidWatcher) uuidOf(dev nvml.Device, own xidDevice) (uuid string) {
	if dev == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			uuid = ""
		}
	}()
	if u, ret := dev.GetUUID(); ret == nvml.SUCCESS && u != "" {
		return u
	}
	if !reflect.TypeOf(dev).Comparable() {
		return ""
	}
	same := func(d xidDevice) bool {
		return d.handle != nil && reflect.TypeOf(d.handle) == reflect.TypeOf(dev) && d.handle == dev
	}
	if same(own) {
		return own.uuid
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.known {
		if same(d) {
			return d.uuid
		}
	}
	return ""
}

// setErr records (or, with nil, clears) GPU gpu's failure; -1 is a failure
// of no one GPU.
func (w *xidWatcher) setErr(gpu int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		delete(w.errs, gpu)
		return
	}
	if w.errs[gpu] == nil {
		w.log.Warn("xid: waiting for events failed", "gpu", gpu, "err", err)
	}
	w.errs[gpu] = err
}

// lastError is the failure of the lowest-numbered GPU that has one.
func (w *xidWatcher) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := -2
	for gpu := range w.errs {
		if first == -2 || gpu < first {
			first = gpu
		}
	}
	if first == -2 {
		return nil
	}
	return w.errs[first]
}

// fill copies the counts into the devices: the total and the last code for
// every GPU the watcher registered (present from start, at 0, so that
// increase() sees the first XID), and the count per code, sorted. A device
// that is down keeps its counts: the XID that announced the loss (79,
// fallen off the bus) is the one an operator most needs to see.
func (w *xidWatcher) fill(devices []snapshot.Device) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range devices {
		if devices[i].UUID == "" {
			continue
		}
		c := w.counts[devices[i].UUID]
		if c == nil {
			continue
		}
		devices[i].XIDEvents = snapshot.Some(c.total)
		devices[i].XIDLastCode = snapshot.Some(c.last)
		if len(c.byCode) == 0 {
			continue
		}
		counts := make([]snapshot.XIDCount, 0, len(c.byCode))
		for xid, n := range c.byCode {
			counts = append(counts, snapshot.XIDCount{XID: xid, Count: n})
		}
		slices.SortFunc(counts, func(a, b snapshot.XIDCount) int { return cmp.Compare(a.XID, b.XID) })
		devices[i].XIDErrors = counts
	}
}

// stop ends the watcher, whose goroutines free their event sets on the way
// out. It waits at most xidStopTimeout: a wait blocked in a hung driver is
// left to return on its own.
func (w *xidWatcher) stop() {
	close(w.quit)
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	t := time.NewTimer(xidStopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Warn("xid: the event watcher did not stop in time; leaving it", "waited", xidStopTimeout)
	}
}
