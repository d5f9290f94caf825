//go:build linux

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// runGpuwatch runs the binary to completion and returns its combined output
// and exit code.
func runGpuwatch(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(gpuwatchBin, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running gpuwatch: %v", err)
	}
	return string(out), code
}

// On a machine without the NVIDIA driver (every CI machine), the default
// backend must fail with one clear line that names the library and the way
// to the simulator.
func TestNoDriverSaysHowToRunTheSimulator(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA GPU is present on this machine")
	}
	out, code := runGpuwatch(t, "--web.listen-address=127.0.0.1:0")
	if code == 0 {
		t.Fatalf("exit code 0 without a driver; output:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"libnvidia-ml.so.1", "--backend=sim", "--sim.profile="} {
		if !strings.Contains(last, want) {
			t.Errorf("error line %q lacks %q", last, want)
		}
	}
	// The hint of a subcommand runs that subcommand.
	out, code = runGpuwatch(t, "ps")
	if code == 0 || !strings.Contains(out, "run: gpuwatch ps --backend=sim --sim.profile=dgx-h100") {
		t.Errorf("gpuwatch ps without a driver (exit %d): %s", code, out)
	}
}

func TestSimConfigUnknownKeyNamesTheLine(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: h100\nprocesses:\n  - {gpu: 0, pid: 1, used_memroy_bytes: 5}\n")
	out, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.config="+cfg, "--output="+filepath.Join(t.TempDir(), "x.prom"))
	if code == 0 || !strings.Contains(out, "line 3") || !strings.Contains(out, "used_memroy_bytes") {
		t.Fatalf("exit %d, output %q: want an error naming line 3 and the key", code, out)
	}
}

func TestUnknownProfileListsTheValidOnes(t *testing.T) {
	out, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile=dgx-z9000", "--output="+filepath.Join(t.TempDir(), "x.prom"))
	if code == 0 || !strings.Contains(out, "dgx-h100") || !strings.Contains(out, "rtx4090") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestMetricsConfigRejectsUnknownNames(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "metrics.yaml")
	writeFile(t, cfg, "disable:\n  - gpu_powr_usage_watts\n")
	out, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile=h100", "--metrics.config="+cfg, "--output="+filepath.Join(t.TempDir(), "x.prom"))
	if code == 0 || !strings.Contains(out, "gpu_powr_usage_watts") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestMetricsConfigDisablesByGlob(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "metrics.yaml")
	writeFile(t, cfg, "disable:\n  - gpu_nvlink_*\n")
	out := filepath.Join(dir, "gpu.prom")
	if msg, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile=h100", "--metrics.config="+cfg, "--output="+out); code != 0 {
		t.Fatalf("textfile failed: %s", msg)
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(string(data), "gpu_nvlink_") {
		t.Fatal("gpu_nvlink_* still exported after disabling it")
	}
	if !strings.Contains(string(data), "gpu_power_usage_watts{") {
		t.Fatal("other metrics went missing")
	}
}

func TestNoCollectorFlagDropsTheGroup(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gpu.prom")
	if msg, code := runGpuwatch(t, "textfile", "--backend=sim", "--sim.profile=h100", "--no-collector.power", "--output="+out); code != 0 {
		t.Fatalf("textfile failed: %s", msg)
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(string(data), "gpu_power_usage_watts") || strings.Contains(string(data), `collector="power"`) {
		t.Fatal("--no-collector.power left power series behind")
	}
	// A one-shot textfile waits for a whole GPM window (NVML needs 100 ms
	// between samples; gpuwatch makes it a second), so it has GPM values.
	if !strings.Contains(string(data), "gpu_gpm_sm_active_ratio{") {
		t.Fatal("one-shot textfile on an H100 lacks gpu_gpm_sm_active_ratio")
	}
}

func TestMetricsCommandListsTheCatalog(t *testing.T) {
	narrow, code := runGpuwatch(t, "metrics")
	if code != 0 {
		t.Fatalf("gpuwatch metrics failed: %s", narrow)
	}
	// The default catalog table fits a 100-column terminal (the driver
	// branch table that may follow it, after a blank line, is not the
	// catalog).
	catalog, _, _ := strings.Cut(strings.TrimSpace(narrow), "\n\n")
	for line := range strings.SplitSeq(catalog, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 || !strings.Contains(narrow, "gpu_power_usage_watts") {
			t.Errorf("%d columns: %q", n, line)
		}
	}
	out, code := runGpuwatch(t, "metrics", "--format=wide")
	if code != 0 {
		t.Fatalf("gpuwatch metrics failed: %s", out)
	}
	for _, want := range []string{"gpu_power_usage_watts", "nvmlDeviceGetPowerUsage", "gpu_xid_errors_total", "gpu_gpm_sm_active_ratio"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpuwatch metrics lacks %q", want)
		}
	}
}

