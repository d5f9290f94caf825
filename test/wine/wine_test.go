// Package wine runs gpuwatch's Windows code under Wine: the Windows build
// of the nvidia-smi backend's tests (internal/backend/smibackend), with the fake
// nvidia-smi built for Windows, so that the backend's Windows paths (CRLF
// output, nvidia-smi.exe's install locations, killing a hung run without
// process groups) run in CI. Wine 8.0 lacks bcryptprimitives.dll, which
// Go's Windows runtime needs: a stand-in is built with mingw
// (testdata/processprng.c). What Wine cannot show (a real driver's
// nvidia-smi.exe, service accounts) is not claimed here.
package wine

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// wineLoader is Debian's wine64 loader: the package puts no wine64 on the
// PATH.
func wineLoader(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/lib/wine/wine64", "/usr/bin/wine64"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	testenv.Missing(t, "wine64 not found; install the Debian package wine64 (scripts/install-deps.sh does)")
	return ""
}

func run(t *testing.T, ctx context.Context, env []string, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// windowsPath is a Linux path as Wine's Z: drive shows it.
func windowsPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// wineEnv is a Wine prefix of the test's own, with the ProcessPrng
// stand-in in its system32, ready to run Go programs: the environment to
// run wine64 with, the loader and the test's directory for the programs.
type wineEnv struct {
	wine, dir, root string
	env             []string
	linux, windows  []string
}

func newWine(t *testing.T, ctx context.Context) *wineEnv {
	t.Helper()
	wine := wineLoader(t)
	mingw := testenv.RequireTool(t, "x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &wineEnv{wine: wine, dir: dir, root: root, linux: os.Environ(),
		windows: append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")}
	run(t, ctx, w.linux, root, mingw, "-shared", "-O2", "-o", filepath.Join(dir, "bcryptprimitives.dll"), "test/wine/testdata/processprng.c", "-ladvapi32")
	prefix := filepath.Join(dir, "prefix")
	w.env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all")
	t.Cleanup(func() {
		// The prefix's wineserver outlives the programs; end it.
		kill := exec.Command(filepath.Join(filepath.Dir(wine), "wineserver"), "-k")
		kill.Env = w.env
		_ = kill.Run()
	})
	run(t, ctx, w.env, dir, wine, "wineboot", "-i")
	dll, err := os.ReadFile(filepath.Join(dir, "bcryptprimitives.dll"))
	if err != nil {
		t.Fatal(err)
	}
	// Go loads system DLLs from system32 only.
	if err := os.WriteFile(filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll"), dll, 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// build builds a package of the repository for windows/amd64 into the
// test's directory as name.
func (w *wineEnv) build(t *testing.T, ctx context.Context, name, pkg string) string {
	t.Helper()
	out := filepath.Join(w.dir, name)
	run(t, ctx, w.windows, w.root, "go", "build", "-o", out, pkg)
	return out
}

func TestNvidiaSMIBackendUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := newWine(t, ctx)
	dir, root, wine, wineEnv := w.dir, w.root, w.wine, w.env
	run(t, ctx, w.windows, root, "go", "test", "-c", "-o", filepath.Join(dir, "smi.test.exe"), "./internal/backend/smibackend")
	w.build(t, ctx, "nvidia-smi.exe", "./internal/fakedriver/fakesmi")

	out := run(t, ctx, append(wineEnv, "FAKESMI_BIN="+windowsPath(filepath.Join(dir, "nvidia-smi.exe"))),
		filepath.Join(root, "internal", "backend", "smibackend"), wine, filepath.Join(dir, "smi.test.exe"), "-test.v")
	for _, want := range []string{
		"--- PASS: TestReadDatacenterHost", "--- PASS: TestParseGarbage", "--- PASS: TestFailingNvidiaSMIDownsItsGPUs",
		"--- PASS: TestHungNvidiaSMIIsKilled", "--- PASS: TestNvidiaSMIFoundInItsInstallLocation", "\nPASS",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the Windows build's tests under Wine lack %q:\n%s", strings.TrimSpace(want), out)
		}
	}
}

// wineExit runs a Windows program and returns its output, with Windows'
// CRLF line ends made LF, and its exit code.
func wineExit(t *testing.T, ctx context.Context, w *wineEnv, exe string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, w.wine, append([]string{exe}, args...)...)
	cmd.Env, cmd.Dir = w.env, w.dir
	out, err := cmd.CombinedOutput()
	code := 0
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v\n%s", exe, args, err, out)
	}
	return strings.ReplaceAll(string(out), "\r\n", "\n"), code
}

