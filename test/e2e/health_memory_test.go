//go:build linux

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/health"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// memoryFaultsConfig injects, on a simulated DGX H100: uncorrectable ECC
// errors on GPU 1, a pending row remap on GPU 2 (both cleared by a GPU
// reset later), and a row remap failure on GPU 3, which a reset does not
// clear. The reset comes late enough for the failing verdicts to be seen
// first on a loaded machine.
const memoryFaultsConfig = `profile: dgx-h100
faults:
  - {gpu: 1, ecc_uncorrectable: 2, at: 1s}
  - {gpu: 1, reset_at: 20s}
  - {gpu: 2, row_remap: pending, at: 1s}
  - {gpu: 2, reset_at: 20s}
  - {gpu: 3, row_remap: failure, at: 1s}
  - {gpu: 3, reset_at: 20s}
`

// checkOf is the named check of a GPU's report; ok false when absent.
func checkOf(g health.GPUReport, name string) (health.CheckReport, bool) {
	for _, c := range g.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return health.CheckReport{}, false
}

// watchMemoryChecks follows base's /api/v1/health through the memory
// faults: each check fails as the default policy says, with its reason,
// and the ECC and pending-remap checks clear at the GPU reset while the
// remap failure stays.
func watchMemoryChecks(t *testing.T, base string) {
	t.Helper()
	failing := func(r health.Report, gpu int, check string) bool {
		c, ok := checkOf(r.GPUs[gpu], check)
		return ok && c.Status == "fail" && r.GPUs[gpu].Status == "fail"
	}
	var r health.Report
	testenv.WaitFor(t, 15*time.Second, "the ECC, pending remap and remap failure checks failing", func() bool {
		r = healthReport(t, base)
		return len(r.GPUs) == 8 && failing(r, 1, "ecc_uncorrectable") && failing(r, 2, "row_remap_pending") && failing(r, 3, "row_remap_failure")
	})
	for gpu, want := range map[int]string{
		1: "2 uncorrectable ECC error(s) since the driver loaded",
		2: "a memory row remap waits for a GPU reset",
		3: "a memory row remapping failed",
	} {
		if !strings.Contains(r.GPUs[gpu].Reason, want) {
			t.Errorf("GPU %d's reason %q, want it to contain %q", gpu, r.GPUs[gpu].Reason, want)
		}
	}
	for _, gpu := range []int{0, 4} {
		if r.GPUs[gpu].Status != "ok" {
			t.Errorf("GPU %d = %s %q, want ok", gpu, r.GPUs[gpu].Status, r.GPUs[gpu].Reason)
		}
	}
	testenv.WaitFor(t, 60*time.Second, "the GPU reset to clear the ECC and pending remap checks", func() bool {
		r = healthReport(t, base)
		return r.GPUs[1].Status == "ok" && r.GPUs[2].Status == "ok"
	})
	for gpu, check := range map[int]string{1: "ecc_uncorrectable", 2: "row_remap_pending"} {
		if c, ok := checkOf(r.GPUs[gpu], check); !ok || c.Status != "ok" {
			t.Errorf("GPU %d's %s after the reset: %+v (present %v)", gpu, check, c, ok)
		}
	}
	if !failing(r, 3, "row_remap_failure") {
		t.Errorf("GPU 3 after the reset: %s %q; a remap failure stays until the GPU is replaced", r.GPUs[3].Status, r.GPUs[3].Reason)
	}
}

// TestHealthMemoryChecksOnTheSimulator: the memory checks through the
// simulator's faults and serve.
func TestHealthMemoryChecksOnTheSimulator(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, memoryFaultsConfig)
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--no-web.ui")
	watchMemoryChecks(t, base)
}

// TestHealthMemoryChecksThroughFakeNVML: the same through the real cgo
// path, gpuwatch on the fake libnvidia-ml.so.1.
func TestHealthMemoryChecksThroughFakeNVML(t *testing.T) {
	t.Parallel()
	env := fakeEnv(t, "R580", memoryFaultsConfig)
	base, p, ok := startWithEnv(t, env, isolated(t)...)
	if !ok {
		t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
	}
	watchMemoryChecks(t, base)
}