func TestHelpExplainsTheSimulator(t *testing.T) {
	out, code := runGpuwatch(t, "--help")
	if code != 0 || !strings.Contains(out, "--backend=sim") || !strings.Contains(out, "--web.listen-address") {
		t.Fatalf("--help (exit %d) does not explain the simulator and flags:\n%s", code, out)
	}
}

// TestPsHelpShowsWhatPsUses: `gpuwatch ps --help` describes ps's own
// flags, then names the shared flags ps reads (backend, simulator, owners,
// logging) and not serve's; --help-long describes them.
func TestPsHelpShowsWhatPsUses(t *testing.T) {
	out, code := runGpuwatch(t, "ps", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	own, shared, ok := strings.Cut(out, "Shared flags")
	if !ok {
		t.Fatalf("ps --help has no shared section:\n%s", out)
	}
	for _, want := range []string{"-o, --output=table", "table or json", "--gpu="} {
		if !strings.Contains(own, want) {
			t.Errorf("ps --help lacks %q before the shared flags", want)
		}
	}
	names := strings.Fields(shared)
	for _, want := range []string{"--backend", "--sim.profile", "--path.procfs", "--cri.socket", "--attribution.timeout", "--slurm.node-name", "--log.level"} {
		if !slices.Contains(names, want) {
			t.Errorf("ps --help does not name %s", want)
		}
	}
	for _, unwanted := range []string{"--web.listen-address", "--collector.gpm", "--metrics.config", "--collector.slurm", "--slurm.sdiag-path", "--compat"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("ps --help shows %s, which ps does not use", unwanted)
		}
	}
	if long, _ := runGpuwatch(t, "ps", "--help-long"); !strings.Contains(long, "--path.procfs=") || !strings.Contains(long, "--backend=") {
		t.Errorf("ps --help-long does not describe the shared flags:\n%s", long)
	}
	if all, _ := runGpuwatch(t, "--help"); !strings.Contains(all, "--web.listen-address") || !strings.Contains(all, "collector.gpm") {
		t.Error("gpuwatch --help lost serve's flags")
	}
}

// TestHelpGoesToStdout: help and the version are asked for, so they go to
// standard output with exit 0 (`gpuwatch --help | less`); an error goes to
// standard error with a non-zero exit.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"report", "--help"}, {"ps", "--help-long"}, {"help", "job"}, {"--version"}} {
		stdout, stderr, code := runSplit(t, args...)
		if code != 0 || stdout == "" || stderr != "" {
			t.Errorf("gpuwatch %v: exit %d, %d bytes on stdout, stderr %q", args, code, len(stdout), stderr)
		}
	}
	stdout, stderr, code := runSplit(t, "--no-such-flag")
	if code == 0 || stdout != "" || !strings.Contains(stderr, "--no-such-flag") {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// runSplit runs the binary to completion and returns its stdout, stderr
// and exit code.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := exec.Command(gpuwatchBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running gpuwatch: %v", err)
	}
	return out.String(), errOut.String(), code
}

// goType matches a Go type in a message: exporter.filterFile, struct {,
// []uint64.
var goType = regexp.MustCompile(`\b[a-z]+\.[a-z]+[A-Z]\w*|\bstruct \{|\[\]\w`)

// TestConfigErrorsNameTheFlagOrFile: a missing file names its flag; a YAML
// error names the file and the line, in YAML's words, never a Go type.
func TestConfigErrorsNameTheFlagOrFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.yaml")
	out, code := runGpuwatch(t, "ps", "--backend=sim", "--sim.config="+missing)
	if code == 0 || !strings.Contains(out, "--sim.config="+missing) {
		t.Errorf("a missing --sim.config (exit %d): %q", code, out)
	}
	cfg := filepath.Join(dir, "metrics.yaml")
	writeFile(t, cfg, "enable: [gpu_up]\nbogus: 1\n")
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, "checks: {}\nxid: [1]\n")
	for _, args := range [][]string{
		{"metrics", "--metrics.config=" + cfg},
		{"health", "--backend=sim", "--sim.profile=h100", "--health.policy=" + policy},
	} {
		out, code := runGpuwatch(t, args...)
		_, file, _ := strings.Cut(args[len(args)-1], "=")
		if code == 0 || !strings.Contains(out, file+": line 2: ") || goType.MatchString(out) {
			t.Errorf("gpuwatch %v (exit %d): %q: want the file, line 2 and no Go type", args, code, out)
		}
	}
}
