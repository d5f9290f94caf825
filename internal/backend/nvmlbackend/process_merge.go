//go:build cgo

package nvmlbackend

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// processTypeBoth is Process.Type for a process that holds a compute and a
// graphics context on the same GPU (nvidia-smi's "C+G").
const processTypeBoth = "compute+graphics"

// mergeContexts folds the compute and graphics entries of one process on
// one GPU (or MIG device) into a single entry. nvml.h says of both
// nvmlDeviceGetComputeRunningProcesses and ...GraphicsRunningProcesses that
// usedGpuMemory "is all of the memory used by the application": listing the
// process twice would count its memory, and its SM share, twice. A short
// list is scanned; a long one (an inference or MPS host lists hundreds,
// where the scan turned quadratic) finds each process's first entry in
// first, a map kept by the device from one list to the next.
func mergeContexts(procs []snapshot.Process, first *map[contextKey]int32) []snapshot.Process {
	if oneType(procs) {
		// Nothing to fold: the usual case (compute processes only), where
		// the map of a long list was most of a list's cost.
		return procs
	}
	const scanMax = 16
	long := len(procs) > scanMax
	if long {
		if *first == nil {
			*first = make(map[contextKey]int32, len(procs))
		}
		clear(*first)
	}
	out := procs[:0]
	for _, p := range procs {
		var into *snapshot.Process
		if long {
			k := contextKey{p.PID, p.MIGUUID}
			j, seen := (*first)[k]
			switch {
			case !seen:
				(*first)[k] = int32(len(out))
			case out[j].Type != p.Type:
				into = &out[j]
			default:
				into = mergeTarget(out, &p) // the same list twice: rare
			}
		} else {
			into = mergeTarget(out, &p)
		}
		if into == nil {
			out = append(out, p)
			continue
		}
		into.Type = combineProcessTypes(into.Type, p.Type)
		// Both report the whole application; they differ only when the
		// two calls were made a moment apart, and the larger is newer
		// or more complete.
		if v, ok := p.UsedMemory.Get(); ok && (!into.UsedMemory.Valid || v > into.UsedMemory.Value) {
			into.UsedMemory = p.UsedMemory
		}
	}
	return out
}

// oneType says whether every process in procs has the same Type.
func oneType(procs []snapshot.Process) bool {
	for i := 1; i < len(procs); i++ {
		if procs[i].Type != procs[0].Type {
			return false
		}
	}
	return true
}

// contextKey is one process on one GPU or MIG device.
type contextKey struct {
	pid uint32
	mig string
}

// mergeTarget is the first entry of out that p folds into: the same
// process on the same GPU or MIG device, listed as another kind.
func mergeTarget(out []snapshot.Process, p *snapshot.Process) *snapshot.Process {
	for j := range out {
		if q := &out[j]; q.PID == p.PID && q.MIGUUID == p.MIGUUID && q.Type != p.Type {
			return q
		}
	}
	return nil
}