// TestGpuwatchExeUnderWine builds gpuwatch.exe as the release does
// (windows/amd64 without cgo) and runs it under Wine: --help, a bad flag,
// a backend Windows lacks, and serve with the fake nvidia-smi.exe on its
// PATH, scraped from Linux. The service commands: TestServiceUnderWine.
func TestGpuwatchExeUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := newWine(t, ctx)
	exe := w.build(t, ctx, "gpuwatch.exe", "./cmd/gpuwatch")
	w.build(t, ctx, "nvidia-smi.exe", "./internal/fakedriver/fakesmi")

	out, code := wineExit(t, ctx, w, exe, "--help")
	if code != 0 || !strings.Contains(out, "usage: gpuwatch") || !strings.Contains(out, "--nvidia-smi.command") {
		t.Errorf("gpuwatch.exe --help: exit %d, want 0 and the usage:\n%s", code, out)
	}
	out, code = wineExit(t, ctx, w, exe, "--no-such-flag")
	if code != 2 || !strings.Contains(out, "gpuwatch: unknown long flag '--no-such-flag'") {
		t.Errorf("gpuwatch.exe --no-such-flag: exit %d, want 2 and the flag named:\n%s", code, out)
	}
	out, code = wineExit(t, ctx, w, exe, "ps", "--backend=sim", "--sim.profile=h100")
	if code == 0 || !strings.Contains(out, "--backend=sim is not available on windows/amd64") || !strings.Contains(out, "--backend=nvidia-smi") {
		t.Errorf("gpuwatch.exe ps --backend=sim: exit %d, want an error naming the flag and the backend to use:\n%s", code, out)
	}

	// The owner lookup's own tests, on the test binary's own process.
	run(t, ctx, w.windows, w.root, "go", "test", "-c", "-o", filepath.Join(w.dir, "winowner.test.exe"), "./internal/winowner")
	if out, code := wineExit(t, ctx, w, filepath.Join(w.dir, "winowner.test.exe"), "-test.v"); code != 0 || !strings.Contains(out, "--- PASS: TestLookupOwnProcess") {
		t.Errorf("internal/winowner's tests under Wine: exit %d\n%s", code, out)
	}

	// A Windows process for the fake to list on GPU 0: a hung fake,
	// whose Windows PID its log gives.
	pidLog := filepath.Join(w.dir, "pids.log")
	hung := exec.CommandContext(ctx, w.wine, filepath.Join(w.dir, "nvidia-smi.exe"), "-L")
	hung.Dir, hung.Env = w.dir, append(w.env, "FAKESMI_MODE=hang", "FAKESMI_LOG="+windowsPath(pidLog))
	if err := hung.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Process.Kill(); _ = hung.Wait() })
	var ownedPID string
	testenv.WaitFor(t, time.Minute, "the hung fake to log its Windows PID", func() bool {
		b, _ := os.ReadFile(pidLog)
		pid, _, ok := strings.Cut(string(b), " ")
		ownedPID = pid
		return ok
	})

	fixtures := filepath.Join(w.root, "internal", "backend", "smibackend", "testdata")
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	serve := exec.CommandContext(ctx, w.wine, exe, "--web.listen-address="+addr)
	var log testenv.SyncBuffer
	serve.Dir, serve.Stdout, serve.Stderr = w.dir, &log, &log
	serve.Env = append(w.env,
		// The default backend finds nvidia-smi.exe on the Windows PATH.
		"WINEPATH="+windowsPath(w.dir),
		"FAKESMI_HELP="+windowsPath(filepath.Join(fixtures, "help-query-gpu-r550.txt")),
		"FAKESMI_GPUS="+windowsPath(filepath.Join(fixtures, "gpu-h100.csv")),
		"FAKESMI_APPS="+windowsPath(filepath.Join(fixtures, "apps-h100.csv")),
		// GPU 0's processes: the hung fake, and a PID no process has
		// (Windows PIDs are multiples of 4).
		"FAKESMI_PID0="+ownedPID, "FAKESMI_PID1=4000003",
	)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	var page string
	testenv.WaitFor(t, time.Minute, "gpuwatch.exe to serve both GPUs up and GPU 0's two processes", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		page = string(body)
		return err == nil && strings.Contains(page, `gpu_up{gpu="0"`) && strings.Contains(page, `gpu_up{gpu="1"`) &&
			strings.Count(page, "\ngpu_process_memory_used_bytes{") == 2
	})
	fams := testenv.ParseMetrics(t, page)
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"gpu_up", map[string]string{"gpu": "0"}, 1},
		{"gpu_up", map[string]string{"gpu": "1"}, 1},
		{"gpu_info", map[string]string{"gpu": "0", "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.90.07"}, 1},
		{"gpu_power_limit_default_watts", map[string]string{"gpu": "1"}, 700},
	} {
		if v, ok := testenv.Sample(fams, want.name, want.labels); !ok || v != want.value {
			t.Errorf("%s%v = %v (present %v), want %v\nlog:\n%s", want.name, want.labels, v, ok, want.value, log.String())
		}
	}
	// Owners from the Windows API: the hung fake's is this Linux user as
	// Wine names it (DOMAIN\user); the PID with no process has none.
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	memory := fams["gpu_process_memory_used_bytes"]
	var owners []string
	for _, m := range memory.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "user" {
				owners = append(owners, l.GetValue())
			}
		}
	}
	slices.Sort(owners)
	if len(owners) != 2 || owners[0] != "" || !strings.HasSuffix(owners[1], `\`+me.Username) {
		t.Errorf("gpu_process_memory_used_bytes owners %q, want one absent and one DOMAIN\\%s\nlog:\n%s", owners, me.Username, log.String())
	}
	promtool := testenv.RequireTool(t, "promtool", "prometheus")
	check := exec.CommandContext(ctx, promtool, "check", "metrics")
	check.Stdin = strings.NewReader(page)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	if !strings.Contains(log.String(), "backend=nvidia-smi") {
		t.Errorf("the start log does not name the nvidia-smi backend:\n%s", log.String())
	}
}
