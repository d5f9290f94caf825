//go:build linux

package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bad configuration: every one must be refused at start, within seconds,
// with one line naming the file, flag or key (exit status not 0), never a
// panic, a hang or a memory blow-up.

// refused runs gpuwatch with args and checks the refusal.
func refused(t *testing.T, wantInError string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuwatchBin, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	msg := strings.TrimSpace(string(out))
	switch {
	case ctx.Err() != nil:
		t.Fatalf("gpuwatch %s still running after 20s (a hang)", strings.Join(args, " "))
	case err == nil:
		t.Fatalf("gpuwatch %s exited 0, want a refusal", strings.Join(args, " "))
	case strings.Contains(msg, "panic") || stackTrace.MatchString(msg):
		t.Fatalf("a panic instead of an error:\n%s", msg)
	case strings.Count(msg, "\n") > 0:
		t.Errorf("the error is not one line:\n%s", msg)
	case !strings.Contains(msg, wantInError):
		t.Errorf("error %q does not name %q", msg, wantInError)
	case took > 10*time.Second:
		t.Errorf("refusing took %v", took)
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Errorf("killed by a signal: %v", ee)
	}
}

func fifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	bigMetrics := writeFile(t, filepath.Join(t.TempDir(), "big.yml"), "enable: [gpu_up]\n"+strings.Repeat("# padding\n", 300000))
	multiDoc := writeFile(t, filepath.Join(t.TempDir(), "two.yml"), "enable: [gpu_up]\n---\ndisable: [gpu_no_such_thing]\n")
	disableUp := writeFile(t, filepath.Join(t.TempDir(), "up.yml"), "disable: [gpu_up]\n")
	nan := writeFile(t, filepath.Join(t.TempDir(), "nan.yml"), "profile: h100\nprocesses:\n  - {gpu: 0, pid: 9, sm_utilization: .nan}\n")
	sim := []string{"--backend=sim", "--sim.profile=h100"}
	serve := func(extra ...string) []string {
		return append(append([]string{"--web.listen-address=127.0.0.1:0"}, sim...), extra...)
	}
	for _, c := range []struct {
		name, what, want string
		args             []string
	}{
		{"SimConfigFIFO", "--sim.config is a named pipe (used to block forever)", "named pipe",
			append(serve(), "--sim.config="+fifo(t, "sim.yml"))},
		{"MetricsConfigDevZero", "--metrics.config=/dev/zero (used to grow memory at 200 MB/s)", "/dev/zero", serve("--metrics.config=/dev/zero")},
		{"MetricsConfigTooBig", "--metrics.config of 3 MB", "big.yml", serve("--metrics.config=" + bigMetrics)},
		{"MetricsConfigTwoDocuments", "--metrics.config with a second YAML document", "one YAML document", serve("--metrics.config=" + multiDoc)},
		{"MetricsConfigDisablesGpuUp", "--metrics.config disabling gpu_up", "gpu_up is always exported", serve("--metrics.config=" + disableUp)},
		{"WebConfigFIFO", "--web.config.file is a named pipe", "--web.config.file", serve("--web.config.file=" + fifo(t, "web.yml"))},
		{"SimConfigNaN", "sm_utilization: .nan", "sm_utilization NaN", serve("--sim.config=" + nan)},
		{"TelemetryPathHealthz", "--web.telemetry-path=/healthz (used to panic)", "--web.telemetry-path", serve("--web.telemetry-path=/healthz")},
		{"TelemetryPathRoot", "--web.telemetry-path=/ (served metrics on every path)", "--web.telemetry-path", serve("--web.telemetry-path=/")},
		{"TelemetryPathPprof", "--web.telemetry-path=/debug/pprof/ with pprof on (used to panic)", "--web.telemetry-path", serve("--web.enable-pprof", "--web.telemetry-path=/debug/pprof/")},
		{"CollectionTimeoutZero", "--collection.timeout=0s (silently became 10s)", "--collection.timeout", serve("--collection.timeout=0s")},
		{"AttributionTimeoutNegative", "--attribution.timeout=-1s", "--attribution.timeout", serve("--attribution.timeout=-1s")},
		{"PinTimeNegative", "--sim.pin-time=-1s", "--sim.pin-time", serve("--sim.pin-time=-1s")},
		{"MaxConnectionsNegative", "--web.max-connections=-1", "--web.max-connections", serve("--web.max-connections=-1")},
		{"TextfileIntervalNegative", "textfile --interval=-1s (wrote once)", "--interval", append([]string{"textfile", "--output=" + filepath.Join(t.TempDir(), "g.prom"), "--interval=-1s"}, sim...)},
		{"TextfileIntervalNanosecond", "textfile --interval=1ns", "--interval", append([]string{"textfile", "--output=" + filepath.Join(t.TempDir(), "g.prom"), "--interval=1ns"}, sim...)},
		{"PsNoSuchGPU", "ps --gpu=99 on 8 GPUs (printed an empty table)", "--gpu=99", []string{"ps", "--gpu=99", "--backend=sim", "--sim.profile=dgx-h100"}},
		{"PsNegativeGPU", "ps --gpu=-1", "--gpu=-1", []string{"ps", "--gpu=-1", "--backend=sim", "--sim.profile=dgx-h100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			record(t, "config", c.what+": refused with one line")
			refused(t, c.want, c.args...)
		})
	}
}

func TestConfigStaleTextfileTemps(t *testing.T) {
	t.Parallel()
	record(t, "config", "textfile after a SIGKILLed run: its stale .gpu.prom.tmp-* files are removed, the output written")
	dir := t.TempDir()
	stale := writeFile(t, filepath.Join(dir, ".gpu.prom.tmp-12345"), "half a file")
	other := writeFile(t, filepath.Join(dir, ".other.prom.tmp-1"), "not ours")
	out, err := exec.Command(gpuwatchBin, "textfile", "--backend=sim", "--sim.profile=h100", "--output="+filepath.Join(dir, "gpu.prom")).CombinedOutput()
	if err != nil {
		t.Fatalf("textfile: %v\n%s", err, out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("the stale temporary file is still there")
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("another output's temporary file was removed")
	}
}
