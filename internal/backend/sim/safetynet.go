package sim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

//go:generate go run ./internal/gensafetynet/cmd/gensafetynet -o safetynet_gen.go

// The safety net. go-nvml's moq mocks panic when a method whose XxxFunc
// field is nil is called. NVML has hundreds of calls and the simulator
// models the ones gpuwatch reads; every other call must answer the way
// NVML answers for a feature a device lacks: zero values and
// ERROR_NOT_SUPPORTED (or ERROR_UNINITIALIZED before Init, or
// ERROR_GPU_IS_LOST on a lost GPU).
//
// safetynet_gen.go fills each nil func field of a mock with a typed
// closure; gensafetynet writes it from the mocks' types, so a go-nvml bump
// is one `go generate ./internal/backend/sim` away, and
// TestSafetyNetGeneratedFileIsCurrent fails until it is run. This file
// says, per handle, which Return code an unmodelled call answers.
//
// Modelled calls are methods on the simulator's own types, which shadow
// the embedded mock's methods, so the hot path never goes through the
// mocks' call recording.

// installDeviceDefaults is the safety net of a physical device: what the
// device's common prologue answers (it blocks on a hung GPU, then says
// UNINITIALIZED or GPU_IS_LOST), else NOT_SUPPORTED.
func installDeviceDefaults(d *device) {
	fillDeviceMock(&d.Device, func() nvml.Return {
		if _, r := d.always(); r != nvml.SUCCESS {
			return r
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
}

// installMigDeviceDefaults is the safety net of a MIG device handle:
// GPU_IS_LOST once its parent GPU is lost, else NOT_SUPPORTED.
func installMigDeviceDefaults(m *migDevice) {
	fillDeviceMock(&m.Device, func() nvml.Return {
		if m.parent.lost(m.parent.sim.elapsed()) {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
}

// installLibraryDefaults is the safety net of the library: library calls
// on a handle forward to the handle's method (see fillInterfaceMock);
// anything else answers NOT_SUPPORTED, or UNINITIALIZED before Init.
func installLibraryDefaults(s *Sim) {
	fillInterfaceMock(&s.Interface, func() nvml.Return {
		if !s.initialized() {
			return nvml.ERROR_UNINITIALIZED
		}
		return nvml.ERROR_NOT_SUPPORTED
	})
}
