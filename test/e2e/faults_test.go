//go:build linux

package e2e

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestFaults runs a simulated DGX in real time with a GPU that is lost after
// two seconds, a GPU whose power and fan reads are unsupported, and an XID
// event, and checks that the right series appear and disappear while the
// exporter keeps serving every other GPU.
func TestFaults(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, `profile: dgx-h100
faults:
  - {gpu: 3, lost_after: 2s}
  - {gpu: 1, unsupported: [power, fan_speed]}
  - {gpu: 2, xid: 79, at: 4s}
`)
	base, proc := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg)

	// Unsupported reads are absent, never zero; the rest of GPU 1 is there.
	fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	if _, ok := testenv.Sample(fams, "gpu_power_usage_watts", map[string]string{"gpu": "1"}); ok {
		t.Error("gpu_power_usage_watts{gpu=1} exported although power is unsupported")
	}
	if _, ok := testenv.Sample(fams, "gpu_fan_speed_ratio", map[string]string{"gpu": "1"}); ok {
		t.Error("gpu_fan_speed_ratio{gpu=1} exported although fan speed is unsupported")
	}
	if _, ok := testenv.Sample(fams, "gpu_temperature_celsius", map[string]string{"gpu": "1"}); !ok {
		t.Error("gpu_temperature_celsius{gpu=1} missing: only power and fan were made unsupported")
	}
	if _, ok := testenv.Sample(fams, "gpu_power_usage_watts", map[string]string{"gpu": "0"}); !ok {
		t.Error("gpu_power_usage_watts{gpu=0} missing")
	}

	// The XID arrives through the event goroutine.
	testenv.WaitFor(t, 15*time.Second, "gpu_xid_errors_total{gpu=2,xid=79} = 1", func() bool {
		v, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": "79"})
		return ok && v == 1
	})

	// GPU 3 falls off the bus: gpu_up goes to 0, its readings vanish, the
	// other seven keep reporting, and the process stays up.
	testenv.WaitFor(t, 15*time.Second, "gpu_up{gpu=3} = 0", func() bool {
		v, ok := testenv.Sample(testenv.ParseMetrics(t, httpGet(t, base+"/metrics")), "gpu_up", map[string]string{"gpu": "3"})
		return ok && v == 0
	})
	fams = testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
	if _, ok := testenv.Sample(fams, "gpu_utilization_ratio", map[string]string{"gpu": "3"}); ok {
		t.Error("lost GPU 3 still exports gpu_utilization_ratio")
	}
	for _, gpu := range []string{"0", "1", "2", "4", "5", "6", "7"} {
		if v, ok := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": gpu}); !ok || v != 1 {
			t.Errorf("gpu_up{gpu=%s} = %v (present %v) after GPU 3 was lost", gpu, v, ok)
		}
		// GPU 7 runs in MIG mode, where NVML reports memory per instance
		// and no whole-GPU utilization.
		reading := "gpu_utilization_ratio"
		if gpu == "7" {
			reading = "gpu_mig_memory_used_bytes"
		}
		if _, ok := testenv.Sample(fams, reading, map[string]string{"gpu": gpu}); !ok {
			t.Errorf("%s{gpu=%s} missing after GPU 3 was lost", reading, gpu)
		}
	}
	if proc.Exited() {
		t.Fatal("gpuwatch exited after losing a GPU")
	}
	// The log says so, once each.
	testenv.WaitFor(t, 10*time.Second, "warnings about the lost GPU and the XID", func() bool {
		out := proc.Output.String()
		return strings.Contains(out, `level=WARN source=healthlog.go`) &&
			strings.Contains(out, `msg="GPU is down" gpu=3`) && strings.Contains(out, "reason=gpu_is_lost") &&
			strings.Contains(out, `gpu=2`) && strings.Contains(out, `since_start=1×79`)
	})
	if n := strings.Count(proc.Output.String(), `msg="GPU is down" gpu=3`); n != 1 {
		t.Errorf("lost GPU warned about %d times, want once:\n%s", n, proc.Output.String())
	}
}

// TestHungGPU: the NVML calls of GPU 4 hang for twelve seconds. Scrapes
// keep returning within the collection timeout, report GPU 4 down while it
// hangs (once its hung read has run three collection timeouts: until then
// its last reading is served, as a slow driver's is) and the other GPUs
// up, and GPU 4 comes back afterwards.
func TestHungGPU(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nfaults:\n  - {gpu: 4, hang_after: 1s, hang_for: 12s}\n")
	// 2s: the healthy GPUs must answer within the collection timeout
	// however loaded the machine, or they too are rightly reported down.
	base, proc := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--collection.timeout=2s")

	scrape := func() map[string]*dto.MetricFamily {
		start := time.Now()
		fams := testenv.ParseMetrics(t, httpGet(t, base+"/metrics"))
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("a scrape took %v with a 2s collection timeout", took)
		}
		return fams
	}
	up := func(fams map[string]*dto.MetricFamily, gpu string) float64 {
		v, _ := testenv.Sample(fams, "gpu_up", map[string]string{"gpu": gpu})
		return v
	}
	testenv.WaitFor(t, 20*time.Second, "gpu_up{gpu=4} = 0 while it hangs", func() bool {
		fams := scrape()
		if up(fams, "4") != 0 {
			return false
		}
		for _, gpu := range []string{"0", "3", "5"} {
			if up(fams, gpu) != 1 {
				t.Errorf("gpu_up{gpu=%s} = %v while GPU 4 hangs", gpu, up(fams, gpu))
			}
		}
		return true
	})
	testenv.WaitFor(t, 25*time.Second, "gpu_up{gpu=4} = 1 after the hang", func() bool { return up(scrape(), "4") == 1 })
	if proc.Exited() {
		t.Fatal("gpuwatch exited")
	}
	// The log line may follow the scrape that saw the GPU back: the
	// collection's answer goes out before its health is logged.
	logged := func() bool {
		out := proc.Output.String()
		return strings.Contains(out, `msg="GPU did not answer for three --collection.timeout; reported down (gpu_up 0) until it does" gpu=4`) &&
			strings.Contains(out, `msg="GPU is back" gpu=4`)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !logged() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !logged() {
		t.Errorf("the log does not tell of GPU 4's timeout and return:\n%s", proc.Output.String())
	}
}

// TestReadyzWhenEveryGPUIsDown: /readyz turns 503, saying why, once the
// host's only GPU is lost (the process stays up: /healthz is 200).
func TestReadyzWhenEveryGPUIsDown(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: h100\nfaults:\n  - {gpu: 0, lost_after: 2s}\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg)
	testenv.WaitFor(t, 10*time.Second, "/readyz to answer 200", func() bool {
		_, err := httpGetNoFail(base + "/readyz")
		return err == nil
	})
	var body string
	testenv.WaitFor(t, 15*time.Second, "/readyz to answer 503 once GPU 0 is lost", func() bool {
		_, _ = httpGetNoFail(base + "/metrics") // a collection
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	if want := "not ready: every GPU is down: 0 (gpu_is_lost)\n"; body != want {
		t.Errorf("/readyz body = %q, want %q", body, want)
	}
	if _, err := httpGetNoFail(base + "/healthz"); err != nil {
		t.Errorf("/healthz: %v", err)
	}
}
