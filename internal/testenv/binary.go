package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// GpuwatchBinary is the gpuwatch binary an end-to-end suite drives:
// $GPUWATCH_BIN when scripts/test.sh built it, else one built here (with
// lazy binding, as `make build` does) so that the package also runs on its
// own; $GPUWATCH_BIN older than its sources is an error (checkFresh).
// cleanup removes what was built; call it after m.Run.
func GpuwatchBinary(suite string) (bin string, cleanup func(), err error) {
	if bin := os.Getenv("GPUWATCH_BIN"); bin != "" {
		if err := checkFresh(bin); err != nil {
			return "", nil, err
		}
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "gpuwatch-"+suite+"-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "gpuwatch")
	build := exec.Command("go", "build", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", bin, "./cmd/gpuwatch")
	build.Dir = RepoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building gpuwatch: %w", err)
	}
	return bin, cleanup, nil
}

// SyncBuffer collects a child process's output, written from its stdout
// and stderr copiers, for failure messages.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RunWithGpuwatch runs an end-to-end suite's tests with *bin set to the
// gpuwatch binary they drive (GpuwatchBinary), removing a binary built here
// afterwards; it returns m.Run's code (1 when no binary could be had), for
// a TestMain's os.Exit.
func RunWithGpuwatch(m *testing.M, suite string, bin *string) int {
	b, cleanup, err := GpuwatchBinary(suite)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	*bin = b
	return m.Run()
}
