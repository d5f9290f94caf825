package jobs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Summary is one job's use of GPUs across the nodes it ran on: what
// `gpuwatch job` shows. Its JSON is a contract (docs/jobs.md).
type Summary struct {
	JobID string `json:"job_id"`
	// Source is where the figures come from: "journal" (this node's),
	// "nodes" (every node's gpuwatch) or "prometheus" (the counters; no
	// start or end then).
	Source  string         `json:"source"`
	Kind    string         `json:"kind"`
	Slurm   *SlurmIdentity `json:"slurm,omitempty"`
	Pod     *PodIdentity   `json:"pod,omitempty"`
	Start   time.Time      `json:"start,omitzero"`
	End     time.Time      `json:"end,omitzero"`
	Running bool           `json:"running"`
	Nodes   []string       `json:"nodes"`
	// MissingNodes are nodes of the job that had no record of it or did
	// not answer (with the reason).
	MissingNodes []string     `json:"missing_nodes,omitempty"`
	GPUs         []SummaryGPU `json:"gpus"`
	Total        Total        `json:"total"`
	Notes        []string     `json:"notes"`
}

// SummaryGPU is one GPU of the job on one node.
type SummaryGPU struct {
	Node string `json:"node"`
	GPU
}

// Total sums the job's GPUs: seconds and joules are summed over GPUs
// (absent unless every GPU has the figure), utilization is SM time over
// allocated time of all GPUs, memory the highest of any one GPU.
type Total struct {
	GPUs               int      `json:"gpus"`
	AllocatedSeconds   float64  `json:"allocated_seconds"`
	IdleSeconds        *float64 `json:"idle_seconds,omitempty"`
	SMSeconds          *float64 `json:"sm_seconds,omitempty"`
	SMUtilizationMean  *float64 `json:"sm_utilization_mean,omitempty"`
	MemoryUsedBytesMax *uint64  `json:"memory_used_bytes_max,omitempty"`
	EnergyJoules       *float64 `json:"energy_joules,omitempty"`
	XIDErrors          *uint64  `json:"xid_errors,omitempty"`
}

// Thresholds of the efficiency notes.
const (
	noteIdleShare     = 0.5  // a GPU idle half the job or more
	noteLowSM         = 0.3  // mean SM utilization below this
	noteSmallMemory   = 0.25 // peak memory below this share of the GPU's
	noteThrottleShare = 0.1
)

// Summarize merges the records of job id from its nodes (each record's
// Node set). Of several records of one node (a requeued job), the latest
// counts. It returns false when there is none.
func Summarize(id string, records []Record) (Summary, bool) {
	latest := map[string]Record{}
	for _, r := range records {
		if prev, ok := latest[r.Node]; !ok || r.End.After(prev.End) || (r.Running && !prev.Running) {
			latest[r.Node] = r
		}
	}
	if len(latest) == 0 {
		return Summary{}, false
	}
	s := Summary{JobID: id, GPUs: []SummaryGPU{}, Notes: []string{}}
	for _, node := range slices.Sorted(maps.Keys(latest)) {
		r := latest[node]
		s.Nodes = append(s.Nodes, node)
		s.Kind = cmp.Or(s.Kind, r.Kind)
		if s.Slurm == nil {
			s.Slurm = r.Slurm
		}
		if s.Pod == nil {
			s.Pod = r.Pod
		}
		if s.Start.IsZero() || r.Start.Before(s.Start) {
			s.Start = r.Start
		}
		if r.End.After(s.End) {
			s.End = r.End
		}
		s.Running = s.Running || r.Running
		for _, g := range r.GPUs {
			s.GPUs = append(s.GPUs, SummaryGPU{Node: node, GPU: g})
		}
	}
	s.Total = total(s.GPUs)
	s.Notes = notes(s.GPUs, len(s.Nodes) > 1)
	return s, true
}

func total(gpus []SummaryGPU) Total {
	t := Total{GPUs: len(gpus)}
	// A sum is given only when every GPU has the figure: a sum of some
	// would read as the whole.
	idle, sm, energy, xids := new(0.0), new(0.0), new(0.0), new(uint64(0))
	for _, g := range gpus {
		t.AllocatedSeconds += g.AllocatedSeconds
		idle, sm, energy, xids = addAll(idle, g.IdleSeconds), addAll(sm, g.SMSeconds), addAll(energy, g.EnergyJoules), addAll(xids, g.XIDErrors)
		if g.MemoryUsedBytesMax != nil && (t.MemoryUsedBytesMax == nil || *g.MemoryUsedBytesMax > *t.MemoryUsedBytesMax) {
			t.MemoryUsedBytesMax = new(*g.MemoryUsedBytesMax)
		}
	}
	if len(gpus) > 0 {
		t.IdleSeconds, t.SMSeconds, t.EnergyJoules, t.XIDErrors = idle, sm, energy, xids
	}
	if t.SMSeconds != nil && t.AllocatedSeconds > 0 {
		t.SMUtilizationMean = new(min(1, *t.SMSeconds/t.AllocatedSeconds))
	}
	return t
}

