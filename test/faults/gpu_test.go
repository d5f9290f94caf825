//go:build linux

package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// GPU faults come from the simulator's fault config: the NVML reader runs
// unchanged against GPUs that are lost, hang, answer NOT_SUPPORTED or
// raise XIDs.

func gpuUp(page testenv.Metrics, gpu int) (float64, bool) {
	return testenv.Sample(page, "gpu_up", map[string]string{"gpu": fmt.Sprint(gpu)})
}

// upGPUs lists gpu_up per index for the first n GPUs.
func upGPUs(page testenv.Metrics, n int) []int {
	var up []int
	for i := range n {
		v, _ := gpuUp(page, i)
		up = append(up, int(v))
	}
	return up
}

func TestGPULost(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, GPU 3 lost after 2s: gpu_up 0 for it only, its readings absent")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t, "profile: dgx-h100\nfaults:\n  - {gpu: 3, lost_after: 2s}\n"))
	h.baseline()
	testenv.WaitFor(t, 20*time.Second, "GPU 3 down", func() bool { v, _ := gpuUp(h.metrics(), 3); return v == 0 })
	page := h.metrics()
	if got := upGPUs(page, 8); fmt.Sprint(got) != "[1 1 1 0 1 1 1 1]" {
		t.Errorf("gpu_up = %v", got)
	}
	if _, ok := testenv.Sample(page, "gpu_temperature_celsius", map[string]string{"gpu": "3"}); ok {
		t.Error("a lost GPU still reports a temperature")
	}
	h.noLeak()
}

func TestGPUHungThenRecovered(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, GPU 2 hangs 2s-12s, timeout 1s: scrapes bounded, GPU 2 down (after 3 timeouts) then up again, no leak")
	h := start(t, "--backend=sim", "--collection.timeout=1s",
		"--sim.config="+simConfig(t, "profile: dgx-h100\nfaults:\n  - {gpu: 2, hang_after: 2s, hang_for: 10s}\n"))
	h.baseline()
	testenv.WaitFor(t, 20*time.Second, "GPU 2 reported down while hung", func() bool { v, _ := gpuUp(h.metrics(), 2); return v == 0 })
	if got := upGPUs(h.metrics(), 8); fmt.Sprint(got) != "[1 1 0 1 1 1 1 1]" {
		t.Errorf("while GPU 2 hangs: gpu_up = %v", got)
	}
	testenv.WaitFor(t, 30*time.Second, "GPU 2 back up", func() bool { v, _ := gpuUp(h.metrics(), 2); return v == 1 })
	h.noLeak()
}

// The accounting's ticks read the GPUs on their own goroutine, so a hung
// GPU's call holds a tick: the tick is left behind after its timeout and
// the counters of the healthy GPUs go on while GPU 2 still hangs.
func TestAccountingGoesOnPastAHungGPU(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, a process on GPU 0, GPU 2 hangs 4s-24s, timeout 1s, ticks every 500ms: GPU 0's owner counters go on while GPU 2 hangs, no leak")
	h := start(t, "--backend=sim", "--collection.timeout=1s", "--accounting.interval=500ms", "--accounting.new-owner-hold=1ms",
		"--sim.config="+simConfig(t, "profile: dgx-h100\nprocesses:\n  - {gpu: 0, pid: 4242, used_memory_bytes: 1073741824, sm_utilization: 0.5}\nfaults:\n  - {gpu: 2, hang_after: 4s, hang_for: 20s}\n"))
	h.baseline()
	held := func() float64 {
		v, _ := testenv.Sample(h.metrics(), "gpu_process_seconds_total", map[string]string{"gpu": "0"})
		return v
	}
	testenv.WaitFor(t, 20*time.Second, "GPU 2 reported down while hung", func() bool { v, _ := gpuUp(h.metrics(), 2); return v == 0 })
	// A tick that reached GPU 2 is left behind 3 s (1 s + 1 s of
	// attribution + 1 s) after its call hung; the hang lasts 20 s.
	time.Sleep(3 * time.Second)
	before := held()
	testenv.WaitFor(t, 10*time.Second, "GPU 0's held time going on during the hang", func() bool { return held() >= before+3 })
	if v, _ := gpuUp(h.metrics(), 2); v != 0 {
		t.Fatalf("GPU 2 answered again before the counters were checked: the hang was too short for the check")
	}
	testenv.WaitFor(t, 40*time.Second, "GPU 2 back up", func() bool { v, _ := gpuUp(h.metrics(), 2); return v == 1 })
	h.noLeak()
}

