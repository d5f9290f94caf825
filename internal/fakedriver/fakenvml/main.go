package main

//go:generate go run ./genexports/cmd/genexports -o stubs_gen.go

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/sim"
)

func main() {} // a c-shared library has no main; the build needs one

// variant is what this build of the library is, set at link time
// (-X main.variant=R535): a driver branch (nvmlbranch), "basic" (twenty
// functions), or "all" (every function of every branch, the default).
// The linker's version script decides what is exported; the variant tells
// the simulator which branch to answer as (field IDs, versions).
var variant = "all"

// The simulator behind the library, made on the first nvmlInit from the
// environment and kept for the life of the process (NVML's own state is
// per process too).
var (
	simOnce sync.Once
	simErr  error
	host    atomic.Pointer[sim.Sim]
)

func simulator() (*sim.Sim, error) {
	simOnce.Do(func() {
		s, err := newSimulator()
		if err != nil {
			simErr = err
			fmt.Fprintf(os.Stderr, "fake libnvidia-ml.so.1 (%s): %v\n", variantName(), err)
			return
		}
		host.Store(s)
	})
	return host.Load(), simErr
}

func variantName() string { return variant }

// branch is the driver branch the simulator answers as, "" for none.
func branch() string {
	if b, ok := nvmlbranch.Lookup(variant); ok && variant == b.Name {
		return b.Name
	}
	return ""
}

func newSimulator() (*sim.Sim, error) {
	var cfg sim.Config
	if path := os.Getenv("GPUWATCH_SIM_CONFIG"); path != "" {
		c, err := sim.LoadConfig(path)
		if err != nil {
			return nil, fmt.Errorf("GPUWATCH_SIM_CONFIG: %w", err)
		}
		cfg = c
	}
	if p := os.Getenv("GPUWATCH_SIM_PROFILE"); p != "" {
		cfg.Profile = p
	}
	if cfg.Profile == "" {
		cfg.Profile = "h100"
	}
	if b := branch(); b != "" {
		if cfg.Driver != "" && cfg.Driver != b {
			return nil, fmt.Errorf("GPUWATCH_SIM_CONFIG says driver %s, but this library is the %s variant", cfg.Driver, b)
		}
		cfg.Driver = b
	}
	return sim.New(cfg)
}

// lib is the simulator as the bridges call it. Before a successful
// nvmlInit it is nil and every call answers NVML_ERROR_UNINITIALIZED.
func lib() nvml.Interface {
	if s := host.Load(); s != nil {
		return s
	}
	return nil
}

// unmodelled is what a generated stub answers.
func unmodelled() C.int {
	s := host.Load()
	if s == nil {
		return C.int(nvml.ERROR_UNINITIALIZED)
	}
	if _, r := s.DeviceGetCount(); r == nvml.ERROR_UNINITIALIZED {
		return C.int(nvml.ERROR_UNINITIALIZED)
	}
	return C.int(nvml.ERROR_NOT_SUPPORTED)
}
