// Package testenv starts the real components gpuwatch's tests run against
// (Slurm, Podman's API service) and finds the tools they need. It is
// imported by tests only.
//
// Under CI=true a missing dependency fails the test: CI must never pass by
// skipping. Elsewhere the test skips and says what to install.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RequireTool returns the path of an external program, or skips (fails
// under CI=true) naming the Debian package that provides it.
func RequireTool(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	Missing(t, name+" not found; install the Debian package "+debianPackage+" (scripts/install-deps.sh does)")
	return ""
}

// Missing skips the test with why, or fails it under CI=true.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and a test dependency is missing: %s", why)
	}
	t.Skip(why)
}

// RepoRoot is the repository's top directory, wherever the test runs from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CopyDir copies the regular files of one directory (a fixture /proc/PID,
// say) into dst, creating it.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
