//go:build cgo

package nvmlbackend

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// inspectDriver runs once after Init: it looks up what the library
// exports, refuses a library without the functions gpuwatch cannot do
// without, reads the driver version, and logs the groups the driver
// limits, and why.
func (r *Reader) inspectDriver(library string) error {
	r.caps = lookupCapabilities(r.lib)
	if missing := r.caps.missingRequired(); len(missing) > 0 {
		if r.caps.can(callShutdown) {
			r.lib.Shutdown()
		}
		return missingFunctionsError(missing)
	}
	if r.caps.can(callSystemGetDriverVersion) {
		if v, ret := r.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
			r.driver.Version = v
		}
	}
	major := driverMajor(r.driver.Version)
	if r.caps.branch == nil && !r.caps.unasked {
		r.caps.branch = tableBranch(major)
	}
	r.driver.Branch = driverBranch(major)
	r.driver.Library = library
	if r.driver.Library == "" {
		r.driver.Library = loadedLibraryPath()
	}
	r.driver.Limits = r.caps.limits(r.groups)

	if len(r.driver.Limits) == 0 {
		r.log.Info("driver serves every enabled metric group",
			"driver", r.driver.Version, "library", r.driver.Library)
		return nil
	}
	groups := make([]string, len(r.driver.Limits))
	for i, l := range r.driver.Limits {
		groups[i] = l.Group
		r.log.Warn("driver limits a metric group",
			"group", l.Group, "reason", l.Reason, "missing", strings.Join(l.Missing, ", "),
			"driver", r.driver.Version)
	}
	r.log.Warn("driver limits metric groups; see gpuwatch_driver_limited_group and the driver-support table in docs/metrics-guide.md",
		"groups", strings.Join(groups, ","), "driver", r.driver.Version, "branch", r.driver.Branch, "library", r.driver.Library)
	return nil
}

// initError reports a failed Init. The driver's text for the code comes
// from nvmlErrorString, which go-nvml calls without asking; a library
// that lacks it gets the code's name instead.
func initError(lib nvml.Interface, ret nvml.Return) error {
	if ext := extensionsOf(lib); ext != nil && ext.LookupSymbol("nvmlErrorString") != nil {
		// Wrapped, so that gpuwatch doctor can tell the failures apart.
		return fmt.Errorf("nvml init: %w", nvmlErr(ret))
	}
	return fmt.Errorf("nvml init: %w", ret)
}
