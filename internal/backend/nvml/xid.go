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

const (
	// xidWaitTimeout bounds each wait for an event.
	xidWaitTimeout = 500 * time.Millisecond
	// xidStopTimeout bounds how long Close waits for the watcher: a wait
	// stuck in a hung driver must not hang the exporter's shutdown.
	xidStopTimeout = 2 * xidWaitTimeout
	// xidRetryInterval paces rebuilding the event set after a failure.
	xidRetryInterval = 5 * time.Second
)

// xidWatcher counts XID errors. NVML delivers them as events on an event
// set, which can only be waited on, so a goroutine waits and a Read only
// copies the counts: an XID storm or a hung driver never blocks a scrape.
//
// The event set follows nvml.h: after ERROR_UNKNOWN it "is in undefined
// state and should be freed", so it is freed and built again; after
// GPU_IS_LOST it is built again without the lost GPU (whose registration
// now fails), so that the other GPUs' XIDs keep arriving.
type xidWatcher struct {
	lib  nvml.Interface
	caps *capabilities // the watcher is started only when caps.xid()
	log  *slog.Logger

	// blocked is the reader's bookkeeping of calls blocked in hung GPUs:
	// registration is bounded by timeout and skips a GPU known to hang.
	blocked *blockedReads
	timeout time.Duration

	// set, devices, missing and triedAt belong to the run goroutine once
	// it started.
	set *xidSet
	// devices are the registered devices, to map an event's device handle
	// back to a UUID when the handle can no longer answer GetUUID.
	devices []xidDevice
	// missing are the GPUs that did not answer when the set was built
	// (hung): registering them is tried again every xidRetryInterval.
	missing []int
	triedAt time.Time

	mu     sync.Mutex
	counts map[string]*xidCounts // by GPU UUID, for every GPU ever registered
	err    error                 // last unexpected failure, cleared once waiting works again

	quit chan struct{}
	done chan struct{}
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

// startXIDWatcher creates the event set, registers every device that can
// report XIDs and starts the watcher. It returns nil without an error when
// no device supports XID events (e.g. the simulator's consumer profile) and
// an error, to report in the xid group's status, for other failures.
// Registration waits at most timeout for each GPU; the GPUs that did not
// answer are returned, and registered later once they do.
func startXIDWatcher(lib nvml.Interface, caps *capabilities, blocked *blockedReads, timeout time.Duration, log *slog.Logger) (*xidWatcher, []int, error) {
	w := &xidWatcher{
		lib:     lib,
		caps:    caps,
		log:     log,
		blocked: blocked,
		timeout: timeout,
		counts:  make(map[string]*xidCounts),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	set, devices, missing, err := w.build()
	if set == nil {
		return nil, nil, err
	}
	w.set, w.devices, w.missing, w.triedAt = set, devices, missing, time.Now()
	go w.run()
	return w, missing, err
}

// xidSet is an event set and the registrations still running on it. A
// registration abandoned on a hung GPU may return at any time, so the set
// is freed only after every registration on it has returned.
type xidSet struct {
	set nvml.EventSet

	mu          sync.Mutex
	registering int  // registrations started and not yet returned
	freeing     bool // free was asked while registrations ran: the last one frees it
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

// build creates an event set and registers every device that answers and
// supports XID events. set is nil when none could be registered and none
// is missing (hung); err is the first unexpected failure.
func (w *xidWatcher) build() (set *xidSet, devices []xidDevice, missing []int, err error) {
	created, ret := w.lib.EventSetCreate()
	switch classify(ret) {
	case succeeded:
	case absent:
		return nil, nil, nil, nil
	default:
		return nil, nil, nil, fmt.Errorf("EventSetCreate: %w", nvmlErr(ret))
	}
	set = &xidSet{set: created}
	count, ret := w.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		set.free()
		return nil, nil, nil, fmt.Errorf("DeviceGetCount: %w", nvmlErr(ret))
	}
	devices, missing, err = w.register(set, allDevices(count))
	if len(devices) == 0 && len(missing) == 0 {
		set.free()
		return nil, nil, nil, err
	}
	return set, devices, missing, err
}

// register registers the given devices on set, each within w.timeout. It
// returns the devices registered and the ones that did not answer in time
// (or still have a blocked call); a lost GPU or one without XID events is
// in neither.
func (w *xidWatcher) register(set *xidSet, indices []int) (devices []xidDevice, missing []int, err error) {
	type registration struct {
		device xidDevice
		ret    nvml.Return
		tried  bool // the device answered and RegisterEvents was called
	}
	results := make([]registration, len(indices))
	slot := make(map[int]int, len(indices)) // device index → position in indices
	for k, i := range indices {
		slot[i] = k
	}
	set.beginRegistrations(len(indices))
	outcomes := w.blocked.callEach(w.timeout, indices, func(i int) {
		defer set.endRegistration()
		dev, ret := w.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return // a lost GPU raises no more events
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			return
		}
		// When the device says which events it supports, respect it;
		// otherwise let RegisterEvents decide.
		if w.caps.can(callGetSupportedEventTypes) {
			if types, ret := dev.GetSupportedEventTypes(); ret == nvml.SUCCESS && types&nvml.EventTypeXidCriticalError == 0 {
				return
			}
		}
		results[slot[i]] = registration{
			device: xidDevice{handle: dev, uuid: uuid},
			ret:    dev.RegisterEvents(nvml.EventTypeXidCriticalError, set.set),
			tried:  true,
		}
	})
	for k, o := range outcomes {
		switch o {
		case callSkipped:
			set.endRegistration() // its call never started
			missing = append(missing, indices[k])
			continue
		case callAbandoned:
			missing = append(missing, indices[k])
			continue
		}
		res := results[k]
		if !res.tried {
			continue
		}
		switch classify(res.ret) {
		case succeeded:
			devices = append(devices, res.device)
		case absent, deviceGone:
		default:
			if err == nil {
				err = fmt.Errorf("gpu %d: RegisterEvents: %w", indices[k], nvmlErr(res.ret))
			}
		}
	}
	w.mu.Lock()
	for _, d := range devices {
		if w.counts[d.uuid] == nil {
			w.counts[d.uuid] = &xidCounts{byCode: make(map[uint64]uint64)}
		}
	}
	w.mu.Unlock()
	return devices, missing, err
}

// registerMissing tries again to register the GPUs that did not answer
// when the set was built.
func (w *xidWatcher) registerMissing() {
	w.triedAt = time.Now()
	devices, missing, err := w.register(w.set, w.missing)
	w.devices = append(w.devices, devices...)
	w.missing = missing
	if err != nil {
		w.setErr(err)
	}
	if len(devices) > 0 {
		w.log.Info("xid: registered GPUs that answer again", "gpus", len(devices))
	}
}

// freeEventSet frees a set; a panicking binding must not stop the watcher.
func freeEventSet(set nvml.EventSet) {
	defer func() { _ = recover() }()
	set.Free()
}

func (w *xidWatcher) run() {
	defer close(w.done)
	defer func() {
		if w.set != nil {
			w.set.free()
		}
	}()
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		if w.set == nil {
			if !w.pause(xidRetryInterval) {
				return
			}
			w.rebuild()
			continue
		}
		if len(w.missing) > 0 && time.Since(w.triedAt) >= xidRetryInterval {
			w.registerMissing()
		}
		if len(w.devices) == 0 {
			// Every GPU that could report XIDs is hung: nothing to wait on yet.
			if !w.pause(xidWaitTimeout) {
				return
			}
			continue
		}
		data, ret := w.wait()
		switch ret {
		case nvml.SUCCESS:
			w.record(data)
		case nvml.ERROR_TIMEOUT:
			// Waiting works: an earlier failure is over.
			w.setErr(nil)
		case nvml.ERROR_UNKNOWN, nvml.ERROR_GPU_IS_LOST:
			if ret == nvml.ERROR_UNKNOWN {
				w.setErr(fmt.Errorf("EventSetWait: %w", nvmlErr(ret)))
			}
			w.rebuild()
		default:
			w.setErr(fmt.Errorf("EventSetWait: %w", nvmlErr(ret)))
			// Do not spin on a persistent error.
			if !w.pause(xidWaitTimeout) {
				return
			}
		}
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

// rebuild frees the event set and builds a new one from the devices that
// still answer. XIDs raised in between are lost: NVML records only events
// after a registration.
func (w *xidWatcher) rebuild() {
	if w.set != nil {
		w.set.free()
		w.set, w.devices, w.missing = nil, nil, nil
	}
	set, devices, missing, err := w.build()
	w.set, w.devices, w.missing, w.triedAt = set, devices, missing, time.Now()
	switch {
	case err != nil:
		w.setErr(err)
	case set != nil:
		w.setErr(nil)
		w.log.Info("xid: event set rebuilt", "gpus", len(devices))
	}
}

// wait waits for one event; a panic in the binding becomes an error, since
// nothing can recover a panic in this goroutine later.
func (w *xidWatcher) wait() (data nvml.EventData, ret nvml.Return) {
	defer func() {
		if p := recover(); p != nil {
			ret = nvml.ERROR_UNKNOWN
			w.log.Error("xid: event wait panicked", "panic", p)
		}
	}()
	return w.set.set.Wait(uint32(xidWaitTimeout / time.Millisecond))
}

func (w *xidWatcher) record(data nvml.EventData) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	uuid := w.uuidOf(data.Device)
	if uuid == "" {
		w.log.Warn("xid: event from an unknown device", "xid", data.EventData)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = nil
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
func (w *xidWatcher) uuidOf(dev nvml.Device) (uuid string) {
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
	for _, d := range w.devices {
		if reflect.TypeOf(d.handle) == reflect.TypeOf(dev) && d.handle == dev {
			return d.uuid
		}
	}
	return ""
}

func (w *xidWatcher) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.err == nil {
		w.log.Warn("xid: waiting for events failed", "err", err)
	}
	w.err = err
}

func (w *xidWatcher) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
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

// stop ends the watcher, which frees its event set on the way out. It
// waits at most xidStopTimeout: a wait blocked in a hung driver is left to
// return on its own.
func (w *xidWatcher) stop() {
	close(w.quit)
	t := time.NewTimer(xidStopTimeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		w.log.Warn("xid: the event watcher did not stop in time; leaving it", "waited", xidStopTimeout)
	}
}
