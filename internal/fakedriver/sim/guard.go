//go:build cgo

package sim

//go:generate go run ./internal/genguard/cmd/genguard -o guard_gen.go

import (
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// Library returns the simulated library as a program sees it. Without a
// driver branch that is the Sim itself. With one, every call goes through a
// guard (guard_gen.go, written by genguard) that panics when go-nvml's
// method would call a C function the branch's libnvidia-ml.so.1 does not
// export: go-nvml binds lazily, so on a real node that call ends the
// process with "symbol lookup error: undefined symbol". The panic makes
// such a call fail the test that made it. Handles obtained through the
// guard are guarded too.
func (s *Sim) Library() nvml.Interface {
	if s.branch == nil {
		return s
	}
	return &guardedLibrary{g: newGuard(s.branch, s), inner: s}
}

// MissingFunctionCalls lists, in call order, the guard's panics so far
// ("Device.GpmQueryDeviceSupport: nvmlGpmQueryDeviceSupport"), so that a
// test sees them even where the caller recovered from the panic (the NVML
// reader recovers per collector group; a real process would have died).
func (s *Sim) MissingFunctionCalls() []string {
	s.missingMu.Lock()
	defer s.missingMu.Unlock()
	return slices.Clone(s.missingCalls)
}

func (s *Sim) recordMissing(method, symbol string) {
	s.missingMu.Lock()
	defer s.missingMu.Unlock()
	s.missingCalls = append(s.missingCalls, method+": "+symbol)
}

// guard holds the branch and the wrappers handed out, so that one handle
// always has one wrapper (callers compare handles and key maps by them).
type guard struct {
	branch *nvmlbranch.Branch
	sim    *Sim // records each missing-function call

	mu               sync.Mutex
	devices          map[nvml.Device]*guardedDevice
	gpuInstances     map[nvml.GpuInstance]*guardedGpuInstance
	computeInstances map[nvml.ComputeInstance]*guardedComputeInstance
	eventSets        map[nvml.EventSet]*guardedEventSet
	gpmSamples       map[nvml.GpmSample]*guardedGpmSample
}

func newGuard(b *nvmlbranch.Branch, s *Sim) *guard {
	return &guard{
		branch:           b,
		sim:              s,
		devices:          map[nvml.Device]*guardedDevice{},
		gpuInstances:     map[nvml.GpuInstance]*guardedGpuInstance{},
		computeInstances: map[nvml.ComputeInstance]*guardedComputeInstance{},
		eventSets:        map[nvml.EventSet]*guardedEventSet{},
		gpmSamples:       map[nvml.GpmSample]*guardedGpmSample{},
	}
}

// MissingFunctionError is the value the guard panics with.
type MissingFunctionError struct {
	Branch, Driver string
	Method, Symbol string
}

func (e *MissingFunctionError) Error() string {
	return fmt.Sprintf("simulated driver %s (%s): go-nvml's %s calls %s, which this driver's libnvidia-ml.so.1 does not export; "+
		"a real process dies here (symbol lookup error: undefined symbol: %s). Look the symbol up first (Extensions().LookupSymbol)",
		e.Branch, e.Driver, e.Method, e.Symbol, e.Symbol)
}

// check panics when method cannot run on the branch.
func (g *guard) check(method string) {
	if missing := g.branch.MissingSymbol(method); missing != "" {
		g.sim.recordMissing(method, missing)
		panic(&MissingFunctionError{Branch: g.branch.Name, Driver: g.branch.DriverVersion, Method: method, Symbol: missing})
	}
}

// wrapper is a guarded handle: what it wraps.
type wrapper[H any] interface{ wrapped() H }

// unwrap is the simulator's own handle behind a guarded one (h itself when
// it is not guarded).
func unwrap[H any](h H) H {
	if w, ok := any(h).(wrapper[H]); ok {
		return w.wrapped()
	}
	return h
}

func (w *guardedDevice) wrapped() nvml.Device                   { return w.inner }
func (w *guardedGpuInstance) wrapped() nvml.GpuInstance         { return w.inner }
func (w *guardedComputeInstance) wrapped() nvml.ComputeInstance { return w.inner }
func (w *guardedEventSet) wrapped() nvml.EventSet               { return w.inner }
func (w *guardedGpmSample) wrapped() nvml.GpmSample             { return w.inner }

// wrap returns the one wrapper of h, making it on first sight.
func wrap[H comparable, W any](g *guard, cache map[H]*W, h H, make func(H) *W) *W {
	g.mu.Lock()
	defer g.mu.Unlock()
	w, ok := cache[h]
	if !ok {
		w = make(h)
		cache[h] = w
	}
	return w
}

func (g *guard) wrapDevice(d nvml.Device) nvml.Device {
	if d == nil {
		return nil
	}
	if w, ok := d.(*guardedDevice); ok {
		return w
	}
	return wrap(g, g.devices, d, func(d nvml.Device) *guardedDevice { return &guardedDevice{g: g, inner: d} })
}

func (g *guard) unwrapDevice(d nvml.Device) nvml.Device { return unwrap(d) }

func (g *guard) wrapGpuInstance(gi nvml.GpuInstance) nvml.GpuInstance {
	if gi == nil {
		return nil
	}
	return wrap(g, g.gpuInstances, gi, func(gi nvml.GpuInstance) *guardedGpuInstance { return &guardedGpuInstance{g: g, inner: gi} })
}

func (g *guard) unwrapGpuInstance(gi nvml.GpuInstance) nvml.GpuInstance { return unwrap(gi) }

func (g *guard) wrapComputeInstance(ci nvml.ComputeInstance) nvml.ComputeInstance {
	if ci == nil {
		return nil
	}
	return wrap(g, g.computeInstances, ci, func(ci nvml.ComputeInstance) *guardedComputeInstance {
		return &guardedComputeInstance{g: g, inner: ci}
	})
}

func (g *guard) unwrapComputeInstance(ci nvml.ComputeInstance) nvml.ComputeInstance {
	return unwrap(ci)
}

func (g *guard) wrapEventSet(es nvml.EventSet) nvml.EventSet {
	if es == nil {
		return nil
	}
	return wrap(g, g.eventSets, es, func(es nvml.EventSet) *guardedEventSet { return &guardedEventSet{g: g, inner: es} })
}

func (g *guard) unwrapEventSet(es nvml.EventSet) nvml.EventSet { return unwrap(es) }

func (g *guard) wrapGpmSample(s nvml.GpmSample) nvml.GpmSample {
	if s == nil {
		return nil
	}
	return wrap(g, g.gpmSamples, s, func(s nvml.GpmSample) *guardedGpmSample { return &guardedGpmSample{g: g, inner: s} })
}

func (g *guard) unwrapGpmSample(s nvml.GpmSample) nvml.GpmSample { return unwrap(s) }

func (g *guard) wrapEventData(e nvml.EventData) nvml.EventData {
	e.Device = g.wrapDevice(e.Device)
	return e
}

func (g *guard) wrapGpuInstanceInfo(i nvml.GpuInstanceInfo) nvml.GpuInstanceInfo {
	i.Device = g.wrapDevice(i.Device)
	return i
}

func (g *guard) wrapComputeInstanceInfo(i nvml.ComputeInstanceInfo) nvml.ComputeInstanceInfo {
	i.Device = g.wrapDevice(i.Device)
	i.GpuInstance = g.wrapGpuInstance(i.GpuInstance)
	return i
}

// unwrapGpmMetricsGet hands the simulator its own samples for the call;
// the returned func puts the caller's back.
func (g *guard) unwrapGpmMetricsGet(m *nvml.GpmMetricsGetType) func() {
	if m == nil {
		return func() {}
	}
	s1, s2 := m.Sample1, m.Sample2
	m.Sample1, m.Sample2 = g.unwrapGpmSample(s1), g.unwrapGpmSample(s2)
	return func() { m.Sample1, m.Sample2 = s1, s2 }
}

func unwrapAll[H any](hs []H, unwrap func(H) H) []H {
	if hs == nil {
		return nil
	}
	out := make([]H, len(hs))
	for i, h := range hs {
		out[i] = unwrap(h)
	}
	return out
}

func wrapAll[H any](hs []H, wrap func(H) H) []H { return unwrapAll(hs, wrap) }
