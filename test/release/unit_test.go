package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// systemd-analyze verify accepts every unit in deploy/systemd (the ones the
// packages install) with the release binary at its ExecStart path: no
// error and no warning (an unknown key or a bad value is only a warning,
// so any output fails the test).
func TestSystemdUnitsVerify(t *testing.T) {
	r := findRelease(t)
	analyze := testenv.RequireTool(t, "systemd-analyze", "systemd")
	hostUnits := "/usr/lib/systemd/system"
	targets, _ := filepath.Glob(filepath.Join(hostUnits, "*.target"))
	if len(targets) == 0 {
		testenv.Missing(t, "no systemd targets in "+hostUnits+"; install the Debian package systemd")
	}
	units, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "deploy", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in deploy/systemd: %v", err)
	}

	// A root with the release binary, the units and the targets they are
	// ordered against, so verify checks them as installed, not this host.
	root := t.TempDir()
	unitDir := filepath.Join(root, "usr", "lib", "systemd", "system")
	for _, dir := range []string{unitDir, filepath.Join(root, "usr", "bin")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, r.binary("amd64"), filepath.Join(root, "usr", "bin", "gpuwatch"), 0o755)
	for _, target := range targets {
		copyFile(t, target, filepath.Join(unitDir, filepath.Base(target)), 0o644)
	}
	for _, unit := range units {
		copyFile(t, unit, filepath.Join(unitDir, filepath.Base(unit)), 0o644)
	}
	for _, unit := range units {
		t.Run(filepath.Base(unit), func(t *testing.T) {
			out, err := exec.Command(analyze, "verify", "--root="+root, filepath.Join(unitDir, filepath.Base(unit))).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "" {
				t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(unit), err, out)
			}
		})
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		t.Fatal(err)
	}
}
