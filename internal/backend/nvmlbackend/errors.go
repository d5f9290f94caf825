//go:build cgo

package nvmlbackend

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrLibraryNotFound is wrapped by the error New returns when NVML's shared
// library cannot be loaded, i.e. no NVIDIA driver is installed.
var ErrLibraryNotFound = errors.New("NVML library libnvidia-ml.so.1 not found (is the NVIDIA driver installed?)")

// outcome classifies an NVML return code for the reader.
type outcome int

const (
	// succeeded: the value is valid.
	succeeded outcome = iota
	// absent: the device does not have this reading (NOT_SUPPORTED). Not
	// an error. (A function the driver lacks is never called: see
	// capabilities.go.)
	absent
	// deviceGone: the GPU stopped answering; the whole device is reported down.
	deviceGone
	// failed: an unexpected error, reported in the group's status.
	failed
)

func classify(ret nvml.Return) outcome {
	switch ret {
	case nvml.SUCCESS:
		return succeeded
	case nvml.ERROR_NOT_SUPPORTED:
		return absent
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_RESET_REQUIRED:
		return deviceGone
	default:
		return failed
	}
}

// returnNames gives NVML return codes stable snake_case names. Return.Error()
// is not used for this because, once the real library is loaded, it returns
// the driver's human text, which differs between drivers.
var returnNames = map[nvml.Return]string{
	nvml.ERROR_UNINITIALIZED:     "uninitialized",
	nvml.ERROR_INVALID_ARGUMENT:  "invalid_argument",
	nvml.ERROR_NOT_SUPPORTED:     "not_supported",
	nvml.ERROR_NO_PERMISSION:     "no_permission",
	nvml.ERROR_NOT_FOUND:         "not_found",
	nvml.ERROR_INSUFFICIENT_SIZE: "insufficient_size",
	nvml.ERROR_DRIVER_NOT_LOADED: "driver_not_loaded",
	nvml.ERROR_TIMEOUT:           "timeout",
	nvml.ERROR_IRQ_ISSUE:         "irq_issue",
	nvml.ERROR_CORRUPTED_INFOROM: "corrupted_inforom",
	nvml.ERROR_GPU_IS_LOST:       "gpu_is_lost",
	nvml.ERROR_RESET_REQUIRED:    "reset_required",
	nvml.ERROR_OPERATING_SYSTEM:  "operating_system",
	nvml.ERROR_MEMORY:            "memory",
	nvml.ERROR_NO_DATA:           "no_data",
	nvml.ERROR_NOT_READY:         "not_ready",
	nvml.ERROR_GPU_NOT_FOUND:     "gpu_not_found",
	nvml.ERROR_INVALID_STATE:     "invalid_state",
	nvml.ERROR_UNKNOWN:           "unknown_error",
	// The library and the loaded kernel module differ in version.
	nvml.ERROR_LIB_RM_VERSION_MISMATCH: "lib_rm_version_mismatch",
}

// downReason is the Device.DownReason for a device whose identity read
// returned ret: a snake_case code such as "gpu_is_lost".
func downReason(ret nvml.Return) string {
	if name, ok := returnNames[ret]; ok {
		return name
	}
	return "nvml_error_" + strconv.Itoa(int(ret))
}

// nvmlErr is an NVML return code as an error whose text is gpuwatch's name
// for the code ("no_permission"). Return.Error() would ask the library
// (nvmlErrorString, which go-nvml calls without looking it up, and a
// stripped-down library may lack) and get text that differs between
// drivers. errors.Is(err, nvml.ERROR_X) keeps working.
func nvmlErr(ret nvml.Return) error { return returnError{ret} }

type returnError struct{ ret nvml.Return }

func (e returnError) Error() string { return downReason(e.ret) }
func (e returnError) Unwrap() error { return e.ret }

// callError wraps an NVML return code with the device and call it came from.
// errors.Is(err, nvml.ERROR_X) keeps working.
func callError(gpu int, call string, ret nvml.Return) error {
	return fmt.Errorf("gpu %d: %s: %w", gpu, call, nvmlErr(ret))
}
