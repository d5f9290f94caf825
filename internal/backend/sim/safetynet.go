package sim

import (
	"reflect"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The safety net. go-nvml's moq mocks panic when a method whose XxxFunc
// field is nil is called. NVML has hundreds of calls and the simulator
// models the ones gpuwatch reads; every other call must answer the way
// NVML answers for a feature a device lacks: zero values and
// ERROR_NOT_SUPPORTED (or ERROR_UNINITIALIZED before Init, or
// ERROR_GPU_IS_LOST on a lost GPU). Rather than writing hundreds of stubs,
// installDefaults walks a mock's func fields with reflect once, at
// construction, and fills each nil one.
//
// Modelled calls are methods on the simulator's own types, which shadow
// the embedded mock's methods, so the hot path never goes through reflect
// or through moq's call recording.

var returnType = reflect.TypeFor[nvml.Return]()

// installDefaults fills every nil func field of the moq mock that mockPtr
// points to. failure gives the Return code to answer with (nil means
// ERROR_NOT_SUPPORTED).
func installDefaults(mockPtr any, failure func() nvml.Return) {
	v := reflect.ValueOf(mockPtr).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Func || !f.CanSet() || !f.IsNil() {
			continue
		}
		f.Set(notSupportedFunc(f.Type(), failure))
	}
}

// notSupportedFunc builds a function of type ft returning zero values, with
// every nvml.Return result set to failure().
func notSupportedFunc(ft reflect.Type, failure func() nvml.Return) reflect.Value {
	return reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
		code := nvml.ERROR_NOT_SUPPORTED
		if failure != nil {
			code = failure()
		}
		return zeroResults(ft, code)
	})
}

func zeroResults(ft reflect.Type, code nvml.Return) []reflect.Value {
	out := make([]reflect.Value, ft.NumOut())
	for i := range out {
		if ft.Out(i) == returnType {
			out[i] = reflect.ValueOf(code)
		} else {
			out[i] = reflect.Zero(ft.Out(i))
		}
	}
	return out
}

// installDeviceDefaults is the safety net of a physical device.
func installDeviceDefaults(d *device) {
	installDefaults(&d.Device, func() nvml.Return {
		_, r := d.always()
		if r != nvml.SUCCESS {
			return r
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
}

// installDeviceDefaultsFor is the safety net of a MIG device handle.
func installDeviceDefaultsFor(mockPtr any, parentLost func() bool) {
	installDefaults(mockPtr, func() nvml.Return {
		if parentLost() {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
}

// forwardTargets maps a library-call prefix to the handle type whose
// method the call forwards to: Interface.DeviceGetBoardId(dev) is
// dev.GetBoardId(), as in go-nvml's real library.
var forwardTargets = map[string]reflect.Type{
	"Device":          reflect.TypeFor[nvml.Device](),
	"GpuInstance":     reflect.TypeFor[nvml.GpuInstance](),
	"ComputeInstance": reflect.TypeFor[nvml.ComputeInstance](),
	"EventSet":        reflect.TypeFor[nvml.EventSet](),
	"GpmSample":       reflect.TypeFor[nvml.GpmSample](),
}

// installLibraryDefaults fills the library-level mock: calls of the form
// PrefixMethod(handle, args...) forward to handle.Method(args...), so
// that lib.DeviceGetX(dev) and dev.GetX() always agree; anything else
// answers NOT_SUPPORTED (UNINITIALIZED before Init).
func installLibraryDefaults(s *Sim) {
	v := reflect.ValueOf(&s.Interface).Elem()
	t := v.Type()
	failure := func() nvml.Return {
		if !s.initialized() {
			return nvml.ERROR_UNINITIALIZED
		}
		return nvml.ERROR_NOT_SUPPORTED
	}
	for i := range t.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Func || !f.CanSet() || !f.IsNil() {
			continue
		}
		name := strings.TrimSuffix(t.Field(i).Name, "Func")
		if fwd, ok := forwarder(name, f.Type()); ok {
			f.Set(fwd)
			continue
		}
		f.Set(notSupportedFunc(f.Type(), failure))
	}
}

// forwarder builds the forwarding function for library call name, if its
// first parameter is a handle with a matching method.
func forwarder(name string, ft reflect.Type) (reflect.Value, bool) {
	if ft.NumIn() == 0 {
		return reflect.Value{}, false
	}
	for prefix, handle := range forwardTargets {
		method, ok := strings.CutPrefix(name, prefix)
		if !ok || ft.In(0) != handle {
			continue
		}
		m, ok := handle.MethodByName(method)
		if !ok || !sameSignatureAfterFirst(ft, m.Type) {
			continue
		}
		return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
			if args[0].IsNil() {
				return zeroResults(ft, nvml.ERROR_INVALID_ARGUMENT)
			}
			return args[0].MethodByName(method).Call(args[1:])
		}), true
	}
	return reflect.Value{}, false
}

// sameSignatureAfterFirst reports whether lib(handle, a...) (r...) and
// method(a...) (r...) match.
func sameSignatureAfterFirst(lib, method reflect.Type) bool {
	if lib.NumIn()-1 != method.NumIn() || lib.NumOut() != method.NumOut() || lib.IsVariadic() != method.IsVariadic() {
		return false
	}
	for i := range method.NumIn() {
		if lib.In(i+1) != method.In(i) {
			return false
		}
	}
	for i := range method.NumOut() {
		if lib.Out(i) != method.Out(i) {
			return false
		}
	}
	return true
}
