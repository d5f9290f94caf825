//go:build cgo

package nvmlbackend

import (
	"maps"
	"sync"

	"github.com/gpuwatch/gpuwatch/internal/validate"
)

// validateReading drops the readings of a completed device read that no
// GPU can produce (internal/validate), and carries the driver's energy
// counter over its resets. It runs once per completed read, under the
// device's lock, so that readings pass through it in order: a reading
// kept for a later scrape is already clean.
func (r *Reader) validateReading(st *deviceState, out *deviceResult) {
	if !out.device.Up {
		return
	}
	validate.Device(&out.device, &st.energy, r.dropped.add)
	validate.Processes(out.processes, out.device.Memory.Total, r.dropped.add)
}

// droppedReadings counts, per field, the readings dropped since start.
type droppedReadings struct {
	mu     sync.Mutex
	counts map[string]uint64
}

func (d *droppedReadings) add(field string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[string]uint64{}
	}
	d.counts[field]++
}

// copy returns the counts so far; nil when nothing was dropped.
func (d *droppedReadings) copy() map[string]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.counts) == 0 {
		return nil
	}
	return maps.Clone(d.counts)
}
