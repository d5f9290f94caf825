//go:build cgo

package nvmlbackend

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Process lists are read with a bounded number of calls into a bounded
// buffer (boundedExchange): go-nvml's Get*RunningProcesses (v0.13)
// retries ERROR_INSUFFICIENT_SIZE with no bound, doubling the count each
// time. A driver that keeps asking for more (a count that doubles on
// every call, or one more entry than was offered) then runs gpuwatch out
// of memory or spins a core forever with the GPU shown down. So for go-nvml's own handles the reader calls the
// C function itself (process_lists_cgo.go), and for the simulator's it
// uses the simulator's sized form of the same exchange; only handles that
// have neither (go-nvml's mocks, test wrappers) go through the Go method.

const (
	// processListTries bounds the calls per list per read: the first,
	// and three more sized to what the driver asked for, which covers a
	// list that grows between two calls (processes starting meanwhile).
	processListTries = 4
	// processListFirst is the first buffer's capacity when the device
	// had fewer processes at the last read.
	processListFirst = 64
	// maxProcessListEntries bounds the buffer (one nvml.ProcessInfo an
	// entry). Far more processes than a GPU holds contexts for (MPS allows 48 to
	// 60 clients; a shared inference host has hundreds).
	maxProcessListEntries = 32768
)

// sizedProcessLister answers one call of a process-list C function:
// offered capacity entries, the list when it fits, or
// ERROR_INSUFFICIENT_SIZE and the count the driver asks for. The
// simulator's device handles are sizedProcessListers (sim.RunningProcessesSized).
type sizedProcessLister interface {
	RunningProcessesSized(kind string, capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return)
}

// listProcesses reads one kind of process list of dev. hint is how many
// processes the device had at the last read, to size the first buffer.
// tooLong is set when the driver answered INSUFFICIENT_SIZE to every try.
func listProcesses(dev nvml.Device, kind processKind, hint int) (list []nvml.ProcessInfo, ret nvml.Return, tooLong *listTooLong) {
	var call sizedCall
	switch h := dev.(type) {
	case sizedProcessLister:
		call = func(capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return) {
			return h.RunningProcessesSized(kind.name, capacity)
		}
	default:
		if c, ok := cProcessList(dev, kind); ok {
			call = c
		} else {
			list, ret = kind.list(dev)
			return list, ret, nil
		}
	}
	return boundedList(call, hint)
}

// sizedCall is one call of a process-list function with a buffer of capacity entries.
type sizedCall func(capacity uint32) ([]nvml.ProcessInfo, uint32, nvml.Return)

// processListBounds bound one process list's exchange.
var processListBounds = exchangeBounds{tries: processListTries, floor: processListFirst, limit: maxProcessListEntries}

// boundedList reads one list in at most processListTries calls, each
// with at most maxProcessListEntries entries, the first sized for hint
// processes, and gives up with ERROR_INSUFFICIENT_SIZE.
func boundedList(call sizedCall, hint int) ([]nvml.ProcessInfo, nvml.Return, *listTooLong) {
	list, _, ret, tooLong := boundedExchange(processListBounds, processListBounds.fit(uint64(max(hint, 0))), call)
	return list, ret, tooLong
}
