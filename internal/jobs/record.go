package jobs

import "time"

// Kinds of record.
const (
	KindSlurm = "slurm"
	KindPod   = "pod"
)

// Record is one job's (or pod's) use of this node's GPUs. Figures that
// were never measured are absent (nil), never 0.
type Record struct {
	// ID is the Slurm job ID, or the pod's UID (namespace/name when the
	// UID is unknown).
	ID    string         `json:"id"`
	Kind  string         `json:"kind"`
	Node  string         `json:"node,omitempty"`
	Slurm *SlurmIdentity `json:"slurm,omitempty"`
	Pod   *PodIdentity   `json:"pod,omitempty"`
	// Start and End are the first and last accounting ticks at which the
	// job held a GPU here (each within one --accounting.interval of the
	// true times).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Running is set on records of jobs that have not ended (the API's
	// and the checkpoint's), never on the journal's.
	Running bool `json:"running,omitempty"`
	// Partial, when set, says why some of the figures are missing: the
	// job was running when the checkpoint that held it was found corrupt
	// (figures before gpuwatch's restart are lost, in part or whole).
	Partial string `json:"partial,omitempty"`
	GPUs    []GPU  `json:"gpus"`
}

// SlurmIdentity is who ran a Slurm job.
type SlurmIdentity struct {
	JobID     string `json:"job_id"`
	User      string `json:"user,omitempty"`
	Account   string `json:"account,omitempty"`
	Partition string `json:"partition,omitempty"`
	JobName   string `json:"job_name,omitempty"`
}

// PodIdentity is a Kubernetes pod.
type PodIdentity struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// GPU is one job's use of one GPU, or of one MIG instance of it.
type GPU struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Model      string `json:"model,omitempty"`
	MIGUUID    string `json:"mig_uuid,omitempty"`
	MIGProfile string `json:"mig_profile,omitempty"`
	// MemoryTotalBytes is the GPU's (or MIG instance's) memory.
	MemoryTotalBytes *uint64 `json:"memory_total_bytes,omitempty"`

	// AllocatedSeconds is the time the job held the GPU: its Slurm or
	// Kubernetes allocation's held time, or, where no allocation is
	// known, the time its processes were on the GPU.
	AllocatedSeconds float64 `json:"allocated_seconds"`
	// ProcessSeconds is the time with at least one of its processes on
	// the GPU.
	ProcessSeconds float64 `json:"process_seconds"`
	// IdleSeconds is the allocated time in which the job's processes used
	// less than --accounting.idle-threshold of the GPU.
	IdleSeconds *float64 `json:"idle_seconds,omitempty"`
	// SMSeconds is SM time used (utilization × seconds).
	SMSeconds *float64 `json:"sm_seconds,omitempty"`
	// SMUtilizationMean is SMSeconds over AllocatedSeconds; Max the
	// highest mean of one accounting interval. Ratios 0–1.
	SMUtilizationMean *float64 `json:"sm_utilization_mean,omitempty"`
	SMUtilizationMax  *float64 `json:"sm_utilization_max,omitempty"`
	// MemoryUsedBytesMax is the most GPU memory the job's processes held
	// at one tick.
	MemoryUsedBytesMax *uint64 `json:"memory_used_bytes_max,omitempty"`
	// EnergyJoules is the job's share of the GPU's energy
	// (docs/accounting.md says how it is split).
	EnergyJoules *float64 `json:"energy_joules,omitempty"`
	// GPM are the means, over the time the job held the GPU, of the
	// GPU's (or MIG instance's) profiling metrics; absent without GPM.
	GPM *GPMMeans `json:"gpm,omitempty"`
	// XIDErrors is how many XID errors the GPU raised while the job held
	// it; absent when XIDs were not watched.
	XIDErrors *uint64 `json:"xid_errors,omitempty"`
	// ThrottleSeconds is the held time in which a clock-event reason other
	// than idle or application clocks was active.
	ThrottleSeconds *float64 `json:"throttle_seconds,omitempty"`
}

// GPMMeans are time-weighted means of GPM ratios (0–1). On a whole GPU
// shared with other owners they describe the GPU, not the job alone.
type GPMMeans struct {
	SMActive     *float64 `json:"sm_active,omitempty"`
	SMOccupancy  *float64 `json:"sm_occupancy,omitempty"`
	TensorActive *float64 `json:"tensor_active,omitempty"`
	DRAMActive   *float64 `json:"dram_active,omitempty"`
}
