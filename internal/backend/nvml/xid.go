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

// xidWaitTimeout bounds each wait for an event, and so how long Close waits
// for the watcher to notice it should stop.
const xidWaitTimeout = 500 * time.Millisecond

// xidWatcher counts XID errors. NVML delivers them as events on an event
// set, which can only be waited on, so a goroutine waits and a Read only
// copies the counts: an XID storm or a hung driver never blocks a scrape.
type xidWatcher struct {
	lib nvml.Interface
	set nvml.EventSet
	log *slog.Logger
	// devices are the registered devices, to map an event's device handle
	// back to a UUID when the handle can no longer answer GetUUID.
	devices []xidDevice

	mu     sync.Mutex
	counts map[string]map[uint64]uint64 // uuid → xid → count
	err    error                        // last unexpected Wait error, cleared by success

	quit chan struct{}
	done chan struct{}
}

type xidDevice struct {
	handle nvml.Device
	uuid   string
}

// startXIDWatcher creates the event set, registers every device that can
// report XIDs and starts the watcher. It returns nil without an error when
// no device supports XID events (e.g. the simulator's consumer profile) and
// an error, to report in the xid group's status, for other failures.
func startXIDWatcher(lib nvml.Interface, caps *capabilities, log *slog.Logger) (*xidWatcher, error) {
	set, ret := lib.EventSetCreate()
	switch classify(ret) {
	case succeeded:
	case absent:
		return nil, nil
	default:
		return nil, fmt.Errorf("EventSetCreate: %w", ret)
	}
	w := &xidWatcher{
		lib:    lib,
		set:    set,
		log:    log,
		counts: make(map[string]map[uint64]uint64),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		set.Free()
		return nil, fmt.Errorf("DeviceGetCount: %w", ret)
	}
	var firstErr error
	for i := range count {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // a lost GPU raises no more events
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		// When the device says which events it supports, respect it;
		// otherwise let RegisterEvents decide.
		if caps.can(callGetSupportedEventTypes) {
			if types, ret := dev.GetSupportedEventTypes(); ret == nvml.SUCCESS && types&nvml.EventTypeXidCriticalError == 0 {
				continue
			}
		}
		switch ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); classify(ret) {
		case succeeded:
			w.devices = append(w.devices, xidDevice{handle: dev, uuid: uuid})
		case absent, deviceGone:
		default:
			if firstErr == nil {
				firstErr = fmt.Errorf("gpu %d: RegisterEvents: %w", i, ret)
			}
		}
	}
	if len(w.devices) == 0 {
		set.Free()
		return nil, firstErr
	}
	go w.run()
	return w, firstErr
}

func (w *xidWatcher) run() {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		data, ret := w.wait()
		switch ret {
		case nvml.SUCCESS:
			w.record(data)
		case nvml.ERROR_TIMEOUT:
		default:
			w.fail(ret)
			// Do not spin on a persistent error.
			select {
			case <-w.quit:
				return
			case <-time.After(xidWaitTimeout):
			}
		}
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
	byXID := w.counts[uuid]
	if byXID == nil {
		byXID = make(map[uint64]uint64)
		w.counts[uuid] = byXID
	}
	byXID[data.EventData]++
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

func (w *xidWatcher) fail(ret nvml.Return) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.log.Warn("xid: waiting for events failed", "err", ret)
	}
	w.err = fmt.Errorf("EventSetWait: %w", ret)
}

func (w *xidWatcher) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fill copies the counts into the devices, sorted by XID. A device that is
// down keeps its counts: the XID that announced the loss (79, fallen off
// the bus) is the one an operator most needs to see.
func (w *xidWatcher) fill(devices []snapshot.Device) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range devices {
		byXID := w.counts[devices[i].UUID]
		if len(byXID) == 0 || devices[i].UUID == "" {
			continue
		}
		counts := make([]snapshot.XIDCount, 0, len(byXID))
		for xid, n := range byXID {
			counts = append(counts, snapshot.XIDCount{XID: xid, Count: n})
		}
		slices.SortFunc(counts, func(a, b snapshot.XIDCount) int { return cmp.Compare(a.XID, b.XID) })
		devices[i].XIDErrors = counts
	}
}

// stop ends the watcher and frees the event set. It waits at most one
// wait timeout for the goroutine.
func (w *xidWatcher) stop() {
	close(w.quit)
	<-w.done
	func() {
		defer func() { _ = recover() }()
		w.set.Free()
	}()
}
