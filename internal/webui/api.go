package webui

import (
	"math"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/ps"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// The JSON documents of /api/v1/. Field names are a contract: fields are
// added, never renamed. Values are in base units (bytes, watts, hertz,
// degrees Celsius, ratios 0–1); a reading the device does not give is
// left out, never reported as zero.

// SnapshotDoc is /api/v1/snapshot.
type SnapshotDoc struct {
	Time time.Time `json:"time"`
	// Clock is "wall", or "simulated" when Time is the simulator's clock.
	Clock string `json:"clock"`
	// Simulated is true when the backend is the simulator: no real GPU.
	Simulated         bool    `json:"simulated"`
	DriverVersion     string  `json:"driver_version,omitempty"`
	CUDADriverVersion string  `json:"cuda_driver_version,omitempty"`
	IntervalSeconds   float64 `json:"interval_seconds"`
	// Error is set when the latest collection failed; Devices is then the
	// last good one's, or empty.
	Error   string      `json:"error,omitempty"`
	Devices []DeviceDoc `json:"devices"`
	// Allocations are the workloads (Slurm jobs, pods) holding each GPU,
	// idle or not: the same entries as /api/v1/processes.
	Allocations []ps.Allocation `json:"allocations"`
}

// DeviceDoc is one GPU.
type DeviceDoc struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid,omitempty"`
	Name       string `json:"name,omitempty"`
	Up         bool   `json:"up"`
	DownReason string `json:"down_reason,omitempty"`

	UtilizationGPU    *float64 `json:"utilization_gpu,omitempty"`
	UtilizationMemory *float64 `json:"utilization_memory,omitempty"`
	MemoryTotalBytes  *uint64  `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes   *uint64  `json:"memory_used_bytes,omitempty"`
	TemperatureC      *float64 `json:"temperature_celsius,omitempty"`
	PowerWatts        *float64 `json:"power_watts,omitempty"`
	PowerLimitWatts   *float64 `json:"power_limit_watts,omitempty"`
	Clocks            []Clock  `json:"clocks,omitempty"`
	// ThrottleReasons lists the active clock-event reasons.
	ThrottleReasons []string `json:"throttle_reasons"`
	Health          Health   `json:"health"`
	// Verdict is the health judge's verdict on the GPU (ok, warn, unknown
	// or fail) and VerdictReason its line; both absent when no verdict
	// is known, never "ok" by default.
	Verdict       string   `json:"verdict,omitempty"`
	VerdictReason string   `json:"verdict_reason,omitempty"`
	MIGMode       string   `json:"mig_mode,omitempty"`
	MIGInstances  []MIGDoc `json:"mig_instances,omitempty"`
	// ProcessesUnknown says why the GPU's processes could not be listed
	// ("not_supported", "insufficient_size", ...): the processes listed
	// for it are then none or only some, and no process does not mean
	// idle. Left out when they were listed.
	ProcessesUnknown string `json:"processes_unknown,omitempty"`
}

// Clock is one clock domain.
type Clock struct {
	Type      string   `json:"type"`
	CurrentHz *float64 `json:"current_hz,omitempty"`
	MaxHz     *float64 `json:"max_hz,omitempty"`
}

// Health is what says a GPU needs attention.
type Health struct {
	XIDEvents                 *uint64 `json:"xid_events,omitempty"`
	XIDLastCode               *uint64 `json:"xid_last_code,omitempty"`
	ECCVolatileUncorrected    *uint64 `json:"ecc_volatile_uncorrected,omitempty"`
	ECCAggregateUncorrected   *uint64 `json:"ecc_aggregate_uncorrected,omitempty"`
	RemappedRowsUncorrectable *uint64 `json:"remapped_rows_uncorrectable,omitempty"`
	RemappedRowsPending       *bool   `json:"remapped_rows_pending,omitempty"`
	RemappedRowsFailure       *bool   `json:"remapped_rows_failure,omitempty"`
}

// MIGDoc is one MIG instance.
type MIGDoc struct {
	GPUInstanceID     int      `json:"gpu_instance_id"`
	ComputeInstanceID int      `json:"compute_instance_id"`
	UUID              string   `json:"uuid,omitempty"`
	Profile           string   `json:"profile,omitempty"`
	MemoryTotalBytes  *uint64  `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes   *uint64  `json:"memory_used_bytes,omitempty"`
	SMActive          *float64 `json:"sm_active,omitempty"`
}

