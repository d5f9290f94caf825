//go:build cgo

package sim

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim/internal/gensafetynet"
)

var returnType = reflect.TypeFor[nvml.Return]()

// safetynet_gen.go must be what the generator writes from the go-nvml in
// go.mod: after a go-nvml bump this fails until it is regenerated.
func TestSafetyNetGeneratedFileIsCurrent(t *testing.T) {
	want, err := gensafetynet.Source()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(gensafetynet.FileName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		line := 1 + bytes.Count(have[:commonPrefix(have, want)], []byte("\n"))
		t.Fatalf("%s is stale (first difference at line %d; did go-nvml change?): run go generate ./internal/fakedriver/sim", gensafetynet.FileName, line)
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// callEveryMethod calls every method of the interface type iface on v with
// zero arguments and returns how many answered, failing the test on a panic.
func callEveryMethod(t *testing.T, v any, iface reflect.Type, check func(name string, out []reflect.Value)) int {
	t.Helper()
	rv := reflect.ValueOf(v)
	n := 0
	for method := range iface.Methods() {
		name := method.Name
		m := rv.MethodByName(name)
		mt := m.Type()
		args := make([]reflect.Value, mt.NumIn())
		for j := range args {
			args[j] = reflect.Zero(mt.In(j))
		}
		if mt.IsVariadic() {
			args = args[:len(args)-1]
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			check(name, m.Call(args))
			n++
		}()
	}
	return n
}

// lastReturn is the last nvml.Return among a call's results, if any.
func lastReturn(out []reflect.Value) (nvml.Return, bool) {
	if len(out) == 0 || out[len(out)-1].Type() != returnType {
		return 0, false
	}
	return out[len(out)-1].Interface().(nvml.Return), true
}

// Every NVML device call, modelled or not, answers without panicking.
// Calls that fail return zero values, as go-nvml does; unmodelled calls
// answer ERROR_NOT_SUPPORTED, or ERROR_GPU_IS_LOST on a lost GPU.
func TestSafetyNetDevice(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-a100-mig", PinTime: pinAt(time.Minute),
		Faults: []Fault{{GPU: 6, LostAfter: pinAt(0)}}})
	devIface := reflect.TypeFor[nvml.Device]()
	migHandle, _ := handle(t, s, 0).GetMigDeviceHandleByIndex(0)
	for _, tc := range []struct {
		name string
		dev  nvml.Device
		lost bool
	}{
		{"physical", handle(t, s, 5), false},
		{"mig", migHandle, false},
		{"lost", handle(t, s, 6), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notSupported := 0
			n := callEveryMethod(t, tc.dev, devIface, func(name string, out []reflect.Value) {
				r, ok := lastReturn(out)
				if !ok {
					return
				}
				switch {
				case tc.lost && r != nvml.ERROR_GPU_IS_LOST && r != nvml.ERROR_INVALID_ARGUMENT:
					t.Errorf("%s on a lost GPU = %v", name, r)
				case r == nvml.ERROR_NOT_SUPPORTED:
					notSupported++
				}
				if r != nvml.SUCCESS {
					for _, v := range out[:len(out)-1] {
						if v.Type() != returnType && !v.IsZero() {
							t.Errorf("%s failed (%v) but returned non-zero %v", name, r, v)
						}
					}
				}
			})
			if n != devIface.NumMethod() {
				t.Errorf("called %d of %d methods", n, devIface.NumMethod())
			}
			if !tc.lost && notSupported < 150 {
				t.Errorf("only %d calls answered NOT_SUPPORTED: is the safety net installed?", notSupported)
			}
		})
	}
	// Some calls the simulator does not model, by name.
	d := handle(t, s, 5)
	if v, r := d.GetBoardPartNumber(); v != "" || r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetBoardPartNumber = %q, %v", v, r)
	}
	if v, r := d.GetNumGpuCores(); v != 0 || r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetNumGpuCores = %d, %v", v, r)
	}
	if v, r := s.DeviceGetNumGpuCores(d); v != 0 || r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("DeviceGetNumGpuCores = %d, %v", v, r)
	}
}

