package healthlog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Describe sums up what a snapshot found, for the start log: how many
// GPUs, which models, which are down, which are in MIG mode, the driver.
func Describe(s *snapshot.Snapshot) []any {
	models := map[string]int{}
	var order, mig, down []string
	for _, d := range s.Devices {
		if !d.Up {
			down = append(down, fmt.Sprintf("%d (%s)", d.Index, d.DownReason))
			continue
		}
		name := d.Info.Name
		if name == "" {
			name = "unknown model"
		}
		if models[name] == 0 {
			order = append(order, name)
		}
		models[name]++
		if d.Info.MIGMode == "enabled" {
			mig = append(mig, fmt.Sprint(d.Index))
		}
	}
	var parts []string
	for _, name := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", models[name], name))
	}
	slices.Sort(parts)
	attrs := []any{"gpus", len(s.Devices), "models", strings.Join(parts, ", ")}
	if s.DriverVersion != "" {
		attrs = append(attrs, "driver", s.DriverVersion)
	}
	if s.Driver.Branch != "" {
		attrs = append(attrs, "branch", s.Driver.Branch)
	}
	if len(s.Driver.Limits) > 0 {
		var limited []string
		for _, l := range s.Driver.Limits {
			limited = append(limited, l.Group)
		}
		attrs = append(attrs, "driver_limits", strings.Join(limited, ","))
	}
	if s.CUDADriverVersion != "" {
		attrs = append(attrs, "cuda", s.CUDADriverVersion)
	}
	attrs = append(attrs, "mig_gpu_indexes", listOrNone(mig))
	if len(down) > 0 {
		attrs = append(attrs, "down", strings.Join(down, ", "))
	}
	return attrs
}

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ",")
}
