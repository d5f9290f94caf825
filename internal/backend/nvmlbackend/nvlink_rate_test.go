//go:build cgo

package nvmlbackend

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestSimNVLinkRateFromCounters: on an A100 (no GPM) the NVLink traffic
// over all links comes from two reads of NVML's per-link throughput
// counters: absent after the first read, then the counters' growth over
// the time between the reads.
func TestSimNVLinkRateFromCounters(t *testing.T) {
	start := time.Hour
	s := newSim(t, sim.Config{Profile: "dgx-a100-mig"}, start)
	r := newSimReader(t, s, groups(snapshot.GroupNVLink))
	const gpu = 5 // a whole GPU, busy
	first := read(t, r).Devices[gpu]
	if len(first.NVLinks) == 0 {
		t.Fatal("no NVLinks on the A100")
	}
	if first.NVLinkBytesPerSecond.Valid {
		t.Errorf("rate after one read = %v, want absent", first.NVLinkBytesPerSecond.Value)
	}
	s.SetElapsed(start + 2*time.Second)
	second := read(t, r).Devices[gpu]
	var moved uint64
	for i := range second.NVLinks {
		moved += second.NVLinks[i].TxBytes.Value - first.NVLinks[i].TxBytes.Value
		moved += second.NVLinks[i].RxBytes.Value - first.NVLinks[i].RxBytes.Value
	}
	if moved == 0 {
		t.Fatal("the simulated links moved no data in 2s")
	}
	want := float64(moved) / 2
	got := second.NVLinkBytesPerSecond
	if !got.Valid || got.Value < want*0.999 || got.Value > want*1.001 {
		t.Errorf("rate = %v (present %v), want %.0f B/s", got.Value, got.Valid, want)
	}
}

func TestCounterSampleRate(t *testing.T) {
	var c counterSample
	if r := c.rate(1000, 1e6); r.Valid {
		t.Errorf("first sample gave a rate %v", r.Value)
	}
	if r := c.rate(3000, 2e6); !r.Valid || r.Value != 2000 {
		t.Errorf("rate = %v %v, want 2000 B/s", r.Value, r.Valid)
	}
	if r := c.rate(3000, 2e6); r.Valid {
		t.Errorf("same timestamp gave a rate %v", r.Value)
	}
	if r := c.rate(10, 3e6); r.Valid {
		t.Errorf("a counter that went down gave a rate %v", r.Value)
	}
	if r := c.rate(510, 4e6); !r.Valid || r.Value != 500 {
		t.Errorf("after a reset: rate = %v %v, want 500 B/s", r.Value, r.Valid)
	}
}
