//go:build cgo

package sim

import (
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// eventSet implements nvml.EventSet. XID faults are the only events the
// simulator raises: each configured XID is delivered once per event set,
// as soon as its `at` time has passed and its device is registered for
// EventTypeXidCriticalError. As nvml.h says of nvmlDeviceRegisterEvents,
// "all events that occurred before this call are not recorded": an XID
// whose time is before the device's registration is never delivered.
//
// Wait answers GPU_IS_LOST while a registered device is lost (the set keeps
// failing until it is rebuilt without that GPU), and blocks, whatever its
// timeout, while a registered device hangs. Free does not wake a Wait in
// progress: NVML does not promise it, so a waiter only notices at its
// timeout.
type eventSet struct {
	sim *Sim

	mu        sync.Mutex
	regs      map[*device]uint64        // registered event types per device
	regAt     map[*device]time.Duration // elapsed time of each device's first registration
	delivered map[*device]map[int]bool  // XIDs already delivered, by index in device.xids
	isFreed   bool
}

var _ nvml.EventSet = (*eventSet)(nil)

// EventSetCreate creates an empty event set.
func (s *Sim) EventSetCreate() (nvml.EventSet, nvml.Return) {
	if !s.initialized() {
		return nil, nvml.ERROR_UNINITIALIZED
	}
	return &eventSet{
		sim:       s,
		regs:      map[*device]uint64{},
		regAt:     map[*device]time.Duration{},
		delivered: map[*device]map[int]bool{},
	}, nvml.SUCCESS
}

func (s *Sim) EventSetWait(set nvml.EventSet, timeoutMs uint32) (nvml.EventData, nvml.Return) {
	if set == nil {
		return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Wait(timeoutMs)
}

func (s *Sim) EventSetFree(set nvml.EventSet) nvml.Return {
	if set == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return set.Free()
}

// RegisterEvents adds event types of this device to set. Like NVML, asking
// for a type the device does not support registers nothing and answers
// NOT_SUPPORTED.
func (d *device) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	e, r := d.begin(featEvents)
	if r != nvml.SUCCESS {
		return r
	}
	es, ok := set.(*eventSet)
	if !ok || es == nil || es.sim != d.sim {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if types&^d.model.eventTypes != 0 {
		return nvml.ERROR_NOT_SUPPORTED
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.isFreed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if _, ok := es.regAt[d]; !ok {
		es.regAt[d] = e
	}
	es.regs[d] |= types
	return nvml.SUCCESS
}

// Free releases the set. A Wait in progress is not woken; it answers
// INVALID_ARGUMENT when it next looks (at its timeout or a clock move).
func (es *eventSet) Free() nvml.Return {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.isFreed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	es.isFreed = true
	return nvml.SUCCESS
}

// registered lists the devices registered on the set.
func (es *eventSet) registered() []*device {
	es.mu.Lock()
	defer es.mu.Unlock()
	out := make([]*device, 0, len(es.regs))
	for d := range es.regs {
		out = append(out, d)
	}
	return out
}

// Wait returns the next due event, or waits in real time, up to timeoutMs,
// for one to become due. It answers ERROR_TIMEOUT when none did.
func (es *eventSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for {
		// Take the clock signal before looking, so a SetElapsed between
		// the look and the wait is not missed.
		clockMoved := es.sim.clockSignal()
		if !es.sim.initialized() {
			return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
		}
		untilLost := time.Duration(-1)
		for _, d := range es.registered() {
			now := d.hang(es.sim.elapsed())
			if d.lost(now) {
				return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST
			}
			if d.lostAfter >= 0 && es.sim.pinned.Load() < 0 && (untilLost < 0 || d.lostAfter-now < untilLost) {
				untilLost = d.lostAfter - now
			}
		}
		ev, untilNext, r := es.takeDue()
		if r != nvml.ERROR_TIMEOUT {
			return ev, r
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		wait := remaining
		if untilNext >= 0 && untilNext < wait {
			wait = untilNext
		}
		if untilLost >= 0 && untilLost < wait {
			wait = untilLost // a GPU falling off the bus ends the wait
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-clockMoved:
		}
		timer.Stop()
	}
}

// takeDue delivers the earliest due, undelivered XID of a registered
// device. When none is due it answers ERROR_TIMEOUT and how long, in real
// time, until the next one falls due (-1 if never, or if the clock is
// pinned and only SetElapsed can make it due).
func (es *eventSet) takeDue() (nvml.EventData, time.Duration, nvml.Return) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.isFreed {
		return nvml.EventData{}, -1, nvml.ERROR_INVALID_ARGUMENT
	}
	now := es.sim.elapsed()
	pinned := es.sim.pinned.Load() >= 0

	type candidate struct {
		d *device
		i int
	}
	var due []candidate
	untilNext := time.Duration(-1)
	for d, types := range es.regs {
		if types&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		for i, x := range d.xids {
			if es.delivered[d][i] || x.at < es.regAt[d] {
				continue
			}
			if x.at <= now {
				due = append(due, candidate{d, i})
			} else if !pinned && (untilNext < 0 || x.at-now < untilNext) {
				untilNext = x.at - now
			}
		}
	}
	if len(due) == 0 {
		return nvml.EventData{}, untilNext, nvml.ERROR_TIMEOUT
	}
	// Deterministic order: by time, then by GPU index, then config order.
	sort.Slice(due, func(a, b int) bool {
		xa, xb := due[a].d.xids[due[a].i], due[b].d.xids[due[b].i]
		if xa.at != xb.at {
			return xa.at < xb.at
		}
		if due[a].d.index != due[b].d.index {
			return due[a].d.index < due[b].d.index
		}
		return due[a].i < due[b].i
	})
	c := due[0]
	if es.delivered[c.d] == nil {
		es.delivered[c.d] = map[int]bool{}
	}
	es.delivered[c.d][c.i] = true
	return nvml.EventData{
		Device:            c.d,
		EventType:         nvml.EventTypeXidCriticalError,
		EventData:         c.d.xids[c.i].xid,
		GpuInstanceId:     noInstance,
		ComputeInstanceId: noInstance,
	}, -1, nvml.SUCCESS
}
