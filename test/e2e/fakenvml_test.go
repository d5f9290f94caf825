//go:build cgo

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/fakenvml/variants"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// The fake libnvidia-ml.so.1 (internal/fakedriver/fakenvml): the unmodified NVML
// backend (--backend=nvml: nvml.New, dlopen, cgo) against the simulator
// built as a C library, one variant per driver branch.

var errSkipShort = errors.New("short")

var fakeNVML struct {
	once sync.Once
	dir  string
	err  error
}

// fakeNVMLDir is the directory with one subdirectory per variant:
// GPUWATCH_FAKENVML (scripts/test.sh builds them with make fakenvml), or
// else the repository's build/fakenvml, built here on first use.
func fakeNVMLDir(t *testing.T) string {
	t.Helper()
	fakeNVML.once.Do(func() {
		if dir := os.Getenv("GPUWATCH_FAKENVML"); dir != "" {
			fakeNVML.dir = dir
			return
		}
		if testing.Short() {
			fakeNVML.err = errSkipShort
			return
		}
		_, thisFile, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(thisFile), "..", "..")
		vs, err := variants.Select("")
		if err != nil {
			fakeNVML.err = err
			return
		}
		fakeNVML.dir = filepath.Join(root, "build", "fakenvml")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		fakeNVML.err = variants.Build(ctx, root, fakeNVML.dir, vs, nil)
	})
	if fakeNVML.err == errSkipShort {
		t.Skip("-short: the fake NVML libraries are not built (scripts/test.sh builds them for the full run)")
	}
	if fakeNVML.err != nil {
		t.Fatalf("building the fake NVML libraries: %v", fakeNVML.err)
	}
	return fakeNVML.dir
}

// fakeEnv is the environment that makes gpuwatch load variant's library
// and simulate what config describes.
func fakeEnv(t *testing.T, variant, config string) []string {
	t.Helper()
	dir := filepath.Join(fakeNVMLDir(t), variant)
	if _, err := os.Stat(filepath.Join(dir, variants.LibraryName)); err != nil {
		t.Fatalf("fake NVML variant %s: %v (run make fakenvml)", variant, err)
	}
	path := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "LD_LIBRARY_PATH="+dir, "GPUWATCH_SIM_CONFIG="+path, "GPUWATCH_SIM_PROFILE=")
}

// isolated keeps this host's processes, containers, Slurm and job journal
// out of the page: serve on the fake library would otherwise keep records
// in the host's default --accounting.dir whenever that directory exists,
// and the parallel cases would race for its lock.
func isolated(t *testing.T) []string {
	return []string{"--path.procfs=" + t.TempDir(), "--slurm.jobs=false",
		"--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=",
		"--no-accounting.records"}
}

// startWithEnv starts gpuwatch with env and waits until it answers
// /healthz or exits; ok is false when it exited.
func startWithEnv(t *testing.T, env []string, args ...string) (base string, p *testenv.Process, ok bool) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p = testenv.StartProcess(t, env, gpuwatchBin, append([]string{"--web.listen-address=" + addr}, args...)...)
	base = "http://" + addr
	testenv.WaitFor(t, 20*time.Second, "gpuwatch to answer /healthz or exit", func() bool {
		if p.Exited() {
			return true
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return base, p, !p.Exited()
}

// runWithEnv runs a gpuwatch command to completion.
func runWithEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuwatchBin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running gpuwatch %v: %v", args, err)
	}
	return string(out), 0
}

const h100Config = "profile: h100\npin_time: 1h\n"

// limitedGroups: the metric groups each variant's library cannot fully
// serve on an h100, from what its nvml.h lacks (docs/driver-branches.md):
// R470's header (CUDA 11.1) has no nvmlDeviceGetMemoryInfo_v2 (reserved
// memory), no MPS process list and no GPM; no branch before R570 knows the
// PCIe byte-counter field IDs 197/198; the basic library has twenty
// functions, so every group misses something.
var limitedGroups = map[string][]string{
	"R470":  {"memory", "pcie", "gpm", "processes"},
	"R525":  {"pcie"},
	"R535":  {"pcie"},
	"R550":  {"pcie"},
	"R580":  nil,
	"basic": {"info", "utilization", "memory", "temperature", "fan", "clocks", "clock_events", "power", "pcie", "ecc", "nvlink", "xid", "gpm", "mig", "processes"},
}

