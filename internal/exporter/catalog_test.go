package exporter

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// servedAs names the configurations that serve m: its name, and the
// dcgm-exporter generations of a dcgm metric.
func servedAs(m *metricDef) []string {
	switch m.Compat {
	case compatDCGM:
		return []string{m.Name + " (dcgm-exporter 4.8)"}
	case compatDCGM49:
		var out []string
		for _, v := range m.DCGMVersions {
			out = append(out, m.Name+" (dcgm-exporter "+v+")")
		}
		return out
	}
	return []string{m.Name}
}

// TestCatalogConventions enforces DESIGN.md's naming rules on every entry.
func TestCatalogConventions(t *testing.T) {
	seen := map[string]bool{}
	groups := map[string]bool{CollectorExporter: true}
	for _, g := range snapshot.AllGroups {
		groups[g] = true
	}
	unitSuffix := map[string]string{
		"bytes": "_bytes", "seconds": "_seconds", "joules": "_joules", "celsius": "_celsius",
		"watts": "_watts", "hertz": "_hertz", "ratio": "_ratio", "bytes_per_second": "_bytes_per_second",
		"byte_seconds": "_byte_seconds",
	}
	for _, m := range catalog {
		// A name may come back in another dcgm-exporter generation (with
		// that generation's labels), never twice in one.
		for _, key := range servedAs(m) {
			if seen[key] {
				t.Errorf("%s declared twice", key)
			}
			seen[key] = true
		}
		if m.Compat != "" {
			continue // foreign names keep their own conventions: compat_test.go
		}
		if !strings.HasPrefix(m.Name, "gpu_") && !strings.HasPrefix(m.Name, "gpuwatch_") {
			t.Errorf("%s: prefix must be gpu_ or gpuwatch_", m.Name)
		}
		if strings.HasPrefix(m.Name, "gpuwatch_") != (m.Collector == CollectorExporter && m.Name != "gpu_up" && m.Name != "gpu_reading_age_seconds" && !strings.HasPrefix(m.Name, "gpu_health_")) {
			t.Errorf("%s: gpuwatch_ is for the exporter's own metrics only", m.Name)
		}
		if (m.Type == typeCounter) != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", m.Name)
		}
		base := strings.TrimSuffix(m.Name, "_total")
		if m.Unit != "" && !strings.HasSuffix(base, unitSuffix[m.Unit]) {
			t.Errorf("%s: unit %q but the name does not end in %s", m.Name, m.Unit, unitSuffix[m.Unit])
		}
		for u, suffix := range unitSuffix {
			if m.Unit != u && strings.HasSuffix(base, suffix) && !strings.HasSuffix(unitSuffix[m.Unit], suffix) {
				t.Errorf("%s: name ends in %s but unit is %q", m.Name, suffix, m.Unit)
			}
		}
		if m.Type == typeInfo && !strings.HasSuffix(m.Name, "_info") {
			t.Errorf("%s: info metrics end in _info", m.Name)
		}
		if !groups[m.Collector] {
			t.Errorf("%s: unknown collector %q", m.Name, m.Collector)
		}
		if m.Help == "" || m.Source == "" {
			t.Errorf("%s: help and source are required", m.Name)
		}
		if strings.HasPrefix(m.Name, "gpu_") && (len(m.Labels) < 2 || m.Labels[0] != "gpu" || m.Labels[1] != "uuid") {
			t.Errorf("%s: device series start with the labels gpu, uuid; have %v", m.Name, m.Labels)
		}
	}
	for _, g := range snapshot.AllGroups {
		if _, ok := collectors[g]; !ok {
			t.Errorf("no collector registered for group %s", g)
		}
	}
}

func TestWriteCatalog(t *testing.T) {
	var narrow bytes.Buffer
	if err := WriteCatalog(&narrow, "table"); err != nil {
		t.Fatal(err)
	}
	// The default table fits a 100-column terminal.
	for l := range strings.SplitSeq(strings.TrimSpace(narrow.String()), "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	// One row per metric (continuation lines start with spaces), and the
	// whole help text in it: wrapped, never cut.
	rows := map[string]string{}
	var last string
	narrowLines := strings.Split(strings.TrimSpace(narrow.String()), "\n")
	helpCol := strings.Index(narrowLines[0], "HELP")
	for _, l := range narrowLines[1:] {
		if !strings.HasPrefix(l, " ") {
			last = strings.Fields(l)[0]
		}
		rows[last] += " " + l[helpCol:]
	}
	if len(rows) != len(Catalog()) {
		t.Errorf("default table has %d rows for %d metrics", len(rows), len(Catalog()))
	}
	for _, m := range Catalog() {
		got := strings.Join(strings.Fields(rows[m.Name]), " ")
		if !strings.HasSuffix(got, strings.Join(strings.Fields(m.Help), " ")) {
			t.Errorf("%s: help %q, want the whole of %q", m.Name, got, m.Help)
		}
	}

	var table bytes.Buffer
	if err := WriteCatalog(&table, "wide"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != len(Catalog())+1 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("table has %d lines for %d metrics:\n%s", len(lines), len(Catalog()), table.String())
	}
	// Aligned columns: TYPE starts at the same offset on every line.
	col := strings.Index(lines[0], "TYPE")
	for _, l := range lines[1:] {
		if len(l) < col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("misaligned line: %q", l)
		}
	}
	if !strings.Contains(table.String(), "nvmlDeviceGetPowerUsage") {
		t.Error("table lacks the NVML source column")
	}

	var js bytes.Buffer
	if err := WriteCatalog(&js, "json", WithMetricFilter(&MetricFilter{Disable: []string{"*"}})); err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Name    string   `json:"name"`
		Labels  []string `json:"labels"`
		Default bool     `json:"default"`
		Enabled *bool    `json:"enabled"`
	}
	if err := json.Unmarshal(js.Bytes(), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(Catalog()) {
		t.Fatalf("json has %d entries, catalog %d", len(entries), len(Catalog()))
	}
	for _, e := range entries {
		alwaysOn := e.Name == "gpu_up" || e.Name == "gpu_reading_age_seconds" || strings.HasPrefix(e.Name, "gpu_health_") || strings.HasPrefix(e.Name, "gpuwatch_")
		if e.Enabled == nil || *e.Enabled != alwaysOn {
			t.Errorf("%s under disable [*]: %+v, want enabled=%v", e.Name, e, alwaysOn)
		}
	}

	if err := WriteCatalog(&js, "yaml"); err == nil || !strings.Contains(err.Error(), "markdown") {
		t.Errorf("unknown format: err = %v", err)
	}
}
