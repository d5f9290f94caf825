package exporter

import (
	"fmt"
	"strings"
)

// Compat selects which naming schemes a scrape carries. gpuwatch's own names
// (native) follow Prometheus conventions; dcgm mirrors dcgm-exporter's
// DCGM_FI_* names, units and labels so that dashboards, alerts and
// autoscaler rules written for it keep working unchanged.
type Compat struct {
	Native bool
	DCGM   bool
}

// CompatNames are the schemes ParseCompat knows, for help texts.
const CompatNames = "native, dcgm"

// compatDCGM is the Metric.Compat value of the dcgm-exporter names.
const compatDCGM = "dcgm"

// NativeOnly is the default: gpuwatch's names alone.
var NativeOnly = Compat{Native: true}

// ParseCompat reads a comma-separated list such as "dcgm" or "dcgm,native".
func ParseCompat(s string) (Compat, error) {
	var c Compat
	for part := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(part) {
		case "native":
			c.Native = true
		case compatDCGM:
			c.DCGM = true
		case "":
		default:
			return Compat{}, fmt.Errorf("unknown naming scheme %q (known: %s)", strings.TrimSpace(part), CompatNames)
		}
	}
	if !c.Native && !c.DCGM {
		return Compat{}, fmt.Errorf("no naming scheme given (known: %s)", CompatNames)
	}
	return c, nil
}

// String is the flag form of c.
func (c Compat) String() string {
	var parts []string
	if c.DCGM {
		parts = append(parts, compatDCGM)
	}
	if c.Native {
		parts = append(parts, "native")
	}
	return strings.Join(parts, ",")
}

// selects reports whether a catalog metric belongs to a selected scheme. The
// always-on series (gpu_up and the exporter's own gpuwatch_*) are kept under
// every scheme: health alerts and /readyz-style checks rely on them, and
// dcgm-exporter has no equivalent to replace them with.
func (c Compat) selects(m *metricDef) bool {
	switch {
	case m.Compat == compatDCGM:
		return c.DCGM
	case m.Collector == CollectorExporter:
		return true
	default:
		return c.Native
	}
}
