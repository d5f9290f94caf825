//go:build cgo

package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// startSim starts the NVML reader on a simulated host whose driver is
// configured by cfg, and returns the reader's error (nil when it started).
func startSim(t *testing.T, cfg sim.Config) (*nvmlbackend.Reader, error) {
	t.Helper()
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := nvmlbackend.New(s, nvmlbackend.Options{Groups: map[string]bool{snapshot.GroupInfo: true}, Now: s.Now})
	if r != nil {
		t.Cleanup(func() { _ = r.Close() })
	}
	return r, err
}

// A driver library that does not match the loaded
// kernel module (an upgrade without a reload) is fixed by reloading the
// module or rebooting, not by installing a driver or the simulator; and
// a failed start does not claim that attribution or Slurm were turned off.
func TestRMVersionMismatchAdvice(t *testing.T) {
	_, err := startSim(t, sim.Config{Profile: "h100", InitError: "lib_rm_version_mismatch"})
	if err == nil {
		t.Fatal("the reader started on a library that answers LIB_RM_VERSION_MISMATCH")
	}
	env := baseEnv(t)
	env.Backend, env.Snapshot, env.SnapshotErr = "nvml", nil, err
	env.Attribution, env.NotStarted = true, true
	r := Run(env)
	res := find(t, r, "driver")
	if res.Status != Fail || !strings.Contains(res.Fix, "reload") || !strings.Contains(res.Fix, "reboot") {
		t.Errorf("driver = %+v, want the advice to reload the kernel module or reboot", res)
	}
	if strings.Contains(res.Fix, "install the NVIDIA driver") || strings.Contains(res.Fix, "--backend=sim") {
		t.Errorf("driver fix %q still says to install a driver or use the simulator", res.Fix)
	}
	for _, res := range r.Results {
		if strings.Contains(res.Found, "--no-attribution") || strings.Contains(res.Found, "attribution is off") {
			t.Errorf("%s says %q though attribution was not turned off", res.Check, res.Found)
		}
	}
	if res := find(t, r, "procfs"); res.Status == Skip {
		t.Errorf("procfs = %+v; it needs no driver and is still checked", res)
	}
	if res := find(t, r, "slurm"); res.Status != Skip || !strings.Contains(res.Found, "not checked") {
		t.Errorf("slurm = %+v, want not checked", res)
	}
	if res := find(t, r, "owner sources"); res.Status != Skip || !strings.Contains(res.Found, "not checked") {
		t.Errorf("owner sources = %+v, want not checked", res)
	}
}

// The driver's version string is the driver's text: doctor prints it with
// its control characters replaced, one line per check.
func TestDriverVersionPrintedWithoutControlCharacters(t *testing.T) {
	hostile := "550.90.07\n\x1b[2J✘ fake line\r\x00"
	pin := sim.Duration(time.Hour)
	rd, err := startSim(t, sim.Config{Profile: "h100", DriverVersion: &hostile, PinTime: &pin})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := rd.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	env := baseEnv(t)
	env.Snapshot = snap
	res := find(t, Run(env), "driver")
	if strings.ContainsAny(res.Found, "\n\r\x1b\x00") {
		t.Errorf("driver check prints control characters: %q", res.Found)
	}
	if !strings.Contains(res.Found, "550.90.07?") {
		t.Errorf("driver check %q lost the version", res.Found)
	}
}

// A slow driver (every NVML call answers 150 ms late)
// is named as such, with the fix that helps, and never as a lost GPU.
func TestSlowDriverAdvice(t *testing.T) {
	delay := sim.Duration(150 * time.Millisecond)
	s, err := sim.New(sim.Config{Profile: "h100", Faults: []sim.Fault{{GPU: 0, SlowCalls: &delay}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := nvmlbackend.New(s, nvmlbackend.Options{Groups: map[string]bool{snapshot.GroupTemperature: true}, Now: s.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	snap, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	env := baseEnv(t)
	env.Snapshot, env.CollectionTimeout = snap, 5*time.Second
	report := Run(env)
	res := find(t, report, "NVML latency")
	if res.Status != Fail || !strings.Contains(res.Found, "NVML calls are slow (") || !strings.Contains(res.Fix, "raise --collection.timeout; check the driver's health") {
		t.Errorf("NVML latency = %+v", res)
	}
	for _, res := range report.Results {
		if strings.Contains(res.Fix, "lost GPU") {
			t.Errorf("%s calls a slow GPU lost: %+v", res.Check, res)
		}
	}
	if res := find(t, report, "GPUs"); res.Status != OK {
		t.Errorf("GPUs = %+v; a slow GPU answers", res)
	}
}

// A healthy driver's calls pass the latency check.
func TestHealthyDriverLatency(t *testing.T) {
	env := baseEnv(t)
	env.CollectionTimeout = 5 * time.Second
	if res := find(t, Run(env), "NVML latency"); res.Status != OK {
		t.Errorf("NVML latency on the simulator = %+v", res)
	}
}
