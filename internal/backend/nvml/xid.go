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

	// set and devices belong to the run goroutine once it started.
	set nvml.EventSet
	// devices are the registered devices, to map an event's device handle
	// back to a UUID when the handle can no longer answer GetUUID.
	devices []xidDevice

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
func startXIDWatcher(lib nvml.Interface, caps *capabilities, log *slog.Logger) (*xidWatcher, error) {
	w := &xidWatcher{
		lib:    lib,
		caps:   caps,
		log:    log,
		counts: make(map[string]*xidCounts),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	set, devices, err := w.build()
	if set == nil {
		return nil, err
	}
	w.set, w.devices = set, devices
	go w.run()
	return w, err
}

// build creates an event set and registers every device that answers and
// supports XID events. set is nil when none could be registered; err is the
// first unexpected failure.
func (w *xidWatcher) build() (set nvml.EventSet, devices []xidDevice, err error) {
	set, ret := w.lib.EventSetCreate()
	switch classify(ret) {
	case succeeded:
	case absent:
		return nil, nil, nil
	default:
		return nil, nil, fmt.Errorf("EventSetCreate: %w", nvmlErr(ret))
	}
	count, ret := w.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		freeEventSet(set)
		return nil, nil, fmt.Errorf("DeviceGetCount: %w", nvmlErr(ret))
	}
	for i := range count {
		dev, ret := w.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // a lost GPU raises no more events
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		// When the device says which events it supports, respect it;
		// otherwise let RegisterEvents decide.
		if w.caps.can(callGetSupportedEventTypes) {
			if types, ret := dev.GetSupportedEventTypes(); ret == nvml.SUCCESS && types&nvml.EventTypeXidCriticalError == 0 {
				continue
			}
		}
		switch ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); classify(ret) {
		case succeeded:
			devices = append(devices, xidDevice{handle: dev, uuid: uuid})
		case absent, deviceGone:
		default:
			if err == nil {
				err = fmt.Errorf("gpu %d: RegisterEvents: %w", i, nvmlErr(ret))
			}
		}
	}
	if len(devices) == 0 {
		freeEventSet(set)
		return nil, nil, err
	}
	w.mu.Lock()
	for _, d := range devices {
		if w.counts[d.uuid] == nil {
			w.counts[d.uuid] = &xidCounts{byCode: make(map[uint64]uint64)}
		}
	}
	w.mu.Unlock()
	return set, devices, err
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
			freeEventSet(w.set)
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
		freeEventSet(w.set)
		w.set, w.devices = nil, nil
	}
	set, devices, err := w.build()
	w.set, w.devices = set, devices
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
	return w.set.Wait(uint32(xidWaitTimeout / time.Millisecond))
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
