package snapshot

import "time"

// ProcessSample is one per-process utilization sample of the driver
// (nvmlDeviceGetProcessUtilization): the process's share of the GPU's SM
// and memory-controller time over the driver's sample period that ended at
// TimeMicros. The driver reports a sample only for a process that was busy
// in that period.
type ProcessSample struct {
	PID uint32
	// TimeMicros is the driver's CPU timestamp: µs since the Unix epoch
	// (a number, not a time.Time: a read can carry tens of thousands).
	TimeMicros uint64
	// SM and Memory are ratios 0–1.
	SM, Memory float64
}

// OwnerKey is who a running total belongs to: the labels of the
// gpu_process_* series (the owner on one GPU, or one MIG instance of it).
type OwnerKey struct {
	GPU     int    `json:"gpu"`
	GPUUUID string `json:"uuid"`
	MIGUUID string `json:"mig_uuid,omitempty"`

	User           string `json:"user,omitempty"`
	Container      string `json:"container,omitempty"` // name, or the 12-character ID
	ComposeProject string `json:"compose_project,omitempty"`
	ComposeService string `json:"compose_service,omitempty"`
	Pod            string `json:"pod,omitempty"`
	Namespace      string `json:"namespace,omitempty"`
	SlurmJob       string `json:"slurm_job,omitempty"`
}

// Label names a container by its name, or by the short ID that `docker ps`
// shows when the runtime gave no name.
func (c *Container) Label() string {
	if c.Name != "" {
		return c.Name
	}
	if len(c.ID) > 12 {
		return c.ID[:12]
	}
	return c.ID
}

// Accounting is the accounting stage's running totals, as of its last
// tick. The totals only grow while gpuwatch runs; a total stays listed for
// a while after its owner ended (see internal/accounting).
type Accounting struct {
	// Time is the snapshot time of the last tick integrated.
	Time        time.Time
	Owners      []OwnerTotal
	Allocations []AllocationTotal
	// IdleEnergy is, per GPU, the energy of the intervals in which no
	// owner used it.
	IdleEnergy []DeviceEnergy
	// Ticks counts the ticks since start, and TickCPUSeconds the CPU
	// time they took on their own thread (absent where the thread's CPU
	// clock cannot be read): what the accounting costs.
	Ticks          uint64
	TickCPUSeconds Opt[float64]
}

// OwnerTotal is one owner's running totals on one GPU or MIG instance.
// Absent figures (an unset Opt) were never measured or modelled for it:
// SM time on a MIG instance without GPM, energy on a GPU without an
// energy counter.
type OwnerTotal struct {
	Key OwnerKey `json:"key"`
	// FirstSeen and LastSeen are the ticks at which the owner was first
	// and last seen holding the GPU.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Seconds is the time with at least one of the owner's processes on
	// the GPU.
	Seconds float64 `json:"seconds"`
	// SMSeconds is SM time used: utilization (of the GPU, or of the MIG
	// instance) times time.
	SMSeconds Opt[float64] `json:"sm_seconds"`
	// MemoryByteSeconds is GPU memory held over time.
	MemoryByteSeconds Opt[float64] `json:"memory_byte_seconds"`
	// EnergyJoules is the owner's share of the GPU's energy.
	EnergyJoules Opt[float64] `json:"energy_joules"`
	// MemoryBytesMax is the most memory seen held at a tick.
	MemoryBytesMax Opt[uint64] `json:"memory_bytes_max"`
}

// AllocationTotal is one Kubernetes or Slurm allocation's held time on one
// GPU or MIG instance.
type AllocationTotal struct {
	GPU       int    `json:"gpu"`
	GPUUUID   string `json:"uuid"`
	MIGUUID   string `json:"mig_uuid,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	SlurmJob  string `json:"slurm_job,omitempty"`
	User      string `json:"user,omitempty"`

	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Seconds   float64   `json:"seconds"`
	// IdleSeconds is the held time in which the allocation's own
	// processes used less SM time than the idle threshold. Absent when
	// that could never be measured (a MIG instance without GPM).
	IdleSeconds Opt[float64] `json:"idle_seconds"`
}

// DeviceEnergy is energy on one GPU.
type DeviceEnergy struct {
	GPU     int     `json:"gpu"`
	GPUUUID string  `json:"uuid"`
	Joules  float64 `json:"joules"`
}
