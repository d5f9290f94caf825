// Package wine runs gpuwatch's Windows code under Wine: the Windows build
// of the nvidia-smi backend's tests (internal/backend/smibackend), with the fake
// nvidia-smi built for Windows, so that the backend's Windows paths (CRLF
// output, nvidia-smi.exe's install locations, killing a hung run without
// process groups) run in CI. Wine 8.0 lacks bcryptprimitives.dll, which
// Go's Windows runtime needs: a stand-in is built with mingw
// (testdata/processprng.c). What Wine cannot show (the Windows service
// manager, a real driver's nvidia-smi.exe) is not claimed here.
package wine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

func TestNvidiaSMIBackendUnderWine(t *testing.T) {
	wine := wineLoader(t)
	mingw := testenv.RequireTool(t, "x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")
	root, err := filepath.Abs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	linux := os.Environ()
	windows := append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	run(t, ctx, linux, root, mingw, "-shared", "-O2", "-o", filepath.Join(dir, "bcryptprimitives.dll"), "test/wine/testdata/processprng.c", "-ladvapi32")
	run(t, ctx, windows, root, "go", "test", "-c", "-o", filepath.Join(dir, "smi.test.exe"), "./internal/backend/smibackend")
	run(t, ctx, windows, root, "go", "build", "-o", filepath.Join(dir, "nvidia-smi.exe"), "./internal/fakedriver/fakesmi")

	prefix := filepath.Join(dir, "prefix")
	wineEnv := append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all")
	t.Cleanup(func() {
		// The prefix's wineserver outlives the programs; end it.
		kill := exec.Command(filepath.Join(filepath.Dir(wine), "wineserver"), "-k")
		kill.Env = wineEnv
		_ = kill.Run()
	})
	run(t, ctx, wineEnv, dir, wine, "wineboot", "-i")
	dll, err := os.ReadFile(filepath.Join(dir, "bcryptprimitives.dll"))
	if err != nil {
		t.Fatal(err)
	}
	// Go loads system DLLs from system32 only.
	if err := os.WriteFile(filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll"), dll, 0o644); err != nil {
		t.Fatal(err)
	}

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