// A GPU that hangs from the very first NVML call used to keep gpuwatch
// from finishing its start: the first GPM sample and the XID registration
// waited on it forever.
func TestGPUHungFromStart(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, GPU 5 hangs from the first call for 10s, timeout 1s: gpuwatch starts, GPU 5 down and the others up, then GPU 5 back, no leak")
	h := start(t, "--backend=sim", "--collection.timeout=1s",
		"--sim.config="+simConfig(t, "profile: dgx-h100\nfaults:\n  - {gpu: 5, hang_after: 0s, hang_for: 10s}\n"))
	if got := upGPUs(h.metrics(), 8); fmt.Sprint(got) != "[1 1 1 1 1 0 1 1]" {
		t.Errorf("while GPU 5 hangs: gpu_up = %v\n%s", got, h.tail())
	}
	// Written before gpuwatch listened, but copied from its stderr pipe
	// by another goroutine: wait for it.
	testenv.WaitFor(t, 5*time.Second, "the start log to name the hung GPU", func() bool {
		return strings.Contains(h.Output.String(), `msg="gpu did not answer NVML at start; reported down (gpu_up 0, not_answering) until it does" gpu=5`)
	})
	h.baseline()
	testenv.WaitFor(t, 30*time.Second, "GPU 5 back up", func() bool { v, _ := gpuUp(h.metrics(), 5); return v == 1 })
	h.noLeak()
}

// Healthy GPUs must stay up when as many GPUs hang as there are read
// slots (they were once reported down with them).
func TestGPUsHungInAGroup(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, GPUs 0-3 hang for good after 2s: GPUs 4-7 stay up, scrapes bounded, goroutines stop growing")
	faults := "profile: dgx-h100\nfaults:\n"
	for g := range 4 {
		faults += fmt.Sprintf("  - {gpu: %d, hang_after: 2s}\n", g)
	}
	h := start(t, "--backend=sim", "--collection.timeout=3s", "--sim.config="+simConfig(t, faults))
	// Every scrape, from before the hang through the first ones that
	// meet it (the hung reads then hold their slots) to the later ones
	// (the hung GPUs are known and skipped), has the healthy GPUs up.
	downScrapes := 0
	deadline := time.Now().Add(40 * time.Second)
	for downScrapes < 3 && time.Now().Before(deadline) {
		up := upGPUs(h.metrics(), 8)
		if fmt.Sprint(up[4:]) != "[1 1 1 1]" {
			t.Fatalf("gpu_up = %v: a healthy GPU is reported down while GPUs 0-3 hang", up)
		}
		if fmt.Sprint(up[:4]) == "[0 0 0 0]" {
			downScrapes++
		}
	}
	if downScrapes < 3 {
		t.Fatal("GPUs 0-3 were never reported down")
	}
	h.baseline()
	h.noLeak() // the hung reads are not read again: nothing grows
}

func TestGPUsAllHung(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, every GPU hangs for good after 2s: scrapes bounded, all down, nothing grows")
	faults := "profile: dgx-h100\nfaults:\n"
	for g := range 8 {
		faults += fmt.Sprintf("  - {gpu: %d, hang_after: 2s}\n", g)
	}
	h := start(t, "--backend=sim", "--collection.timeout=1s", "--sim.config="+simConfig(t, faults))
	testenv.WaitFor(t, 30*time.Second, "every GPU down", func() bool {
		return fmt.Sprint(upGPUs(h.metrics(), 8)) == "[0 0 0 0 0 0 0 0]"
	})
	h.baseline()
	for range 5 {
		h.scrape()
	}
	h.noLeak()
}

func TestGPULargeFleetLostAndHung(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "large (64 GPUs): 8 lost, 8 hung: the other 48 up, scrapes bounded")
	faults := "profile: large\nfaults:\n"
	for g := 0; g < 64; g += 4 {
		if g%8 == 0 {
			faults += fmt.Sprintf("  - {gpu: %d, lost_after: 1s}\n", g)
		} else {
			faults += fmt.Sprintf("  - {gpu: %d, hang_after: 1s}\n", g)
		}
	}
	h := start(t, "--backend=sim", "--collection.timeout=4s", "--sim.config="+simConfig(t, faults))
	testenv.WaitFor(t, 30*time.Second, "16 GPUs down", func() bool {
		return strings.Count(fmt.Sprint(upGPUs(h.metrics(), 64)), "0") == 16
	})
	h.baseline()
	h.scrape()
	h.noLeak()
}

