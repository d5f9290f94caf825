//go:build cgo

package nvmlbackend

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// restrictedLibrary puts an NVML library (the simulator) behind the symbol
// table of a driver library that exports only some C functions: its
// Extensions().LookupSymbol answers from that table, and a call to a
// go-nvml method whose C function the table lacks is recorded and panics,
// as the real process would die ("symbol lookup error"). Every handle it
// returns (device, MIG device, event set, GPM sample) is wrapped the same
// way, so no call can slip past.
type restrictedLibrary struct {
	*mock.Interface
	exports func(symbol string) bool

	mu         sync.Mutex
	violations []string
	toWrapper  map[any]any // original handle → its wrapper (stable, so handles compare equal)
	toOriginal map[any]any
}

func newRestrictedLibrary(lib nvml.Interface, exports func(string) bool) *restrictedLibrary {
	r := &restrictedLibrary{exports: exports, toWrapper: map[any]any{}, toOriginal: map[any]any{}}
	r.Interface = &mock.Interface{}
	r.delegate(r.Interface, lib, "")
	r.Interface.ExtensionsFunc = func() nvml.ExtendedInterface { return symbolTable(exports) }
	return r
}

// branchExports is the symbol table of a driver branch.
func branchExports(b *nvmlbranch.Branch) func(string) bool { return b.HasFunction }

// setExports is a symbol table listing exactly the given functions.
func setExports(symbols ...string) func(string) bool {
	set := make(map[string]bool, len(symbols))
	for _, s := range symbols {
		set[s] = true
	}
	return func(s string) bool { return set[s] }
}

type symbolTable func(string) bool

func (t symbolTable) LookupSymbol(name string) error {
	if t(name) {
		return nil
	}
	return fmt.Errorf("undefined symbol: %s", name)
}

// Violations lists the methods called although the library lacks their C
// functions.
func (r *restrictedLibrary) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

var (
	deviceType    = reflect.TypeFor[nvml.Device]()
	eventSetType  = reflect.TypeFor[nvml.EventSet]()
	gpmSampleType = reflect.TypeFor[nvml.GpmSample]()
	eventDataType = reflect.TypeFor[nvml.EventData]()
)

// delegate fills every XxxFunc field of the moq mock m with a call to
// orig's method Xxx, guarded by the symbol table; kind is the receiver
// name nvmlbranch uses ("" for the library, "Device", "EventSet", ...).
func (r *restrictedLibrary) delegate(m any, orig any, kind string) {
	mv := reflect.ValueOf(m).Elem()
	ov := reflect.ValueOf(orig)
	for i := range mv.NumField() {
		f := mv.Type().Field(i)
		if f.Type.Kind() != reflect.Func || !strings.HasSuffix(f.Name, "Func") {
			continue
		}
		name := strings.TrimSuffix(f.Name, "Func")
		method := ov.MethodByName(name)
		if !method.IsValid() {
			continue
		}
		key := name
		if kind != "" {
			key = kind + "." + name
		}
		mv.Field(i).Set(reflect.MakeFunc(f.Type, func(args []reflect.Value) []reflect.Value {
			r.check(key)
			for j, a := range args {
				args[j] = r.unwrap(a)
			}
			out := method.Call(args)
			for j, o := range out {
				out[j] = r.wrap(o)
			}
			return out
		}))
	}
}

// check records and panics when method needs a C function the table lacks.
func (r *restrictedLibrary) check(method string) {
	syms, known := nvmlbranch.MethodSymbols(method)
	if !known {
		return // Extensions and the like: no C function behind them
	}
	for _, alts := range syms {
		found := false
		for _, s := range alts {
			if r.exports(s) {
				found = true
			}
		}
		if !found && len(alts) > 0 {
			msg := fmt.Sprintf("%s: symbol lookup error: undefined symbol: %s", method, alts[0])
			r.mu.Lock()
			r.violations = append(r.violations, msg)
			r.mu.Unlock()
			panic(msg)
		}
	}
}

func (r *restrictedLibrary) wrap(v reflect.Value) reflect.Value {
	switch v.Type() {
	case deviceType, eventSetType, gpmSampleType:
		if v.IsNil() {
			return v
		}
		orig := v.Interface()
		r.mu.Lock()
		w, ok := r.toWrapper[orig]
		r.mu.Unlock()
		if !ok {
			switch v.Type() {
			case deviceType:
				d := &mock.Device{}
				r.delegate(d, orig, "Device")
				w = d
			case eventSetType:
				e := &mock.EventSet{}
				r.delegate(e, orig, "EventSet")
				w = e
			default:
				g := &mock.GpmSample{}
				r.delegate(g, orig, "GpmSample")
				w = g
			}
			r.mu.Lock()
			if prev, raced := r.toWrapper[orig]; raced {
				w = prev
			} else {
				r.toWrapper[orig], r.toOriginal[w] = w, orig
			}
			r.mu.Unlock()
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(reflect.ValueOf(w))
		return out
	case eventDataType:
		data := v.Interface().(nvml.EventData)
		if data.Device != nil {
			data.Device = r.wrap(reflect.ValueOf(&data.Device).Elem()).Interface().(nvml.Device)
		}
		return reflect.ValueOf(data)
	}
	return v
}

func (r *restrictedLibrary) unwrap(v reflect.Value) reflect.Value {
	switch v.Type() {
	case deviceType, eventSetType, gpmSampleType:
		if v.IsNil() {
			return v
		}
		r.mu.Lock()
		orig, ok := r.toOriginal[v.Interface()]
		r.mu.Unlock()
		if ok {
			out := reflect.New(v.Type()).Elem()
			out.Set(reflect.ValueOf(orig))
			return out
		}
	case reflect.TypeFor[*nvml.GpmMetricsGetType]():
		// The request carries samples; the wrapped library needs its own.
		req := v.Interface().(*nvml.GpmMetricsGetType)
		if req != nil {
			r.mu.Lock()
			if o, ok := r.toOriginal[req.Sample1]; ok {
				req.Sample1 = o.(nvml.GpmSample)
			}
			if o, ok := r.toOriginal[req.Sample2]; ok {
				req.Sample2 = o.(nvml.GpmSample)
			}
			r.mu.Unlock()
		}
	}
	return v
}
