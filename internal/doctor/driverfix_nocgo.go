//go:build !cgo

package doctor

// driverFix is the advice for a driver that could not be started. A build
// without cgo has no NVML backend (go-nvml's types live in its cgo files),
// so no NVML error reaches it: the advice is the other backends.
func driverFix(error) string {
	return "this gpuwatch is built without cgo and cannot load NVML: use --backend=nvidia-smi (docs/nvidia-smi.md)"
}