var (
	libraryLabel    = regexp.MustCompile(`library="[^"]*"`)
	undefinedSymbol = regexp.MustCompile(`symbol lookup error|undefined symbol`)
	limitsLogLine   = regexp.MustCompile(`msg="driver limits metric groups;[^"]*" groups=([a-z_,]+) `)
)

// checkLog asserts that the start log says what the driver limits, and
// that nothing died of a missing symbol. quiet: the command logs warnings
// only (ps), so a driver that limits nothing says nothing.
func checkLog(t *testing.T, variant, log string, quiet bool) {
	t.Helper()
	if undefinedSymbol.MatchString(log) {
		t.Fatalf("gpuwatch called a function the %s library lacks:\n%s", variant, log)
	}
	want := limitedGroups[variant]
	if len(want) == 0 {
		if quiet {
			if strings.Contains(log, "driver limits") {
				t.Errorf("the log says the %s driver limits something:\n%s", variant, log)
			}
			return
		}
		if !strings.Contains(log, `msg="driver serves every enabled metric group"`) {
			t.Errorf("the log does not say that the %s driver serves every group:\n%s", variant, log)
		}
		return
	}
	m := limitsLogLine.FindStringSubmatch(log)
	if m == nil || m[1] != strings.Join(want, ",") {
		t.Errorf("the log should say the %s driver limits groups=%s:\n%s", variant, strings.Join(want, ","), log)
	}
}

// checkPage asserts what a page through variant's library holds: exactly
// the expected limited groups, and the series that follow from the
// branch's functions present or absent.
func checkPage(t *testing.T, variant string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var limited []string
	if mf, ok := fams["gpuwatch_driver_limited_group"]; ok {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					limited = append(limited, l.GetValue())
				}
			}
		}
	}
	want := limitedGroups[variant]
	slices.Sort(limited)
	sortedWant := slices.Sorted(slices.Values(want))
	if !slices.Equal(limited, sortedWant) {
		t.Errorf("gpuwatch_driver_limited_group groups %v, want %v", limited, sortedWant)
	}
	has := func(name string) bool { _, ok := testenv.Sample(fams, name, map[string]string{"gpu": "0"}); return ok }
	b, isBranch := nvmlbranch.Lookup(variant)
	expect := map[string]bool{
		// every variant has the twenty basic functions
		"gpu_temperature_celsius": true, "gpu_power_usage_watts": true, "gpu_memory_used_bytes": true,
		"gpu_memory_reserved_bytes":     isBranch && b.HasFunction("nvmlDeviceGetMemoryInfo_v2"),
		"gpu_pcie_transmit_bytes_total": isBranch && b.KnowsField(197),
		"gpu_clock_event_active":        isBranch, // event reasons, or throttle reasons before R535
		"gpu_energy_joules_total":       isBranch,
		"gpu_processes":                 isBranch,
	}
	for name, want := range expect {
		if has(name) != want {
			t.Errorf("%s present=%v on %s, want %v", name, has(name), variant, want)
		}
	}
	driver := "550.90.07" // the simulator's own version: basic's library does not say
	if isBranch {
		driver = b.DriverVersion
	}
	if _, ok := testenv.Sample(fams, "gpuwatch_driver_info", map[string]string{"version": driver, "branch": "R" + strings.Split(driver, ".")[0]}); !ok {
		t.Errorf("gpuwatch_driver_info does not say version %s", driver)
	}
}