func TestSafetyNetLibrary(t *testing.T) {
	s, err := New(Config{Profile: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	// Before Init every call that reports a Return says UNINITIALIZED or
	// rejects its nil arguments.
	callEveryMethod(t, s, reflect.TypeFor[nvml.Interface](), func(name string, out []reflect.Value) {})
	s.Init()
	unsupported := 0
	callEveryMethod(t, s, reflect.TypeFor[nvml.Interface](), func(name string, out []reflect.Value) {
		if r, ok := lastReturn(out); ok && r == nvml.ERROR_NOT_SUPPORTED {
			unsupported++
		}
	})
	if unsupported < 50 {
		t.Errorf("only %d library calls answered NOT_SUPPORTED", unsupported)
	}
	if _, r := s.VgpuTypeGetName(nil); r != nvml.ERROR_NOT_SUPPORTED && r != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("VgpuTypeGetName: %v", r)
	}
	if _, r := s.SystemGetProcessName(1); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("SystemGetProcessName: %v", r)
	}
}

func TestSafetyNetInstances(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-a100-mig", Privileged: true})
	gi, _ := handle(t, s, 1).GetGpuInstanceById(1)
	ci, _ := gi.GetComputeInstanceById(0)
	callEveryMethod(t, gi, reflect.TypeFor[nvml.GpuInstance](), func(string, []reflect.Value) {})
	callEveryMethod(t, ci, reflect.TypeFor[nvml.ComputeInstance](), func(string, []reflect.Value) {})
	set, _ := s.EventSetCreate()
	callEveryMethod(t, set, reflect.TypeFor[nvml.EventSet](), func(string, []reflect.Value) {})
}

// countUnmodelled wraps a safety net's failure function so that it counts
// the calls it answers: every unmodelled call calls it exactly once, a
// modelled call never.
func countUnmodelled(failure *func() nvml.Return) *int {
	n := new(int)
	answer := *failure
	*failure = func() nvml.Return {
		*n++
		return answer()
	}
	return n
}

// A modelled device call must also be modelled in its library spelling
// (lib.DeviceGetX(dev)), never answered by the library's safety net. A
// call is modelled when neither the device's nor the library's safety net
// answers it.
func TestLibrarySpellingsAreDirect(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(time.Minute)})
	d := s.devices[0]
	devUnmodelled := countUnmodelled(&d.unmodelledDevice.failure)
	libUnmodelled := countUnmodelled(&s.unmodelledLibrary.failure)
	dv, sv := reflect.ValueOf(d), reflect.ValueOf(s)
	modelled, spelled := 0, 0
	devIface := reflect.TypeFor[nvml.Device]()
	for method := range devIface.Methods() {
		name := method.Name
		before := *devUnmodelled
		callZeroArgs(dv.MethodByName(name), reflect.Value{})
		if *devUnmodelled != before {
			continue // not modelled: the device's safety net answered
		}
		modelled++
		lib := sv.MethodByName("Device" + name)
		if !lib.IsValid() || lib.Type().NumIn() == 0 || lib.Type().In(0) != devIface {
			continue // no library spelling with a device first
		}
		spelled++
		devBefore, libBefore := *devUnmodelled, *libUnmodelled
		callZeroArgs(lib, dv)
		if *devUnmodelled != devBefore || *libUnmodelled != libBefore {
			t.Errorf("Device%s(dev) is answered by a safety net, dev.%s by the model: "+
				"write Device%s in library_device_calls.go", name, name, name)
		}
	}
	// The counters count: an unmodelled call in both spellings.
	before := *libUnmodelled + *devUnmodelled
	d.GetBoardPartNumber()
	s.SystemGetProcessName(1)
	if got := *libUnmodelled + *devUnmodelled - before; got != 2 {
		t.Errorf("two unmodelled calls counted %d times", got)
	}
	t.Logf("%d device calls modelled, %d of them with a library spelling", modelled, spelled)
	if spelled < 50 {
		t.Errorf("only %d modelled device calls have a library spelling", spelled)
	}
	if modelled < 60 {
		t.Errorf("only %d device calls look modelled", modelled)
	}
}

