//go:build linux

package faults

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// A driver in trouble: the simulator's slow_calls, bogus_values
// and energy_reset_at faults; test/e2e runs the same behaviours through
// the fake libnvidia-ml.so.1.

func TestGPUSlowDriver(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, every NVML call 20ms late (a GPU read takes longer than the 3s timeout): scrapes bounded, every GPU up with its late reading (gpu_reading_age_seconds), /readyz 200, nothing grows")
	faults := "profile: dgx-h100\nfaults:\n"
	for g := range 8 {
		faults += fmt.Sprintf("  - {gpu: %d, slow_calls: 20ms}\n", g)
	}
	h := start(t, "--backend=sim", "--collection.timeout=3s", "--sim.config="+simConfig(t, faults))
	testenv.WaitFor(t, 60*time.Second, "every slow GPU up", func() bool {
		return fmt.Sprint(upGPUs(h.metrics(), 8)) == "[1 1 1 1 1 1 1 1]"
	})
	text := h.scrape()
	validExposition(t, text)
	page := testenv.ParseMetrics(t, text)
	for g := range 8 {
		if v, ok := testenv.Sample(page, "gpu_reading_age_seconds", map[string]string{"gpu": fmt.Sprint(g)}); !ok || v <= 0 {
			t.Errorf("gpu_reading_age_seconds{gpu=%d} = %v (present %v)", g, v, ok)
		}
	}
	resp, err := http.Get(h.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz = %s with every GPU answering, slowly", resp.Status)
	}
	h.baseline()
	h.noLeak()
}

func TestGPUBogusValues(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "GPU 1 answers 0xFFFFFFFF sentinels and impossible values (temperature, power, clocks, utilization, memory, pstate, fan, process memory): none exported, each counted in gpuwatch_readings_dropped_total, GPU 0 unaffected")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: dgx-h100\nfaults:\n  - {gpu: 1, bogus_values: [temperature, power, clocks, utilization, memory, pstate, fan_speed, process_memory]}\n"))
	text := h.scrape()
	validExposition(t, text)
	page := testenv.ParseMetrics(t, text)
	for _, m := range []string{"gpu_temperature_celsius", "gpu_power_usage_watts", "gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_performance_state"} {
		if v, ok := testenv.Sample(page, m, map[string]string{"gpu": "1"}); ok {
			t.Errorf("%s{gpu=1} = %g exported", m, v)
		}
		if _, ok := testenv.Sample(page, m, map[string]string{"gpu": "0"}); !ok {
			t.Errorf("%s{gpu=0} missing", m)
		}
	}
	if v, _ := testenv.Sample(page, "gpuwatch_readings_dropped_total", map[string]string{"field": "temperature"}); v < 1 {
		t.Errorf("gpuwatch_readings_dropped_total{field=temperature} = %v", v)
	}
	h.baseline()
	h.noLeak()
}

func TestGPUEnergyCounterReset(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "h100 whose driver's energy counter starts again at 3s (a driver reload): gpu_energy_joules_total never goes down")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t, "profile: h100\nfaults:\n  - {gpu: 0, energy_reset_at: 3s}\n"))
	energy := func() float64 {
		v, ok := testenv.Sample(h.metrics(), "gpu_energy_joules_total", map[string]string{"gpu": "0"})
		if !ok {
			t.Fatal("no gpu_energy_joules_total")
		}
		return v
	}
	last, begin := energy(), time.Now()
	for time.Since(begin) < 6*time.Second {
		v := energy()
		if v < last {
			t.Fatalf("gpu_energy_joules_total went down: %v J after %v J", v, last)
		}
		last = v
		time.Sleep(100 * time.Millisecond)
	}
}
