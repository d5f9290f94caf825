package exporter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestDCGMDashboardPanelsMatchRelease holds DCGMDashboardPanels to the
// released dashboard: the same panels, in order, each plotting its metric.
func TestDCGMDashboardPanelsMatchRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(upstreamDir, "dcgm-exporter-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	metricName := regexp.MustCompile(`DCGM_FI_[A-Z0-9_]+`)
	var released []DCGMDashboardPanel
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names := slices.Compact(metricName.FindAllString(tg.Expr, -1))
			if len(names) != 1 {
				t.Fatalf("panel %q: query %q plots %v, want one DCGM metric", p.Title, tg.Expr, names)
			}
			released = append(released, DCGMDashboardPanel{p.Title, names[0]})
		}
	}
	if !slices.Equal(released, DCGMDashboardPanels) {
		t.Errorf("the released dashboard's panels are %v, DCGMDashboardPanels %v", released, DCGMDashboardPanels)
	}
}

// TestDCGMDashboardCoverage: the panels a host leaves empty, per GPU, with
// why: no utilization on a MIG GPU, no tensor activity without GPM.
func TestDCGMDashboardCoverage(t *testing.T) {
	s := fullSnapshot(3, 0)
	s.Devices[1].Utilization.GPU = snapshot.Opt[float64]{} // MIG mode
	s.Devices[2].GPM = snapshot.GPM{}                      // an A100
	cov := DCGMDashboardCoverage(s)
	if len(cov) != len(DCGMDashboardPanels) {
		t.Fatalf("%d panels, want %d", len(cov), len(DCGMDashboardPanels))
	}
	for _, c := range cov {
		var wantMissing []int
		switch c.Title {
		case "GPU Utilization":
			wantMissing = []int{1}
			if !strings.Contains(c.Why, "MIG") {
				t.Errorf("%s: why %q does not name MIG", c.Title, c.Why)
			}
		case "Tensor Core Utilization":
			wantMissing = []int{2}
			if !strings.Contains(c.Why, "GPM") {
				t.Errorf("%s: why %q does not name GPM", c.Title, c.Why)
			}
		}
		if !slices.Equal(c.Missing, wantMissing) {
			t.Errorf("%s: missing on GPUs %v, want %v (served %v)", c.Title, c.Missing, wantMissing, c.Served)
		}
		if len(c.Served)+len(c.Missing) != 3 {
			t.Errorf("%s: served %v + missing %v is not the 3 GPUs", c.Title, c.Served, c.Missing)
		}
		if len(c.Missing) == 0 && c.Why != "" {
			t.Errorf("%s: a reason %q without a missing GPU", c.Title, c.Why)
		}
	}
}

// upstreamUnits maps the unit a dcgm-exporter help text names to the
// catalog's unit.
var upstreamUnits = []struct{ hint, unit string }{
	{"(in MHz)", "megahertz"}, {"(in C)", "celsius"}, {"(in W)", "watts"}, {"(in mJ)", "millijoules"},
	{"(in %)", "percent"}, {"(in MiB)", "mebibytes"}, {"in bytes per second", "bytes_per_second"},
	{"Ratio of", "ratio"}, {"ratio of", "ratio"},
}

// unitsWithoutHint are the units of the default counters whose help text
// names none: DCGM's NVLink bandwidth is in MiB/s (docs/dcgm-compat.md,
// "NVLink bandwidth unit"); the others are counts and states.
var unitsWithoutHint = map[string]string{"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "mebibytes_per_second"}

// TestDCGMDefaultCountersMatchRelease checks every field of dcgm-exporter's
// default-counters.csv (release 4.5.3-4.8.2), name by name: served under
// the same name and type, in the unit its help text names, or, for a
// label field, a label of every series.
func TestDCGMDefaultCountersMatchRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(upstreamDir, "default-counters.csv"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, ",", 3)
		if len(fields) != 3 {
			t.Fatalf("default-counters.csv line %d: %q is not FIELD, TYPE, HELP", i+1, line)
		}
		name, typ, help := strings.TrimSpace(fields[0]), strings.TrimSpace(fields[1]), strings.TrimSpace(fields[2])
		n++
		if typ == "label" {
			if !slices.Contains(dcgmLabels, name) {
				t.Errorf("%s: a label field of dcgm-exporter, not a label of gpuwatch's DCGM series", name)
			}
			continue
		}
		m := lookupMetric(name)
		if m == nil || m.Compat != compatDCGM {
			t.Errorf("%s: a default counter of dcgm-exporter that --compat=dcgm does not serve", name)
			continue
		}
		if m.Type != typ {
			t.Errorf("%s: type %s, dcgm-exporter's is %s", name, m.Type, typ)
		}
		want := unitsWithoutHint[name]
		for _, u := range upstreamUnits {
			if strings.Contains(help, u.hint) {
				want = u.unit
				break
			}
		}
		if m.Unit != want {
			t.Errorf("%s: unit %q, dcgm-exporter's help %q says %q", name, m.Unit, help, want)
		}
	}
	if n < 20 {
		t.Fatalf("only %d fields read from default-counters.csv", n)
	}
}