// An unmodelled call answers GPU_IS_LOST once the GPU is lost, on the GPU
// and on its MIG devices, and NOT_SUPPORTED before.
func TestSafetyNetLostGPU(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-a100-mig", PinTime: pinAt(time.Minute),
		Faults: []Fault{{GPU: 0, LostAfter: pinAt(2 * time.Minute)}}})
	gpu := handle(t, s, 0)
	mig, r := gpu.GetMigDeviceHandleByIndex(0)
	if r != nvml.SUCCESS {
		t.Fatalf("GetMigDeviceHandleByIndex: %v", r)
	}
	sibling := handle(t, s, 1) // not lost
	check := func(when string, want, wantSibling nvml.Return) {
		t.Helper()
		for name, d := range map[string]nvml.Device{"gpu": gpu, "mig": mig} {
			if v, r := d.GetBoardPartNumber(); v != "" || r != want {
				t.Errorf("%s: %s GetBoardPartNumber = %q, %v; want %v", when, name, v, r, want)
			}
			if v, r := d.GetAPIRestriction(nvml.RESTRICTED_API_SET_APPLICATION_CLOCKS); v != 0 || r != want {
				t.Errorf("%s: %s GetAPIRestriction = %v, %v; want %v", when, name, v, r, want)
			}
			// Two Return results: both carry the code.
			if cur, pending := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); cur != want || pending != want {
				t.Errorf("%s: %s SetMigMode = %v, %v; want %v twice", when, name, cur, pending, want)
			}
			// No Return result: zero value, no panic.
			if h := d.GetTemperatureV(); h != (nvml.TemperatureHandler{}) {
				t.Errorf("%s: %s GetTemperatureV = %v, want the zero handler", when, name, h)
			}
		}
		if _, r := sibling.GetBoardPartNumber(); r != wantSibling {
			t.Errorf("%s: GPU 1 GetBoardPartNumber: %v, want %v", when, r, wantSibling)
		}
	}
	check("before the loss", nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED)
	s.SetElapsed(3 * time.Minute)
	check("after the loss", nvml.ERROR_GPU_IS_LOST, nvml.ERROR_NOT_SUPPORTED)
	// The library spelling forwards to the handle, so it agrees.
	if _, r := s.DeviceGetBoardPartNumber(mig); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("DeviceGetBoardPartNumber(lost MIG device) = %v", r)
	}
}

// Unmodelled library calls answer UNINITIALIZED before Init and after the
// last Shutdown, and so do unmodelled calls on a device handle kept past
// Shutdown.
func TestSafetyNetUninitialized(t *testing.T) {
	s, err := New(Config{Profile: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	if v, r := s.SystemGetProcessName(1); v != "" || r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("SystemGetProcessName before Init = %q, %v", v, r)
	}
	if v, r := s.UnitGetCount(); v != 0 || r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("UnitGetCount before Init = %d, %v", v, r)
	}
	if a, b, r := s.GetVgpuVersion(); a != (nvml.VgpuVersion{}) || b != (nvml.VgpuVersion{}) || r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("GetVgpuVersion before Init = %v, %v, %v", a, b, r)
	}
	s.Init()
	d := handle(t, s, 0)
	if _, r := s.UnitGetCount(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("UnitGetCount after Init: %v", r)
	}
	s.Shutdown()
	if _, r := s.UnitGetCount(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("UnitGetCount after Shutdown: %v", r)
	}
	// A device handle kept past Shutdown: its unmodelled calls say so too.
	if _, r := d.GetBoardPartNumber(); r != nvml.ERROR_UNINITIALIZED {
		t.Errorf("GetBoardPartNumber after Shutdown: %v", r)
	}
}