// TestDriverBranchMatrix runs gpuwatch serve, textfile and ps through each
// default variant of the fake library (driver branches from R470 to R580
// and the twenty-function basic library; see variants.Default): gpuwatch
// starts, serves a page promtool accepts, stays up, calls no function the
// library lacks (that would end it: "symbol lookup error"), exits 0 from
// textfile and ps, and says in its log and in gpuwatch_driver_limited_group
// exactly which groups the driver limits.
func TestDriverBranchMatrix(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	vs, err := variants.Select("")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			// No time bounds, and each variant's processes and files
			// are its own.
			t.Parallel()
			env := fakeEnv(t, v.Name, h100Config)

			t.Run("serve", func(t *testing.T) {
				base, p, up := startWithEnv(t, env, append([]string{"--backend=nvml"}, isolated(t)...)...)
				if !up {
					t.Fatalf("gpuwatch exited on the %s library:\n%s", v.Name, p.Output.String())
				}
				var page string
				for range 2 { // a second scrape runs the collectors again (GPM, events)
					page = httpGet(t, base+"/metrics")
				}
				if p.Exited() {
					t.Fatalf("gpuwatch died after serving:\n%s", p.Output.String())
				}
				cmd := exec.Command(promtool, "check", "metrics")
				cmd.Stdin = strings.NewReader(page)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("promtool check metrics: %v\n%s", err, out)
				}
				checkPage(t, v.Name, testenv.ParseMetrics(t, page))
				checkLog(t, v.Name, p.Output.String(), false)
			})

			t.Run("textfile", func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "gpu.prom")
				output, code := runWithEnv(t, env, append([]string{"textfile", "--backend=nvml", "--output=" + out}, isolated(t)...)...)
				if code != 0 {
					t.Fatalf("textfile exited %d:\n%s", code, output)
				}
				data, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				checkPage(t, v.Name, testenv.ParseMetrics(t, string(data)))
				checkLog(t, v.Name, output, false)
			})

			t.Run("ps", func(t *testing.T) {
				output, code := runWithEnv(t, env, "ps", "--backend=nvml", "--slurm.jobs=false", "--docker.socket=", "--cri.socket=", "--kubelet.pod-resources-socket=")
				if code != 0 {
					t.Fatalf("ps exited %d:\n%s", code, output)
				}
				checkLog(t, v.Name, output, true)
				// The h100 profile's one process (pid 48213, 62464 MiB), where
				// the library has process lists (basic has none).
				listed := strings.Contains(output, "48213") && strings.Contains(output, "61.0GiB")
				if want := v.Name != "basic"; listed != want {
					t.Errorf("ps lists the simulated process: %v, want %v:\n%s", listed, want, output)
				}
			})
		})
	}
}

// Through the newest branch's library, the NVML backend over the C library
// must serve exactly what it serves over the Go simulator set to that
// branch (driver: R580): the bridges lose nothing and invent nothing.
func TestFakeNVMLMatchesSimulator(t *testing.T) {
	newest := nvmlbranch.Newest().Name
	for _, profile := range []string{"h100", "dgx-h100", "dgx-a100-mig", "rtx4090", "v100"} {
		t.Run(profile, func(t *testing.T) {
			// Pinned clocks: the pages do not depend on the machine's
			// load, and each case mostly waits for its GPM windows.
			t.Parallel()
			// One seed for both sides: the command line would otherwise
			// derive the simulated UUIDs from the host name.
			config := "profile: " + profile + "\npin_time: 1h\ndriver: " + newest + "\nseed: matrix\n"
			env := fakeEnv(t, newest, config)
			base, p, up := startWithEnv(t, env, append([]string{"--backend=nvml"}, isolated(t)...)...)
			if !up {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
			simConfig := filepath.Join(t.TempDir(), "sim.yaml")
			if err := os.WriteFile(simConfig, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			simBase, _ := startGpuwatch(t, append([]string{"--backend=sim", "--sim.config=" + simConfig}, isolated(t)...)...)
			settle(t, base, simBase)
			viaC := stableExposition(httpGet(t, base+"/metrics"))
			viaGo := stableExposition(httpGet(t, simBase+"/metrics"))
			// The one thing that may differ: which library was loaded.
			viaC, viaGo = libraryLabel.ReplaceAllString(viaC, `library="?"`), libraryLabel.ReplaceAllString(viaGo, `library="?"`)
			if viaC != viaGo {
				t.Errorf("/metrics through the fake library differs from the simulator:\n%s", firstDifference(viaGo, viaC))
			}
		})
	}
}

// TestGoldenFakeNVML: the h100 page through each branch's library, at a
// pinned time, against testdata/golden/fakenvml/h100-BRANCH.prom
// (make golden rewrites them).
func TestGoldenFakeNVML(t *testing.T) {
	for _, name := range variants.Default {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a pinned clock; each case mostly waits for its GPM window
			env := fakeEnv(t, name, h100Config)
			base, p, up := startWithEnv(t, env, append([]string{"--backend=nvml"}, isolated(t)...)...)
			if !up {
				t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
			}
			settle(t, base)
			// The library's path depends on where the build put it.
			got := strings.ReplaceAll(stableExposition(httpGet(t, base+"/metrics")), fakeNVMLDir(t)+"/", "$GPUWATCH_FAKENVML/")
			path := filepath.Join("testdata", "golden", "fakenvml", "h100-"+name+".prom")
			compareGolden(t, path, got, "/metrics through the "+name+" library")
		})
	}
}
