// Package snapshot is the data model shared by every part of gpuwatch.
//
// A backend reads the GPUs into a Snapshot; attribution fills in each
// process's Owner; outputs (Prometheus collectors, the textfile writer,
// `gpuwatch ps`, the JSON API) only read it. Nothing in this package talks to
// NVML or to a socket.
//
// Every value is stored in base units (bytes, watts, joules, hertz, degrees
// Celsius, ratios 0–1) so that outputs never convert. A reading that the
// device does not support is an unset Opt, never a zero: outputs emit no
// series for it.
package snapshot

import "time"

// Opt is a reading that may be absent, because the device does not support
// it or the read failed.
type Opt[T any] struct {
	Value T
	Valid bool
}

// Some returns a present reading.
func Some[T any](v T) Opt[T] { return Opt[T]{Value: v, Valid: true} }

// Get returns the value and whether it is present.
func (o Opt[T]) Get() (T, bool) { return o.Value, o.Valid }

// Snapshot is one consistent reading of every GPU on the host.
type Snapshot struct {
	// Time is when the reading started (wall clock, or the simulator's clock).
	Time time.Time
	// Duration is how long the whole collection took: reading every GPU
	// and attributing its processes. Set by the pipeline.
	Duration time.Duration
	// Driver versions are host-wide facts, repeated on each gpu_info series.
	DriverVersion     string
	CUDADriverVersion string // e.g. "12.4"
	NVMLVersion       string
	// Driver describes the loaded driver library and what it cannot serve.
	Driver Driver

	Devices   []Device
	Processes []Process
	// Allocations are workloads that hold a GPU whether or not their
	// processes are visible (kubelet pod-resources, Slurm GRES). Filled by
	// attribution, which may share the slice with the snapshots before
	// (as every snapshot, read-only once enriched).
	Allocations []Allocation
	// AttributionErrors counts, per source ("procfs", "docker", "cri",
	// "kubelet", "slurm"), the lookups that failed since start. The map
	// may be shared with other snapshots: read-only.
	AttributionErrors map[string]uint64
	// ReadingsDropped counts, per field ("temperature", "power", ...), the
	// readings dropped since start because no GPU can produce them: the
	// driver's "unavailable" sentinels and impossible values
	// (internal/validate). Nil when none was.
	ReadingsDropped map[string]uint64

	// Groups reports, per collector group that was read, how long it took
	// and whether it failed. Keys are the Group* constants.
	Groups map[string]GroupStatus

	// Accounting is the accounting stage's running totals per owner, as
	// of its last tick; nil when accounting is off (internal/accounting).
	Accounting *Accounting

	// Health is the health stage's verdict on each GPU, judged from this
	// snapshot and the ones before it; nil when the stage does not run
	// (internal/health).
	Health *Health
}

// Driver is the loaded NVML library: its version and branch, where it was
// loaded from, and the metric groups it cannot fully serve. It is fixed
// while gpuwatch runs.
type Driver struct {
	Version string // "550.90.07"; "" when the driver does not say
	Branch  string // "R550"
	Library string // the path libnvidia-ml was loaded from, or "simulator"
	// Limits lists, in group order, the enabled groups that the library
	// cannot fully serve because it lacks functions or field IDs.
	Limits []DriverLimit
}

// DriverLimit is one metric group the driver library limits.
type DriverLimit struct {
	Group string
	// Unavailable is set when the library serves none of the group's
	// readings; otherwise it serves some.
	Unavailable bool
	// Reason is "unavailable: no <readings>" (the whole group is off) or
	// "partial: no <readings>".
	Reason string
	// Missing names the C functions (or field IDs) the library lacks.
	Missing []string
}

// Unavailable reports whether the driver library serves none of group's
// readings, so that an output can leave out even a count of zero.
func (d *Driver) Unavailable(group string) bool {
	for _, l := range d.Limits {
		if l.Group == group {
			return l.Unavailable
		}
	}
	return false
}

// GroupStatus is the outcome of reading one collector group across all devices.
type GroupStatus struct {
	Duration time.Duration
	// Err is the first unexpected error (not NOT_SUPPORTED, not a lost GPU,
	// which gpu_up reports) seen while reading the group; nil on success.
	Err error
}

