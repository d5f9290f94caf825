package nvmlbackend

import "github.com/gpuwatch/gpuwatch/internal/snapshot"

// processTypeBoth is Process.Type for a process that holds a compute and a
// graphics context on the same GPU (nvidia-smi's "C+G").
const processTypeBoth = "compute+graphics"

// mergeContexts folds the compute and graphics entries of one process on
// one GPU (or MIG device) into a single entry. nvml.h says of both
// nvmlDeviceGetComputeRunningProcesses and ...GraphicsRunningProcesses that
// usedGpuMemory "is all of the memory used by the application": listing the
// process twice would count its memory, and its SM share, twice. The lists
// are short, so a quadratic scan beats a map.
func mergeContexts(procs []snapshot.Process) []snapshot.Process {
	out := procs[:0]
	for _, p := range procs {
		merged := false
		for j := range out {
			q := &out[j]
			if q.PID != p.PID || q.MIGUUID != p.MIGUUID || q.Type == p.Type {
				continue
			}
			q.Type = combineProcessTypes(q.Type, p.Type)
			// Both report the whole application; they differ only when the
			// two calls were made a moment apart, and the larger is newer
			// or more complete.
			if v, ok := p.UsedMemory.Get(); ok && (!q.UsedMemory.Valid || v > q.UsedMemory.Value) {
				q.UsedMemory = p.UsedMemory
			}
			merged = true
			break
		}
		if !merged {
			out = append(out, p)
		}
	}
	return out
}