func newSnapshotDoc(s *snapshot.Snapshot, simulated bool, interval time.Duration) SnapshotDoc {
	doc := SnapshotDoc{
		Time: s.Time.UTC(), Clock: "wall", Simulated: simulated,
		DriverVersion: s.DriverVersion, CUDADriverVersion: s.CUDADriverVersion,
		IntervalSeconds: interval.Seconds(), Devices: []DeviceDoc{},
		Allocations: ps.NewAllocations(s, ps.Filter{}),
	}
	if simulated {
		doc.Clock = "simulated"
	}
	for _, d := range s.Devices {
		dd := newDeviceDoc(&d)
		if g, ok := s.Health.ForGPU(d.Index); ok {
			dd.Verdict, dd.VerdictReason = g.Status, g.Reason
		}
		doc.Devices = append(doc.Devices, dd)
	}
	return doc
}

func newDeviceDoc(d *snapshot.Device) DeviceDoc {
	out := DeviceDoc{
		Index: d.Index, UUID: d.UUID, Name: d.Info.Name, Up: d.Up, DownReason: d.DownReason,
		UtilizationGPU: ptr(d.Utilization.GPU), UtilizationMemory: ptr(d.Utilization.Memory),
		MemoryTotalBytes: ptr(d.Memory.Total), MemoryUsedBytes: ptr(d.Memory.Used),
		TemperatureC: ptr(d.Temperature.GPU), PowerWatts: ptr(d.Power.Usage), PowerLimitWatts: ptr(d.Power.EnforcedLimit),
		ThrottleReasons: []string{}, MIGMode: d.Info.MIGMode, ProcessesUnknown: d.ProcessesUnknown,
		Health: Health{
			XIDEvents: ptr(d.XIDEvents), XIDLastCode: ptr(d.XIDLastCode),
			ECCVolatileUncorrected: ptr(d.ECC.VolatileUncorrected), ECCAggregateUncorrected: ptr(d.ECC.AggregateUncorrected),
			RemappedRowsUncorrectable: ptr(d.ECC.RemappedRowsUncorrectable),
			RemappedRowsPending:       ptr(d.ECC.RemappedRowsPending), RemappedRowsFailure: ptr(d.ECC.RemappedRowsFailure),
		},
	}
	for _, c := range d.Clocks {
		out.Clocks = append(out.Clocks, Clock{Type: c.Type, CurrentHz: ptr(c.Current), MaxHz: ptr(c.Max)})
	}
	for _, e := range d.ClockEvents {
		if e.Active {
			out.ThrottleReasons = append(out.ThrottleReasons, e.Reason)
		}
	}
	for _, m := range d.MIGInstances {
		out.MIGInstances = append(out.MIGInstances, MIGDoc{
			GPUInstanceID: m.GPUInstanceID, ComputeInstanceID: m.ComputeInstanceID, UUID: m.UUID, Profile: m.Profile,
			MemoryTotalBytes: ptr(m.MemoryTotal), MemoryUsedBytes: ptr(m.MemoryUsed), SMActive: ptr(m.GPM.SMActive),
		})
	}
	return out
}

func ptr[T any](o snapshot.Opt[T]) *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}

// reading is a history value: absent readings are NaN in memory (so a
// sample stays small) and null in JSON.
type reading float32

func readingOf(o snapshot.Opt[float64]) reading {
	if v, ok := o.Get(); ok {
		return reading(v)
	}
	return reading(math.NaN())
}

func readingOfBytes(o snapshot.Opt[uint64]) reading {
	if v, ok := o.Get(); ok {
		return reading(v)
	}
	return reading(math.NaN())
}

// MarshalJSON writes NaN as null.
func (r reading) MarshalJSON() ([]byte, error) {
	return appendReading(nil, r), nil
}
