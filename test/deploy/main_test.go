package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var gpuwatchBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// scripts/test.sh passes the binary it just built; a plain `go test`
	// builds one here so the package also runs on its own.
	gpuwatchBin = os.Getenv("GPUWATCH_BIN")
	if gpuwatchBin == "" {
		dir, err := os.MkdirTemp("", "gpuwatch-deploy-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		gpuwatchBin = filepath.Join(dir, "gpuwatch")
		build := exec.Command("go", "build", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", gpuwatchBin, "./cmd/gpuwatch")
		build.Dir = repoRoot
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building gpuwatch:", err)
			return 1
		}
	}
	return m.Run()
}
