package jobs

import (
	"fmt"
	"math"
)

// Bounds of a believable record: a figure outside them is a broken or
// forged answer, refused rather than rendered (-16s, -700 %, 16777216 TiB).
const (
	// maxRecordSeconds is a century: no job holds a GPU longer.
	maxRecordSeconds = 100 * 365 * 24 * 3600.0
	// maxGPUMemoryBytes is 64 TiB, far above any GPU's memory.
	maxGPUMemoryBytes = 64 << 40
	// maxRecordJoules is 100 kW for a century.
	maxRecordJoules = 1e5 * maxRecordSeconds
	// maxXIDErrors is more XIDs than a GPU could raise in a century.
	maxXIDErrors = 1 << 40
)

// Check refuses a record whose figures cannot be: negative, not finite,
// ratios above 1, memory or energy beyond any GPU, an end before the
// start. The error names the field.
func (r Record) Check() error {
	if !r.Start.IsZero() && !r.End.IsZero() && r.End.Before(r.Start) {
		return fmt.Errorf("record of %s ends (%s) before it starts (%s)", r.ID, r.End, r.Start)
	}
	for i, g := range r.GPUs {
		if err := g.check(); err != nil {
			return fmt.Errorf("record of %s, gpus[%d]: %w", r.ID, i, err)
		}
	}
	return nil
}

func (g GPU) check() error {
	seconds := map[string]*float64{"allocated_seconds": &g.AllocatedSeconds, "process_seconds": &g.ProcessSeconds,
		"idle_seconds": g.IdleSeconds, "sm_seconds": g.SMSeconds, "throttle_seconds": g.ThrottleSeconds}
	for name, v := range seconds {
		if err := inRange(name, v, maxRecordSeconds); err != nil {
			return err
		}
	}
	ratios := map[string]*float64{"sm_utilization_mean": g.SMUtilizationMean, "sm_utilization_max": g.SMUtilizationMax}
	if g.GPM != nil {
		ratios["gpm.sm_active"], ratios["gpm.sm_occupancy"] = g.GPM.SMActive, g.GPM.SMOccupancy
		ratios["gpm.tensor_active"], ratios["gpm.dram_active"] = g.GPM.TensorActive, g.GPM.DRAMActive
	}
	for name, v := range ratios {
		if err := inRange(name, v, 1); err != nil {
			return err
		}
	}
	if err := inRange("energy_joules", g.EnergyJoules, maxRecordJoules); err != nil {
		return err
	}
	for name, v := range map[string]*uint64{"memory_total_bytes": g.MemoryTotalBytes, "memory_used_bytes_max": g.MemoryUsedBytesMax} {
		if v != nil && *v > maxGPUMemoryBytes {
			return fmt.Errorf("%s = %d: more than any GPU has", name, *v)
		}
	}
	if g.MemoryTotalBytes != nil && g.MemoryUsedBytesMax != nil && *g.MemoryUsedBytesMax > *g.MemoryTotalBytes {
		return fmt.Errorf("memory_used_bytes_max = %d: more than the GPU's memory_total_bytes %d", *g.MemoryUsedBytesMax, *g.MemoryTotalBytes)
	}
	if g.XIDErrors != nil && *g.XIDErrors > maxXIDErrors {
		return fmt.Errorf("xid_errors = %d: not a count of XIDs", *g.XIDErrors)
	}
	return nil
}

func inRange(name string, v *float64, most float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < 0 || *v > most {
		return fmt.Errorf("%s = %v: not a possible value (0 to %g)", name, *v, most)
	}
	return nil
}