// Collector group names. A group is both a unit of NVML work (a disabled
// group is not read) and a collector on /metrics (--collector.NAME).
const (
	GroupInfo        = "info"
	GroupUtilization = "utilization"
	GroupMemory      = "memory"
	GroupTemperature = "temperature"
	GroupFan         = "fan"
	GroupClocks      = "clocks"
	GroupClockEvents = "clock_events"
	GroupPower       = "power"
	GroupPCIe        = "pcie"
	GroupECC         = "ecc"
	GroupNVLink      = "nvlink"
	GroupXID         = "xid"
	GroupGPM         = "gpm"
	GroupMIG         = "mig"
	GroupProcesses   = "processes"
)

// AllGroups lists every group in a stable order.
var AllGroups = []string{
	GroupInfo, GroupUtilization, GroupMemory, GroupTemperature, GroupFan,
	GroupClocks, GroupClockEvents, GroupPower, GroupPCIe, GroupECC,
	GroupNVLink, GroupXID, GroupGPM, GroupMIG, GroupProcesses,
}

// Device is one physical GPU.
type Device struct {
	Index int
	UUID  string
	// Up is false when the device did not answer (lost, fallen off the bus,
	// handle unavailable). A down device carries only Index, UUID (when
	// known) and DownReason; every reading is absent.
	Up         bool
	DownReason string
	// ReadingAge is how long before the end of the collection the read
	// that produced this device's readings began: the read's own time for
	// a fresh reading; more for one kept from a read that returned after
	// an earlier collection's deadline (a slow driver). Set when Up.
	ReadingAge time.Duration
	// CallLatency is how long one NVML call (the liveness probe every
	// read makes) took in that read: a healthy driver answers in well
	// under a millisecond; a sick one (no persistence mode on a busy
	// host) in hundreds. gpuwatch doctor reports it.
	CallLatency time.Duration

	Info        Info
	Utilization Utilization
	Memory      Memory
	Temperature Temperature
	FanSpeed    Opt[float64] // ratio of maximum speed, averaged over fans
	Clocks      []Clock      // one per clock domain the device reports
	PState      Opt[int]     // 0 (max performance) .. 15 (min)
	ClockEvents []ClockEvent // nil when the device cannot report reasons
	Power       Power
	PCIe        PCIe
	ECC         ECC
	NVLinks     []NVLink // nil when NVLink is not supported
	Fabric      Fabric   // NVSwitch fabric health; absent without one
	XIDErrors   []XIDCount
	// XIDEvents counts every XID of the device since the exporter started,
	// all codes; XIDLastCode is the newest one's code (0: none yet). Both
	// are present, from 0, for every device whose XID events are watched.
	XIDEvents    Opt[uint64]
	XIDLastCode  Opt[uint64]
	GPM          GPM
	MIGInstances []MIGInstance
	// MIGModePending is true when a MIG mode change (nvidia-smi -mig)
	// waits for a GPU reset; absent on GPUs without MIG.
	MIGModePending Opt[bool]
	// ProcessesUnknown says why the device's processes could not be
	// listed ("not_supported", or the failed call's code, e.g.
	// "insufficient_size"); "" when they were. Snapshot.Processes then
	// holds none or only some of them, and their count is absent, not 0.
	ProcessesUnknown string
	// ProcessesNotListed says this read did not list the device's
	// processes (the accounting's reader lists them only every few reads,
	// or when its samples say they changed): Snapshot.Processes holds none
	// of them, which says nothing about how many there are.
	ProcessesNotListed bool
	// NVLinkBytesPerSecond is the traffic over all links, transmitted plus
	// received, between the last two reads of the links' byte counters;
	// absent before the second read (as DCGM's NVLINK_BANDWIDTH_TOTAL).
	NVLinkBytesPerSecond Opt[float64]
	// ProcessSamples are the driver's per-process utilization samples
	// newer than the previous read, in the driver's order; read only by a backend
	// asked for them (the accounting stage's). Empty when the driver had
	// none (no process was busy); nil when it could not say (MIG-enabled
	// GPUs have no per-process samples).
	ProcessSamples []ProcessSample
	// ProcessSamplesSince is the time (µs, the driver's clock, as
	// ProcessSample.TimeMicros) the ProcessSamples were read as newer
	// than, the lastSeenTimeStamp asked with; 0 with none read, or from
	// the start of the driver's buffer. A driver's one sample per process
	// is its mean since then.
	ProcessSamplesSince uint64
}