func TestGPUXIDStorm(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, 400 XIDs of 5 codes over 8 GPUs within 2s: every one counted, no leak")
	cfg := "profile: dgx-h100\nfaults:\n"
	codes := []int{13, 31, 43, 48, 63}
	for i := range 400 {
		cfg += fmt.Sprintf("  - {gpu: %d, xid: %d, at: %dms}\n", i%8, codes[i%5], 500+i*4)
	}
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t, cfg))
	h.baseline()
	total := func() float64 {
		page, sum := h.metrics(), 0.0
		for g := range 8 {
			for _, c := range codes {
				v, _ := testenv.Sample(page, "gpu_xid_errors_total", map[string]string{"gpu": fmt.Sprint(g), "xid": fmt.Sprint(c)})
				sum += v
			}
		}
		return sum
	}
	testenv.WaitFor(t, 30*time.Second, "400 XIDs counted", func() bool { return total() == 400 })
	h.noLeak()
}

// XID 79 announces a GPU falling off the bus; its count must outlive the
// GPU.
func TestGPUXIDThenLost(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "XID 79 on GPU 5 at 1s, GPU 5 lost at 2s: gpu_xid_errors_total{xid=79} stays 1 after the loss")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: dgx-h100\nfaults:\n  - {gpu: 5, xid: 79, at: 1s}\n  - {gpu: 5, lost_after: 2s}\n"))
	want := map[string]string{"gpu": "5", "xid": "79"}
	testenv.WaitFor(t, 20*time.Second, "GPU 5 lost", func() bool { v, _ := gpuUp(h.metrics(), 5); return v == 0 })
	h.baseline()
	for range 3 {
		if v, ok := testenv.Sample(h.metrics(), "gpu_xid_errors_total", want); !ok || v != 1 {
			t.Fatalf("after the loss: gpu_xid_errors_total{gpu=5,xid=79} = %v (present %v), want 1", v, ok)
		}
	}
	h.noLeak()
}

func TestGPUEveryReadUnsupported(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "every NVML read the simulator can refuse answers NOT_SUPPORTED on GPU 1: it stays up with its readings absent")
	names := []string{"utilization", "encoder", "decoder", "memory", "bar1", "temperature", "memory_temperature",
		"temperature_thresholds", "fan_speed", "pstate", "power", "power_limit", "energy", "clocks", "clock_events",
		"pcie", "pcie_replay", "ecc", "retired_pages", "remapped_rows", "nvlink", "gpm", "processes",
		"process_utilization", "serial", "vbios", "mig", "events"}
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: dgx-h100\nfaults:\n  - {gpu: 1, unsupported: ["+strings.Join(names, ", ")+"]}\n"))
	h.baseline()
	page := h.metrics()
	if v, _ := gpuUp(page, 1); v != 1 {
		t.Errorf("gpu_up{gpu=1} = %v; a GPU that supports nothing is still up", v)
	}
	for _, m := range []string{"gpu_temperature_celsius", "gpu_power_usage_watts", "gpu_utilization_ratio"} {
		if _, ok := testenv.Sample(page, m, map[string]string{"gpu": "1"}); ok {
			t.Errorf("%s{gpu=1} present though unsupported", m)
		}
		if _, ok := testenv.Sample(page, m, map[string]string{"gpu": "0"}); !ok {
			t.Errorf("%s{gpu=0} missing", m)
		}
	}
	h.noLeak()
}

func TestGPUUnsupportedEverywhere(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "rtx4090 with power, clocks and processes unsupported on top of what a GeForce lacks: serves, no errors")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: rtx4090\nfaults:\n  - {gpu: 0, unsupported: [power, clocks, processes, process_utilization, events]}\n"))
	h.baseline()
	if v, _ := gpuUp(h.metrics(), 0); v != 1 {
		t.Errorf("gpu_up = %v", v)
	}
	h.noLeak()
}
