package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// callEveryMethod calls every method of the interface type iface on v with
// zero arguments and returns how many answered, failing the test on a panic.
func callEveryMethod(t *testing.T, v any, iface reflect.Type, check func(name string, out []reflect.Value)) int {
	t.Helper()
	rv := reflect.ValueOf(v)
	n := 0
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
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
	s := newSim(t, Config{Profile: "dgx-a100-mig"})
	gi, _ := handle(t, s, 1).GetGpuInstanceById(1)
	ci, _ := gi.GetComputeInstanceById(0)
	callEveryMethod(t, gi, reflect.TypeFor[nvml.GpuInstance](), func(string, []reflect.Value) {})
	callEveryMethod(t, ci, reflect.TypeFor[nvml.ComputeInstance](), func(string, []reflect.Value) {})
	set, _ := s.EventSetCreate()
	callEveryMethod(t, set, reflect.TypeFor[nvml.EventSet](), func(string, []reflect.Value) {})
}

// A modelled device call must also be modelled in its library spelling
// (lib.DeviceGetX(dev)); otherwise it goes through the embedded mock, which
// records every call and so grows without bound in a long-running exporter.
// A call is modelled when calling it leaves no record in the device mock.
func TestLibrarySpellingsAreDirect(t *testing.T) {
	s := newSim(t, Config{Profile: "h100", PinTime: pinAt(time.Minute)})
	d := s.devices[0]
	dv, sv := reflect.ValueOf(d), reflect.ValueOf(s)
	mockDev, mockLib := reflect.ValueOf(&d.Device), reflect.ValueOf(&s.Interface)
	modelled := 0
	devIface := reflect.TypeFor[nvml.Device]()
	for i := range devIface.NumMethod() {
		name := devIface.Method(i).Name
		callWithZeros(dv.MethodByName(name), reflect.Value{})
		if mockDev.MethodByName(name + "Calls").Call(nil)[0].Len() != 0 {
			continue // not modelled: the device mock answered
		}
		modelled++
		lib := sv.MethodByName("Device" + name)
		if !lib.IsValid() || lib.Type().NumIn() == 0 || lib.Type().In(0) != devIface {
			continue // no library spelling with a device first
		}
		callWithZeros(lib, dv)
		if mockLib.MethodByName("Device" + name + "Calls").Call(nil)[0].Len() != 0 {
			t.Errorf("Device%s goes through the mock: add it to library_device_calls.go", name)
		}
	}
	if modelled < 60 {
		t.Errorf("only %d device calls look modelled", modelled)
	}
}

// callWithZeros calls fn with first (if valid) then zero values.
func callWithZeros(fn reflect.Value, first reflect.Value) {
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
	fn.Call(args)
}