// The generated forwarders: lib.PrefixX(handle, args...) returns exactly
// what handle.X(args...) returns, and rejects a nil handle. They are
// checked on a bare unmodelledLibrary, so that every handle call goes
// through a forwarder (the Sim models many library spellings directly), against
// the simulator's handles, whose modelled calls return real values.
func TestSafetyNetForwarders(t *testing.T) {
	s := newSim(t, Config{Profile: "dgx-h100", PinTime: pinAt(time.Minute), Privileged: true})
	lib := unmodelledLibrary{failure: func() nvml.Return { return nvml.ERROR_NOT_SUPPORTED }}
	libv := reflect.ValueOf(lib)

	gpu := handle(t, s, 7) // MIG-enabled
	mig, _ := gpu.GetMigDeviceHandleByIndex(0)
	gi, _ := gpu.GetGpuInstanceById(1)
	ci, _ := gi.GetComputeInstanceById(0)
	same := func(h any) func() any { return func() any { return h } }
	// Event sets and samples are freed by a call: each call gets its own.
	newSet := func() any { set, _ := s.EventSetCreate(); return set }
	newSample := func() any { sample, _ := s.GpmSampleAlloc(); return sample }
	for _, tc := range []struct {
		name   string
		prefix string
		iface  reflect.Type
		handle func() any
		min    int // forwarders expected at least
	}{
		{"gpu", "Device", reflect.TypeFor[nvml.Device](), same(handle(t, s, 0)), 200},
		{"mig", "Device", reflect.TypeFor[nvml.Device](), same(mig), 200},
		{"gpu-instance", "GpuInstance", reflect.TypeFor[nvml.GpuInstance](), same(gi), 15},
		{"compute-instance", "ComputeInstance", reflect.TypeFor[nvml.ComputeInstance](), same(ci), 2},
		{"event-set", "EventSet", reflect.TypeFor[nvml.EventSet](), newSet, 2},
		{"gpm-sample", "GpmSample", reflect.TypeFor[nvml.GpmSample](), newSample, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forwarded, agreeOnSuccess := 0, 0
			for method := range tc.iface.Methods() {
				name := method.Name
				libFn := libv.MethodByName(tc.prefix + name)
				if !libFn.IsValid() || libFn.Type().NumIn() == 0 || libFn.Type().In(0) != tc.iface {
					continue
				}
				got := callZeroArgs(libFn, reflect.ValueOf(tc.handle()))
				want := callZeroArgs(reflect.ValueOf(tc.handle()).MethodByName(name), reflect.Value{})
				r, hasReturn := lastReturn(got)
				if !reflect.DeepEqual(values(got), values(want)) {
					t.Errorf("%s%s(h) = %v, h.%s() = %v", tc.prefix, name, values(got), name, values(want))
					continue
				}
				forwarded++
				if hasReturn && r == nvml.SUCCESS {
					agreeOnSuccess++
				}
				// A nil handle is rejected.
				nilOut := callZeroArgs(libFn, reflect.Zero(tc.iface))
				for _, v := range nilOut {
					if v.Type() == returnType {
						if v.Interface() != nvml.ERROR_INVALID_ARGUMENT {
							t.Errorf("%s%s(nil) = %v", tc.prefix, name, v)
						}
					} else if !v.IsZero() {
						t.Errorf("%s%s(nil) returned non-zero %v", tc.prefix, name, v)
					}
				}
			}
			if forwarded < tc.min {
				t.Errorf("%d %s calls forwarded, want at least %d", forwarded, tc.prefix, tc.min)
			}
			t.Logf("%d %s calls forwarded, %d of them answered SUCCESS", forwarded, tc.prefix, agreeOnSuccess)
		})
	}
	// A library call that is not of the form PrefixMethod(handle) answers
	// with failure().
	if v, r := lib.SystemGetProcessName(1); v != "" || r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("SystemGetProcessName = %q, %v", v, r)
	}
	// GpmSampleGet(dev, sample) has a device first, not a sample: no
	// forwarding, whatever its name says.
	if r := lib.GpmSampleGet(handle(t, s, 0), newSample().(nvml.GpmSample)); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GpmSampleGet = %v", r)
	}
}

// callZeroArgs calls fn with first (if valid) then zero values for the
// remaining parameters (none for a variadic one).
func callZeroArgs(fn, first reflect.Value) []reflect.Value {
	ft := fn.Type()
	args := make([]reflect.Value, 0, ft.NumIn())
	for j := range ft.NumIn() {
		if j == 0 && first.IsValid() {
			args = append(args, first)
			continue
		}
		args = append(args, reflect.Zero(ft.In(j)))
	}
	if ft.IsVariadic() {
		args = args[:len(args)-1]
	}
	return fn.Call(args)
}

func values(vs []reflect.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v.Interface()
	}
	return out
}
