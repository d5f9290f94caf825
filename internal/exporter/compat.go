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
	// DCGMVersion is the dcgm-exporter release whose names the dcgm
	// scheme follows; the zero value is DCGM48.
	DCGMVersion DCGMVersion
}

// DCGMVersion is a generation of dcgm-exporter's metric names. Releases up
// to 4.8 name metrics after DCGM's pre-4.7 fields (DCGM_FI_DEV_GPU_UTIL in
// percent); 4.9 renames its default fields to DCGM 4.7's names, some in
// base units (DCGM_FI_DEV_GPU_UTIL_RATIO); 4.10 renames four profiling
// fields again. docs/dcgm-compat.md has the table and its sources.
type DCGMVersion uint8

// The dcgm-exporter generations --compat.dcgm-version knows.
const (
	DCGM48 DCGMVersion = iota
	DCGM49
	DCGM410
)

// DCGMVersionNames are the flag forms of the DCGMVersion values, in order.
var DCGMVersionNames = []string{"4.8", "4.9", "4.10"}

// ParseDCGMVersion reads a --compat.dcgm-version value.
func ParseDCGMVersion(s string) (DCGMVersion, error) {
	for i, n := range DCGMVersionNames {
		if strings.TrimSpace(s) == n {
			return DCGMVersion(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dcgm-exporter version %q (known: %s)", s, strings.Join(DCGMVersionNames, ", "))
}

// String is the flag form of v.
func (v DCGMVersion) String() string {
	if int(v) < len(DCGMVersionNames) {
		return DCGMVersionNames[v]
	}
	return fmt.Sprintf("DCGMVersion(%d)", uint8(v))
}

// bit is v's bit in metricDef.dcgmVersions.
func (v DCGMVersion) bit() uint8 { return 1 << v }

// CompatNames are the schemes ParseCompat knows, for help texts.
const CompatNames = "native, dcgm"

// compatDCGM is the Metric.Compat value of the dcgm-exporter names up to
// its release 4.8; compatDCGM49 that of the names of 4.9 and later, whose
// every series also carries the renamed driver-version label.
const (
	compatDCGM   = "dcgm"
	compatDCGM49 = "dcgm-4.9"
)

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
// always-on series (gpu_up, the health verdicts gpu_health_* and the
// exporter's own gpuwatch_*) are kept under every scheme: health alerts and
// /readyz-style checks rely on them, and dcgm-exporter has no equivalent to
// replace them with.
func (c Compat) selects(m *metricDef) bool {
	switch {
	case m.Compat == compatDCGM:
		return c.DCGM && c.DCGMVersion == DCGM48
	case m.Compat == compatDCGM49:
		return c.DCGM && m.dcgmVersions&c.DCGMVersion.bit() != 0
	case m.Collector == CollectorExporter:
		return true
	default:
		return c.Native
	}
}
