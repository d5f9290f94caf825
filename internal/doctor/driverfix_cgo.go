//go:build cgo

package doctor

import (
	"errors"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// driverFix is the advice for a driver that could not be started, by
// the NVML error it answered.
func driverFix(err error) string {
	switch {
	case errors.Is(err, nvml.ERROR_LIB_RM_VERSION_MISMATCH):
		return "the driver library and the loaded kernel module are different versions (the driver was upgraded, the module not reloaded): " +
			"stop what uses the GPUs and reload the module (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia), or reboot"
	case errors.Is(err, nvml.ERROR_DRIVER_NOT_LOADED):
		return "the NVIDIA kernel module is not loaded: modprobe nvidia (dmesg says why it did not load), or reboot after installing the driver"
	case errors.Is(err, nvml.ERROR_NO_PERMISSION):
		return "this user may not open the GPUs' device nodes: run gpuwatch as a user in their group, or in a container pass the devices (--gpus all / the NVIDIA container toolkit)"
	}
	return "install the NVIDIA driver (libnvidia-ml.so.1 on the library path), or try gpuwatch with --backend=sim"
}
