//go:build !cgo

// A build without cgo (the Windows one) has no NVML backend and no
// simulator: go-nvml's types live in its cgo files, and the NVML reader
// loads libnvidia-ml.so.1 with dlopen. Its backends are nvidia-smi and none.

package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
)

// downAfterTimeouts is 0: no backend of this build reports a GPU whose
// read runs late (not_answering), so a one-shot command has nothing to
// wait for.
const downAfterTimeouts = 0

// nvmlStack is empty: openNVML never succeeds in this build.
type nvmlStack struct{}

// errNoNVMLBuild says why --backend=nvml and --backend=sim cannot run.
var errNoNVMLBuild = errors.New("this gpuwatch is built without cgo, which go-nvml needs to load the driver's library (and the simulator to stand in for it)")

// openNVML refuses --backend=nvml and --backend=sim, naming the flag and
// the backends this build has.
func (f *commonFlags) openNVML(*slog.Logger, *stack) error {
	return fmt.Errorf("--backend=%s is not available on %s/%s: %w; use --backend=nvidia-smi (docs/nvidia-smi.md)",
		f.backend, runtime.GOOS, runtime.GOARCH, errNoNVMLBuild)
}

func (s *stack) simulated() bool { return false }

func (s *stack) simIdentity() []any { return nil }

func (n *nvmlStack) accountingReader(*slog.Logger, *commonFlags, map[string]bool, bool) (closingReader, error) {
	return nil, errNoNVMLBuild
}

func (f *commonFlags) startDemo(*slog.Logger, *stack, *attributionFlags, *slurmFlags) error {
	return errNoNVMLBuild
}

func simProfileList() string { return "none in this build (the simulator needs cgo)" }

// writeDriverSupport writes nothing: the driver-branch table is the NVML
// backend's, which this build lacks.
func writeDriverSupport(io.Writer, string) error { return nil }