// Info holds the descriptive facts exported on gpu_info.
type Info struct {
	Name              string
	Brand             string   // e.g. "nvidia", "geforce", "tesla"
	Architecture      string   // e.g. "hopper", "ampere", "ada"
	PCIBusID          string   // "00000000:18:00.0"
	MinorNumber       Opt[int] // N of the device node /dev/nvidiaN
	Serial            string
	VBIOSVersion      string
	ComputeCapability string // "9.0"
	PersistenceMode   string // "enabled" | "disabled" | "" (unknown)
	ComputeMode       string // "default" | "exclusive_process" | "prohibited" | ""
	MIGMode           string // "enabled" | "disabled" | "" (not supported)
	ECCMode           string // "enabled" | "disabled" | "" (not supported)

	// VirtualizationMode is how the driver runs the GPU: "none" (bare
	// metal), "passthrough", "vgpu" (a vGPU guest), "host_vgpu",
	// "host_vsga", or "" (unknown).
	VirtualizationMode string
}

// Utilization ratios, 0–1, over the driver's last sample period.
type Utilization struct {
	GPU, Memory, Encoder, Decoder Opt[float64]
}

// Memory is framebuffer and BAR1 memory in bytes.
type Memory struct {
	Total, Used, Free, Reserved   Opt[uint64]
	BAR1Total, BAR1Used, BAR1Free Opt[uint64]
}

// Temperature in degrees Celsius.
type Temperature struct {
	GPU, Memory        Opt[float64]
	SlowdownThreshold  Opt[float64]
	ShutdownThreshold  Opt[float64]
	MemoryMaxThreshold Opt[float64]
}

// Clock is one clock domain ("graphics", "sm", "memory", "video") in hertz.
type Clock struct {
	Type         string
	Current, Max Opt[float64]
}

// ClockEvent is one clock-event (throttle) reason, e.g. "sw_power_cap".
type ClockEvent struct {
	Reason string
	Active bool
}

// Power readings.
type Power struct {
	Usage         Opt[float64] // watts
	EnforcedLimit Opt[float64] // watts
	Energy        Opt[float64] // joules since driver load; only grows
	// DefaultLimit is the limit the board ships with; MinLimit and MaxLimit
	// bound what an administrator may set (nvidia-smi -pl). Watts.
	DefaultLimit, MinLimit, MaxLimit Opt[float64]
}

// PCIe link and traffic.
type PCIe struct {
	TxBytes, RxBytes         Opt[uint64] // counters since driver load
	LinkGen, LinkWidth       Opt[int]    // current
	MaxLinkGen, MaxLinkWidth Opt[int]
	ReplayCounter            Opt[uint64]
}

// ECC error counters and memory repair state.
type ECC struct {
	VolatileCorrected, VolatileUncorrected             Opt[uint64]
	AggregateCorrected, AggregateUncorrected           Opt[uint64]
	RetiredPagesSingleBit, RetiredPagesDoubleBit       Opt[uint64]
	RetiredPagesPending                                Opt[bool]
	RemappedRowsCorrectable, RemappedRowsUncorrectable Opt[uint64]
	RemappedRowsPending, RemappedRowsFailure           Opt[bool]
}

// Fabric is what the fabric manager made of an NVSwitch-connected GPU
// (nvmlDeviceGetGpuFabricInfoV, Hopper and later). Every field is absent
// on a GPU without NVSwitch fabric, where the driver answers NOT_SUPPORTED,
// and on a driver without the call.
type Fabric struct {
	// HealthMask is nvml.h's health mask as the driver gives it: the
	// NVML_GPU_FABRIC_HEALTH_MASK_* fields (degraded bandwidth, route
	// recovery, route unhealthy, access-timeout recovery, incorrect
	// configuration), each at its shift.
	HealthMask Opt[uint64]
	// HealthSummary is NVML_GPU_FABRIC_HEALTH_SUMMARY_*: 1 healthy,
	// 2 unhealthy, 3 limited capacity (version 3 of the call's struct;
	// absent where the driver answers only version 2 or says 0, not
	// supported).
	HealthSummary Opt[uint64]
}

// NVLink is one link of a device.
type NVLink struct {
	Link             int
	Active           bool
	TxBytes, RxBytes Opt[uint64]
	CRCFlitErrors    Opt[uint64]
	CRCDataErrors    Opt[uint64]
	ReplayErrors     Opt[uint64]
	RecoveryErrors   Opt[uint64]
}