// addAll adds v to sum; absent once, absent for good.
func addAll[T float64 | uint64](sum, v *T) *T {
	if sum == nil || v == nil {
		return nil
	}
	return new(*sum + *v)
}

// notes are the efficiency notes, in plain words, GPU by GPU.
func notes(gpus []SummaryGPU, multiNode bool) []string {
	var out []string
	for _, g := range gpus {
		name := noteName(g, multiNode)
		if n := useNote(name, g, len(gpus) > 1); n != "" {
			out = append(out, n)
		}
		out = append(out, gpuNotes(name, g)...)
	}
	return out
}

// noteName names a GPU in a note: its index, its MIG instance, and its
// node when the job ran on several.
func noteName(g SummaryGPU, multiNode bool) string {
	name := fmt.Sprintf("GPU %d", g.Index)
	if g.MIGUUID != "" {
		name = fmt.Sprintf("GPU %d (MIG %s)", g.Index, cmp.Or(g.MIGProfile, g.MIGUUID))
	}
	if multiNode {
		name += " on " + g.Node
	}
	return name
}

// useNote says how little the job used the GPU: idle much of the time (with
// several GPUs, fewer would do), or busy but with low SM utilization; ""
// when neither.
func useNote(name string, g SummaryGPU, severalGPUs bool) string {
	idle := -1.0 // unknown
	switch {
	case g.IdleSeconds != nil && g.AllocatedSeconds > 0:
		idle = *g.IdleSeconds / g.AllocatedSeconds
	case g.SMUtilizationMean != nil && *g.SMUtilizationMean < 0.05:
		idle = 1 - *g.SMUtilizationMean
	}
	switch {
	case idle >= noteIdleShare && severalGPUs:
		return fmt.Sprintf("%s was idle %.0f %% of the job: ask for fewer GPUs", name, 100*idle)
	case idle >= noteIdleShare:
		return fmt.Sprintf("%s was idle %.0f %% of the job: check that the job uses it (CUDA_VISIBLE_DEVICES, the framework's device setting)", name, 100*idle)
	case g.SMUtilizationMean != nil && *g.SMUtilizationMean < noteLowSM:
		return fmt.Sprintf("%s: mean SM utilization %.0f %%: the job may wait on data loading or the CPU", name, 100**g.SMUtilizationMean)
	}
	return ""
}

// gpuNotes are the notes on what the GPU itself saw: memory far below a
// large GPU's, XID errors, time slowed down by power or thermal limits.
func gpuNotes(name string, g SummaryGPU) []string {
	var out []string
	if g.MemoryUsedBytesMax != nil && g.MemoryTotalBytes != nil && *g.MemoryTotalBytes > 0 &&
		float64(*g.MemoryUsedBytesMax) < noteSmallMemory*float64(*g.MemoryTotalBytes) && *g.MemoryTotalBytes >= 16<<30 {
		out = append(out, fmt.Sprintf("%s: peak memory %s of %s: a smaller MIG profile would fit", name, Bytes(*g.MemoryUsedBytesMax), Bytes(*g.MemoryTotalBytes)))
	}
	if g.XIDErrors != nil && *g.XIDErrors > 0 {
		out = append(out, fmt.Sprintf("%s raised %d XID error(s) during the job: tell the administrators", name, *g.XIDErrors))
	}
	if alloc := g.AllocatedSeconds; g.ThrottleSeconds != nil && alloc > 0 && *g.ThrottleSeconds/alloc >= noteThrottleShare {
		out = append(out, fmt.Sprintf("%s ran slowed down (power or thermal limits) %.0f %% of the job", name, 100**g.ThrottleSeconds/alloc))
	}
	return out
}

// Bytes writes a byte count in binary units: "3 GiB", "512 MiB".
func Bytes(b uint64) string {
	const unit = 1024
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(b), 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v >= 10 || v == float64(int(v)) {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
