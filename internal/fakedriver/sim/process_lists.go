//go:build cgo

package sim

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The process lists as nvml.h's C functions give them: the caller offers
// an array of some capacity, and the driver answers SUCCESS with the list
// when it fits, or ERROR_INSUFFICIENT_SIZE and the count it needs. go-nvml
// hides that exchange behind a loop with no bound, so a driver that never
// stops asking for more (the process_list_size fault) crashes or spins a
// caller that goes through go-nvml's Get*RunningProcesses. The NVML reader
// drives this form itself, with a bound, and the fake libnvidia-ml.so.1
// implements the C functions with it, so both doors into the simulator
// answer alike.

// The kinds of process list, as RunningProcessesSized names them.
const (
	ProcessListCompute  = "compute"
	ProcessListGraphics = "graphics"
	ProcessListMPS      = "mps"
)

// RunningProcessesSized answers one call of the C function for the kind
// of list: offered a buffer of capacity entries, the list when it fits
// (count is its length), or ERROR_INSUFFICIENT_SIZE and in count the
// entries the driver asks for. An unknown kind is INVALID_ARGUMENT.
func (d *device) RunningProcessesSized(kind string, capacity uint32) (infos []nvml.ProcessInfo, count uint32, ret nvml.Return) {
	var list []nvml.ProcessInfo
	switch kind {
	case ProcessListCompute:
		list, ret = d.parentProcesses(false)
	case ProcessListGraphics:
		list, ret = d.parentProcesses(true)
	case ProcessListMPS:
		list, ret = d.mpsProcesses(nil)
	default:
		return nil, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return d.sized(list, ret, capacity)
}

// RunningProcessesSized on a MIG device lists the processes in it, with
// its parent's faults.
func (m *migDevice) RunningProcessesSized(kind string, capacity uint32) (infos []nvml.ProcessInfo, count uint32, ret nvml.Return) {
	if r := m.begin(); r != nvml.SUCCESS {
		return nil, 0, r
	}
	var list []nvml.ProcessInfo
	switch kind {
	case ProcessListCompute:
		list, ret = m.parent.runningProcesses(false, m)
	case ProcessListGraphics:
		list, ret = m.parent.runningProcesses(true, m)
	case ProcessListMPS:
		list, ret = m.parent.mpsProcesses(m)
	default:
		return nil, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return m.parent.sized(list, ret, capacity)
}

// sized fits list into a buffer of capacity entries, or asks for more as
// the process_list_size fault says.
func (d *device) sized(list []nvml.ProcessInfo, ret nvml.Return, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
	if ret != nvml.SUCCESS {
		return nil, 0, ret
	}
	return fitList(list, d.processListSize, capacity)
}

// fitList answers one call of a sized NVML list function offered a buffer
// of capacity entries: the list and its length when it fits, else
// ERROR_INSUFFICIENT_SIZE with the entries the driver asks for. Under a
// size fault ("doubling", "one_more": the process_list_size and
// retired_pages_size values) no buffer is ever enough.
func fitList[T any](list []T, fault string, capacity uint32) ([]T, uint32, nvml.Return) {
	switch fault {
	case ProcessListDoubling:
		return nil, uint32(min(2*uint64(max(capacity, 1)), math.MaxUint32)), nvml.ERROR_INSUFFICIENT_SIZE
	case ProcessListOneMore:
		return nil, uint32(min(uint64(capacity)+1, math.MaxUint32)), nvml.ERROR_INSUFFICIENT_SIZE
	}
	if uint64(len(list)) > uint64(capacity) {
		return nil, uint32(len(list)), nvml.ERROR_INSUFFICIENT_SIZE
	}
	return list, uint32(len(list)), nvml.SUCCESS
}

// whole is a process list as go-nvml's Get*RunningProcesses returns it:
// under the process_list_size fault no buffer is ever enough, and the
// answer is the one a bounded caller ends with.
func (d *device) whole(list []nvml.ProcessInfo, ret nvml.Return) ([]nvml.ProcessInfo, nvml.Return) {
	if ret == nvml.SUCCESS && d.processListSize != "" {
		return nil, nvml.ERROR_INSUFFICIENT_SIZE
	}
	return list, ret
}

// sizedProcessLists is a handle with RunningProcessesSized.
type sizedProcessLists interface {
	RunningProcessesSized(kind string, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return)
}

// guardedListMethods names, per kind, go-nvml's method whose C function
// the sized call stands for: the guard checks the branch exports it.
var guardedListMethods = map[string]string{
	ProcessListCompute:  "Device.GetComputeRunningProcesses",
	ProcessListGraphics: "Device.GetGraphicsRunningProcesses",
	ProcessListMPS:      "Device.GetMPSComputeRunningProcesses",
}

// RunningProcessesSized through the guard: the branch must export the C
// function of that kind of list.
func (w *guardedDevice) RunningProcessesSized(kind string, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
	method, ok := guardedListMethods[kind]
	if !ok {
		return nil, 0, nvml.ERROR_INVALID_ARGUMENT
	}
	w.g.check(method)
	inner, ok := w.inner.(sizedProcessLists)
	if !ok {
		return nil, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return inner.RunningProcessesSized(kind, capacity)
}
