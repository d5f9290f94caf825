//go:build cgo

package sim

import (
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// initErrors are the failures Config.InitError can make nvmlInit answer:
// the ones a driver in trouble gives on a GPU node.
var initErrors = map[string]nvml.Return{
	// The user-space library and the loaded kernel module differ in
	// version: the driver was upgraded and the module not reloaded.
	"lib_rm_version_mismatch": nvml.ERROR_LIB_RM_VERSION_MISMATCH,
	// The kernel module is not loaded.
	"driver_not_loaded": nvml.ERROR_DRIVER_NOT_LOADED,
	// The caller may not open the device nodes.
	"no_permission": nvml.ERROR_NO_PERMISSION,
	"unknown_error": nvml.ERROR_UNKNOWN,
}

// InitErrorNames lists the values of the init_error key.
func InitErrorNames() []string {
	names := make([]string, 0, len(initErrors))
	for n := range initErrors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// sourceName names the config in errors that concern it as a whole.
func (c *Config) sourceName() string {
	if c.source == "" {
		return "sim config"
	}
	return c.source
}
