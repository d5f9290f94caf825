//go:build !linux

package doctor

// checkDeviceNodes has no /dev/nvidia* to check: the driver's device
// nodes are Linux's.
func checkDeviceNodes(Env) []Result {
	return []Result{skip("device nodes", "the NVIDIA device nodes (/dev/nvidia*) are Linux's")}
}
