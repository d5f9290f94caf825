//go:build linux

package e2e

import (
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden from the current output")

var profiles = []string{"h100", "dgx-h100", "dgx-a100-mig", "rtx4090", "v100", "large"}

// volatileMetric reports whether a line of exposition varies between runs for
// reasons that have nothing to do with the simulated GPUs: timings, the Go
// runtime, the process, the build.
func volatileMetric(line string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
	for _, prefix := range []string{"go_", "process_", "promhttp_", "gpuwatch_build_info", "gpuwatch_collector_duration_seconds", "gpuwatch_snapshot_duration_seconds", "gpu_reading_age_seconds",
		"gpuwatch_accounting_cpu_seconds_total", "gpuwatch_accounting_ticks_total"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func stableExposition(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" && !volatileMetric(line) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// gpmWindow is a little more than the reader's shortest GPM window.
const gpmWindow = 1100 * time.Millisecond

// settle waits until the pages of the servers at bases no longer depend on
// how fast the machine is: each server's first collection, which serve
// starts by itself, has completed (a scrape that shared it would get the
// first read's process utilization samples, which later reads of a pinned
// clock do not repeat: /readyz says it is done), and the GPM window it
// opened has closed (a GPM reading covers at least a second; the clock is
// pinned, so the values do not depend on how long this took). The windows
// opened before /readyz answered, so one wait closes every server's.
func settle(t *testing.T, bases ...string) {
	t.Helper()
	for _, base := range bases {
		testenv.WaitFor(t, 30*time.Second, "the first collection (/readyz)", func() bool {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	time.Sleep(gpmWindow)
}

// TestGolden compares the whole /metrics page of each simulator profile, at
// a pinned simulated time, with testdata/golden/PROFILE.prom.
// Regenerate after an intended change with:
//
//	make golden     (or: go test ./test/e2e -run TestGolden -update)
func TestGolden(t *testing.T) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			// Each waits for a GPM window: in parallel, that costs one second.
			t.Parallel()
			base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile="+profile, "--sim.pin-time=1h",
				// Nothing of this host may leak into the page: an empty
				// /proc (the simulated PIDs then have no owner) and no
				// container runtime or Slurm.
				"--path.procfs="+t.TempDir(), "--slurm.jobs=false", "--sim.seed=golden",
				"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=")
			settle(t, base)
			got := stableExposition(httpGet(t, base+"/metrics"))
			path := filepath.Join("testdata", "golden", profile+".prom")
			compareGolden(t, path, got, "/metrics for "+profile)
		})
	}
}

func firstDifference(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return ""
}

// TestPromtoolCheckMetrics lints every profile's page with promtool, the
// same linter Prometheus's maintainers use.
func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			base, _ := startGpuwatch(t, "--backend=sim", "--sim.profile="+profile)
			page := httpGet(t, base+"/metrics")
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(page)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("promtool check metrics on %s: %v\n%s", profile, err, out)
			}
		})
	}
}

// compareGolden compares got with the golden file at path, or writes it
// there with -update (make golden). what names the page in the failure.
func compareGolden(t *testing.T, path, got, what string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with: make golden)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s; if the change is intended, run `make golden` and review the diff.\n%s",
			what, path, firstDifference(string(want), got))
	}
}
