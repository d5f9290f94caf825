//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// buildMinimalDriver compiles testdata/minimal-nvml into a
// libnvidia-ml.so.1 that exports only thirteen NVML functions (eleven
// with -DBARE), and returns its directory, for LD_LIBRARY_PATH.
func buildMinimalDriver(t *testing.T, defines ...string) string {
	t.Helper()
	gcc := testenv.RequireTool(t, "gcc", "gcc")
	dir := t.TempDir()
	lib := filepath.Join(dir, "libnvidia-ml.so.1")
	args := append(defines, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", lib,
		filepath.Join("testdata", "minimal-nvml", "minimal_nvml.c"))
	out, err := exec.Command(gcc, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return dir
}

func withLibraryPath(dir string) []string {
	return append(os.Environ(), "LD_LIBRARY_PATH="+dir)
}

// The unmodified go-nvml path (dlopen, cgo) against a driver library that
// has only the basic functions: gpuwatch serves those readings, calls
// nothing else (that would end it with "symbol lookup error"), says at
// start what the driver limits, and exits 0, in every command.
func TestMinimalDriverLibrary(t *testing.T) {
	dir := buildMinimalDriver(t)

	t.Run("textfile", func(t *testing.T) {
		outFile := filepath.Join(t.TempDir(), "gpu.prom")
		cmd := exec.Command(gpuwatchBin, "textfile", "--output="+outFile)
		cmd.Env = withLibraryPath(dir)
		log, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gpuwatch textfile: %v\n%s", err, log)
		}
		text, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		checkMinimalDriverMetrics(t, string(text), filepath.Join(dir, "libnvidia-ml.so.1"))
		for _, want := range []string{
			`msg="driver limits a metric group" group=gpm reason="unavailable: no GPM, GPM per MIG instance" missing="nvmlGpmQueryDeviceSupport`,
			`group=memory reason="partial: no reserved memory, BAR1 memory" missing="nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetBAR1MemoryInfo"`,
			`groups=info,utilization,memory,temperature,fan,clocks,clock_events,power,pcie,ecc,nvlink,xid,gpm,mig,processes driver=470.256.02 branch=R470`,
		} {
			if !strings.Contains(string(log), want) {
				t.Errorf("start log lacks %s\n%s", want, log)
			}
		}
		if strings.Contains(string(log), "symbol lookup error") {
			t.Errorf("called a missing function:\n%s", log)
		}
	})

	t.Run("serve", func(t *testing.T) {
		port := testenv.FreePort(t)
		addr := "127.0.0.1:" + itoa(port)
		p := testenv.StartProcess(t, withLibraryPath(dir), gpuwatchBin, "--web.listen-address="+addr)
		testenv.WaitHealthy(t, p, "http://"+addr)
		for range 3 { // several scrapes: the process stays up
			checkMinimalDriverMetrics(t, httpGet(t, "http://"+addr+"/metrics"), filepath.Join(dir, "libnvidia-ml.so.1"))
		}
		if p.Exited() {
			t.Fatalf("gpuwatch exited:\n%s", p.Output.String())
		}
	})

	t.Run("ps", func(t *testing.T) {
		cmd := exec.Command(gpuwatchBin, "ps")
		cmd.Env = withLibraryPath(dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gpuwatch ps: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "symbol lookup error") {
			t.Errorf("called a missing function:\n%s", out)
		}
	})

	// Without nvmlShutdown and nvmlErrorString (go-nvml renders every
	// NVML error through the latter without looking it up), and with GPU
	// 1's power read failing: the error is reported, nothing crashes.
	t.Run("no shutdown, no error string", func(t *testing.T) {
		bare := buildMinimalDriver(t, "-DBARE")
		outFile := filepath.Join(t.TempDir(), "gpu.prom")
		cmd := exec.Command(gpuwatchBin, "textfile", "--output="+outFile)
		cmd.Env = withLibraryPath(bare)
		log, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gpuwatch textfile: %v\n%s", err, log)
		}
		text, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		families := testenv.ParseMetrics(t, string(text))
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"gpu_power_usage_watts", map[string]string{"gpu": "0"}, 123.456},
			{"gpu_temperature_celsius", map[string]string{"gpu": "1"}, 42},
			{"gpuwatch_collector_success", map[string]string{"collector": "power"}, 0},
		} {
			if got, ok := testenv.Sample(families, c.name, c.labels); !ok || got != c.want {
				t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
			}
		}
		if _, ok := testenv.Sample(families, "gpu_power_usage_watts", map[string]string{"gpu": "1"}); ok {
			t.Errorf("GPU 1's failed power reading is present")
		}
	})

	t.Run("a library without a function gpuwatch needs is refused in one line", func(t *testing.T) {
		gcc := testenv.RequireTool(t, "gcc", "gcc")
		src, err := os.ReadFile(filepath.Join("testdata", "minimal-nvml", "minimal_nvml.c"))
		if err != nil {
			t.Fatal(err)
		}
		// Rename the UUID function away, as a library that lacks it.
		stripped := strings.Replace(string(src), "nvmlReturn_t nvmlDeviceGetUUID(", "nvmlReturn_t renamedGetUUID(", 1)
		bad := t.TempDir()
		cfile := filepath.Join(bad, "nvml.c")
		if err := os.WriteFile(cfile, []byte(stripped), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", filepath.Join(bad, "libnvidia-ml.so.1"), cfile).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		cmd := exec.Command(gpuwatchBin, "textfile", "--output="+filepath.Join(bad, "gpu.prom"))
		cmd.Env = withLibraryPath(bad)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "gpuwatch: ") || !strings.Contains(last, "nvmlDeviceGetUUID") {
			t.Errorf("last line %q does not name the missing function", last)
		}
	})
}

func checkMinimalDriverMetrics(t *testing.T, text, libPath string) {
	t.Helper()
	families := testenv.ParseMetrics(t, text)
	uuid0 := map[string]string{"gpu": "0", "uuid": "GPU-00000000-1111-2222-3333-000000000000"}
	uuid1 := map[string]string{"gpu": "1", "uuid": "GPU-00000000-1111-2222-3333-000000000001"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpu_up", uuid0, 1},
		{"gpu_up", uuid1, 1},
		{"gpu_temperature_celsius", uuid0, 41},
		{"gpu_temperature_celsius", uuid1, 42},
		{"gpu_power_usage_watts", uuid0, 123.456},
		{"gpu_memory_total_bytes", uuid0, 80 << 30},
		{"gpu_memory_used_bytes", uuid1, 2 << 30},
		{"gpu_info", map[string]string{"gpu": "0", "name": "NVIDIA Minimal Test GPU", "driver_version": "470.256.02"}, 1},
		{"gpuwatch_driver_info", map[string]string{"version": "470.256.02", "branch": "R470", "library": libPath}, 1},
		{"gpuwatch_driver_limited_group", map[string]string{"group": "gpm", "reason": "unavailable: no GPM, GPM per MIG instance"}, 1},
		{"gpuwatch_driver_limited_group", map[string]string{"group": "power"}, 1},
		{"gpuwatch_collector_success", map[string]string{"collector": "power"}, 1},
		{"gpuwatch_collector_success", map[string]string{"collector": "processes"}, 1},
	} {
		if got, ok := testenv.Sample(families, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	for _, absent := range []string{"gpu_memory_reserved_bytes", "gpu_utilization_ratio", "gpu_clock_hertz", "gpu_processes", "gpu_gpm_sm_active_ratio"} {
		if _, ok := families[absent]; ok {
			t.Errorf("%s present, though the library cannot give it", absent)
		}
	}
}
