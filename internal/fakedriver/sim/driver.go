//go:build cgo

package sim

import (
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
)

// The simulated driver branch (Config.Driver). Without one the simulated
// library has every function and field ID of the go-nvml it is built with
// and reports DriverVersion; with one it answers as that branch's
// libnvidia-ml.so.1 would: Extensions().LookupSymbol finds only the
// branch's functions, field IDs the branch does not know answer a per-field
// ERROR_INVALID_ARGUMENT, and the version calls report a driver of that
// branch. Calling a function the branch lacks ends a real process (go-nvml
// binds lazily: "undefined symbol"); Library returns a handle on which such
// a call panics instead (guard.go).

// Branch returns the simulated driver branch, or nil for "every function".
func (s *Sim) Branch() *nvmlbranch.Branch { return s.branch }

func (s *Sim) driverVersion() string {
	if s.driverVersionText != nil {
		return *s.driverVersionText
	}
	if s.branch != nil {
		return s.branch.DriverVersion
	}
	return DriverVersion
}

func (s *Sim) nvmlVersion() string {
	if s.branch != nil {
		return strconv.Itoa(s.branch.CUDADriverVersion/1000) + "." + s.branch.DriverVersion
	}
	return NVMLVersion
}

func (s *Sim) cudaDriverVersion() int {
	if s.branch != nil {
		return s.branch.CUDADriverVersion
	}
	return CUDADriverVersion
}

// knowsField says whether the simulated driver knows the field ID.
func (s *Sim) knowsField(id uint32) bool { return s.branch == nil || s.branch.KnowsField(id) }

// driverSymbols is the simulated library's symbol table.
type driverSymbols struct{ branch *nvmlbranch.Branch }

// LookupSymbol answers like go-nvml's dlsym lookup: nil when the library
// exports the symbol, an error naming it otherwise.
func (d driverSymbols) LookupSymbol(name string) error {
	if d.branch == nil || d.branch.HasFunction(name) {
		return nil
	}
	return fmt.Errorf("simulated %s libnvidia-ml.so.1 (driver %s): undefined symbol: %s",
		d.branch.Name, d.branch.DriverVersion, name)
}

var _ nvml.ExtendedInterface = driverSymbols{}
