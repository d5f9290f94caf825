//go:build cgo

package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// A driver in trouble and correlated failures, through the
// simulator. test/e2e's TestSickDriverMatrix runs the same behaviours
// through the fake libnvidia-ml.so.1 (the real cgo path) with serve, ps
// and textfile.

func TestGPUProcessListNeverFits(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "process lists answer INSUFFICIENT_SIZE forever on GPU 1 (asking for twice the entries offered) and GPU 2 (one more): no crash, no spin, both up with gpu_processes absent, the others' processes counted, no leak")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: dgx-h100\nfaults:\n  - {gpu: 1, process_list_size: doubling}\n  - {gpu: 2, process_list_size: one_more}\n"))
	h.baseline()
	page := h.metrics()
	if got := upGPUs(page, 8); fmt.Sprint(got) != "[1 1 1 1 1 1 1 1]" {
		t.Errorf("gpu_up = %v", got)
	}
	for _, gpu := range []string{"1", "2"} {
		if v, ok := testenv.Sample(page, "gpu_processes", map[string]string{"gpu": gpu}); ok {
			t.Errorf("gpu_processes{gpu=%s} = %v; its list never fit, so it must be absent", gpu, v)
		}
		if _, ok := testenv.Sample(page, "gpu_temperature_celsius", map[string]string{"gpu": gpu}); !ok {
			t.Errorf("gpu_temperature_celsius{gpu=%s} absent: the rest of the GPU must still be served", gpu)
		}
	}
	if v, ok := testenv.Sample(page, "gpu_processes", map[string]string{"gpu": "0"}); !ok || v != 1 {
		t.Errorf("gpu_processes{gpu=0} = %v (present %v), want 1", v, ok)
	}
	if v, _ := testenv.Sample(page, "gpuwatch_collector_success", map[string]string{"collector": "processes"}); v != 0 {
		t.Errorf("gpuwatch_collector_success{collector=processes} = %v, want 0", v)
	}
	h.noLeak()
}

func TestGPURetiredPagesNeverFit(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "v100 (page retirement): its retired-page count answers INSUFFICIENT_SIZE forever (twice the entries offered, or one more): no crash, no spin, up with gpu_retired_pages absent and an ecc error, its other ECC readings and processes served, no leak")
	for _, size := range []string{sim.RetiredPagesDoubling, sim.RetiredPagesOneMore} {
		h := start(t, "--backend=sim", "--sim.config="+simConfig(t, "profile: v100\nfaults:\n  - {gpu: 0, retired_pages_size: "+size+"}\n"))
		h.baseline()
		page := h.metrics()
		if v, ok := gpuUp(page, 0); !ok || v != 1 {
			t.Errorf("%s: gpu_up{gpu=0} = %v (present %v), want 1", size, v, ok)
		}
		for _, cause := range []string{"multiple_single_bit", "double_bit"} {
			if v, ok := testenv.Sample(page, "gpu_retired_pages", map[string]string{"gpu": "0", "cause": cause}); ok {
				t.Errorf("%s: gpu_retired_pages{cause=%s} = %v; its count never fit, so it must be absent", size, cause, v)
			}
		}
		for _, name := range []string{"gpu_retired_pages_pending", "gpu_temperature_celsius", "gpu_processes"} {
			if _, ok := testenv.Sample(page, name, map[string]string{"gpu": "0"}); !ok {
				t.Errorf("%s: %s{gpu=0} absent: the rest of the GPU must still be served", size, name)
			}
		}
		if v, _ := testenv.Sample(page, "gpuwatch_collector_success", map[string]string{"collector": "ecc"}); v != 0 {
			t.Errorf("%s: gpuwatch_collector_success{collector=ecc} = %v, want 0", size, v)
		}
		h.noLeak()
	}
}

