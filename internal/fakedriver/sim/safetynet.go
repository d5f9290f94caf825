//go:build cgo

package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

//go:generate go run ./internal/gensafetynet/cmd/gensafetynet -o safetynet_gen.go

// The safety net. NVML has hundreds of calls and the simulator models the
// ones gpuwatch reads; every other call must answer the way NVML answers
// for a feature a device lacks: zero values and ERROR_NOT_SUPPORTED (or
// ERROR_UNINITIALIZED before Init, or ERROR_GPU_IS_LOST on a lost GPU).
//
// safetynet_gen.go has, per kind of handle, a small struct type with every
// method of go-nvml's interface for it (unmodelledLibrary, unmodelledDevice,
// unmodelledGpuInstance, unmodelledComputeInstance); gensafetynet writes
// it from the interfaces' types, so a go-nvml bump is one
// `go generate ./internal/fakedriver/sim` away (until then the package does
// not compile, and TestSafetyNetGeneratedFileIsCurrent fails). The
// simulator's types embed these, and the modelled calls are methods on the
// simulator's own types, which shadow the embedded ones. A handle pays one
// func value for its safety net. This file says, per handle, which Return
// code an unmodelled call answers.

// deviceSafetyNet is the safety net of a physical device: what the
// device's common prologue answers (it blocks on a hung GPU, then says
// UNINITIALIZED or GPU_IS_LOST), else NOT_SUPPORTED.
func deviceSafetyNet(d *device) unmodelledDevice {
	return unmodelledDevice{failure: func() nvml.Return {
		if _, r := d.always(); r != nvml.SUCCESS {
			return r
		}
		return nvml.ERROR_NOT_SUPPORTED
	}}
}

// migDeviceSafetyNet is the safety net of a MIG device handle:
// GPU_IS_LOST once its parent GPU is lost, else NOT_SUPPORTED.
func migDeviceSafetyNet(m *migDevice) unmodelledDevice {
	return unmodelledDevice{failure: func() nvml.Return {
		if m.parent.lost(m.parent.sim.elapsed()) {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.ERROR_NOT_SUPPORTED
	}}
}

// librarySafetyNet is the safety net of the library: library calls on a
// handle forward to the handle's method (see unmodelledLibrary); anything
// else answers NOT_SUPPORTED, or UNINITIALIZED before Init.
func librarySafetyNet(s *Sim) unmodelledLibrary {
	return unmodelledLibrary{failure: func() nvml.Return {
		if !s.initialized() {
			return nvml.ERROR_UNINITIALIZED
		}
		return nvml.ERROR_NOT_SUPPORTED
	}}
}