// XIDCount is how many XID events of one code the device raised since the
// exporter started.
type XIDCount struct {
	XID   uint64
	Count uint64
}

// GPM holds Hopper-and-later profiling readings over a window of at least
// one second (NVML needs 100 ms between samples): the interval since the
// previous window ended, or, for a collection less than a second after it,
// the last complete window again. All absent on older GPUs and until the
// first window completes.
type GPM struct {
	SMActive, SMOccupancy, TensorActive, DRAMActive Opt[float64]
	FP16Active, FP32Active, FP64Active              Opt[float64]
	// GraphicsActive is the fraction of time any compute or graphics
	// engine was busy (DCGM's GR_ENGINE_ACTIVE).
	GraphicsActive Opt[float64]
	// PCIe and NVLink (all links) traffic in bytes per second, whole GPU
	// only (absent on MIG instances).
	PCIeTxBytesPerSecond, PCIeRxBytesPerSecond     Opt[float64]
	NVLinkTxBytesPerSecond, NVLinkRxBytesPerSecond Opt[float64]
}

// MIGInstance is one MIG compute instance on a MIG-enabled device.
type MIGInstance struct {
	GPUInstanceID           int
	ComputeInstanceID       int
	UUID                    string // "MIG-..."
	Profile                 string // e.g. "1g.10gb"
	MemoryTotal, MemoryUsed Opt[uint64]
	GPM                     GPM
	// GPUInstanceProfileID and Placement say which slices of the GPU the
	// GPU instance occupies (nvmlGpuInstanceInfo_t); together with the
	// parent's minor number they are what NVIDIA's DRA driver names a MIG
	// device by. Absent when NVML does not tell this caller (listing GPU
	// instances needs root or the MIG monitor capability).
	GPUInstanceProfileID Opt[int]
	PlacementStart       Opt[int]
	PlacementSize        Opt[int]
}

// Process is one process holding a context on a GPU.
type Process struct {
	GPU     int    // device index
	GPUUUID string // device UUID
	// MIGUUID, GPUInstanceID and ComputeInstanceID are set when the process
	// runs in a MIG instance.
	MIGUUID           string
	GPUInstanceID     Opt[int]
	ComputeInstanceID Opt[int]

	PID  uint32
	Type string // "compute" or "graphics"

	UsedMemory        Opt[uint64]  // bytes
	SMUtilization     Opt[float64] // ratio
	MemoryUtilization Opt[float64] // ratio

	// Owner is filled by attribution; the zero value means unknown.
	Owner Owner
}

// Owner is who a GPU process belongs to. Fields stay empty when a source is
// not configured or did not answer.
type Owner struct {
	// StartTime is the process start time in clock ticks since boot, from
	// /proc/PID/stat. Together with PID it identifies a process even when
	// the PID is reused.
	StartTime uint64
	UID       string
	User      string
	Command   string

	Container Container
	Pod       Pod
	Slurm     SlurmJob
}

// Container identifies a container runtime's container.
type Container struct {
	Runtime        string `json:"runtime,omitempty"` // "docker", "containerd", "cri-o", "podman"
	ID             string `json:"id,omitempty"`
	Name           string `json:"name,omitempty"`
	Image          string `json:"image,omitempty"`
	ComposeProject string `json:"compose_project,omitempty"`
	ComposeService string `json:"compose_service,omitempty"`
}

// Pod identifies a Kubernetes pod and container.
type Pod struct {
	UID       string `json:"uid,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Container string `json:"container,omitempty"`
	QoSClass  string `json:"qos_class,omitempty"` // "guaranteed", "burstable", "besteffort"
}

// SlurmJob identifies a Slurm job.
type SlurmJob struct {
	JobID     string `json:"job_id,omitempty"`
	Step      string `json:"step,omitempty"`
	User      string `json:"user,omitempty"`
	Account   string `json:"account,omitempty"`
	Partition string `json:"partition,omitempty"`
	JobName   string `json:"job_name,omitempty"`
}

// Allocation is a workload that holds a GPU or a MIG instance of it.
type Allocation struct {
	GPU     int    // device index
	GPUUUID string // device UUID
	MIGUUID string // set when the allocation is one MIG instance
	// Exactly one of Pod and Slurm is set.
	Pod   Pod
	Slurm SlurmJob
	// Start is when the workload got the GPU (a Slurm job's start); zero
	// when the source does not say (the kubelet does not).
	Start time.Time
}