func TestGPUProcessListUnsupported(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "process lists answer NOT_SUPPORTED on GPU 1: gpu_processes absent there, not 0; no processes error")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t, "profile: dgx-h100\nfaults:\n  - {gpu: 1, unsupported: [processes]}\n"))
	page := h.metrics()
	if v, ok := testenv.Sample(page, "gpu_processes", map[string]string{"gpu": "1"}); ok {
		t.Errorf("gpu_processes{gpu=1} = %v, want absent", v)
	}
	if v, ok := testenv.Sample(page, "gpu_processes", map[string]string{"gpu": "5"}); !ok || v != 0 {
		t.Errorf("idle gpu_processes{gpu=5} = %v (present %v), want 0", v, ok)
	}
	if v, _ := testenv.Sample(page, "gpuwatch_collector_success", map[string]string{"collector": "processes"}); v != 1 {
		t.Errorf("gpuwatch_collector_success{collector=processes} = %v, want 1", v)
	}
}

func TestGPUHandleLost(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "XID 79 on GPU 5 at 1s, then from 2s even its handle call answers GPU_IS_LOST: gpu_up{uuid} keeps the GPU's uuid, gpu_xid_errors_total{xid=79} stays 1")
	cfg := "profile: dgx-h100\nseed: handle-lost\nfaults:\n  - {gpu: 5, xid: 79, at: 1s, lost_after: 2s, lost_handle: true}\n"
	uuid := simUUID(t, cfg, 5)
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t, cfg))
	testenv.WaitFor(t, 20*time.Second, "GPU 5 lost", func() bool { v, _ := gpuUp(h.metrics(), 5); return v == 0 })
	h.baseline()
	for range 3 {
		page := h.metrics()
		if v, ok := testenv.Sample(page, "gpu_up", map[string]string{"gpu": "5", "uuid": uuid}); !ok || v != 0 {
			t.Fatalf("gpu_up{gpu=5,uuid=%s} = %v (present %v), want 0 with its uuid", uuid, v, ok)
		}
		if v, ok := testenv.Sample(page, "gpu_xid_errors_total", map[string]string{"gpu": "5", "uuid": uuid, "xid": "79"}); !ok || v != 1 {
			t.Fatalf("after the loss: gpu_xid_errors_total{gpu=5,xid=79} = %v (present %v), want 1", v, ok)
		}
	}
	h.noLeak()
}

// simUUID is the UUID the simulator gives GPU gpu under config (the seed
// in it decides, not the host name).
func simUUID(t *testing.T, config string, gpu int) string {
	t.Helper()
	cfg, err := sim.ParseConfig([]byte(config), "sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ret := s.Init(); ret != nvml.SUCCESS {
		t.Fatalf("sim init: %v", ret)
	}
	defer s.Shutdown()
	dev, ret := s.DeviceGetHandleByIndex(gpu)
	if ret != nvml.SUCCESS {
		t.Fatalf("gpu %d: %v", gpu, ret)
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		t.Fatalf("gpu %d uuid: %v", gpu, ret)
	}
	return uuid
}

// Correlated failures: XIDs raised at the instant another GPU is lost are
// all counted (with one event set for every GPU, the XID pending at GPU
// 3's loss was once dropped with the set).
func TestGPUXIDsAtTheInstantOfALoss(t *testing.T) {
	t.Parallel()
	record(t, "gpu", "dgx-h100, GPU 3 lost at 1s while GPUs 2, 0 and 6 raise XIDs at 1s: every XID counted, GPU 3 down, no leak")
	h := start(t, "--backend=sim", "--sim.config="+simConfig(t,
		"profile: dgx-h100\nfaults:\n  - {gpu: 3, lost_after: 1s}\n  - {gpu: 2, xid: 79, at: 1s}\n  - {gpu: 0, xid: 48, at: 1s}\n  - {gpu: 6, xid: 94, at: 1s}\n"))
	want := map[string]string{"2": "79", "0": "48", "6": "94"}
	testenv.WaitFor(t, 20*time.Second, "GPU 3 down and every XID counted", func() bool {
		page := h.metrics()
		if v, _ := gpuUp(page, 3); v != 0 {
			return false
		}
		for gpu, xid := range want {
			if v, _ := testenv.Sample(page, "gpu_xid_errors_total", map[string]string{"gpu": gpu, "xid": xid}); v != 1 {
				return false
			}
		}
		return true
	})
	h.baseline()
	if got := upGPUs(h.metrics(), 8); fmt.Sprint(got) != "[1 1 1 0 1 1 1 1]" {
		t.Errorf("gpu_up = %v", got)
	}
	h.noLeak()
}
