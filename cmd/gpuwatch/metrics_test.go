package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	nvmlbackend "github.com/gpuwatch/gpuwatch/internal/backend/nvml"
	"github.com/gpuwatch/gpuwatch/internal/exporter"
	"github.com/gpuwatch/gpuwatch/internal/slurm"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

// TestMetricsDoc fails when docs/metrics.md is not what `gpuwatch metrics
// --format=markdown` prints.
func TestMetricsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "metrics.md")
	var want bytes.Buffer
	if err := writeMetricCatalog(&want, "markdown", nil); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it with: go test ./cmd/gpuwatch -run TestMetricsDoc -update", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("docs/metrics.md is out of date; regenerate it with:\n  go test ./cmd/gpuwatch -run TestMetricsDoc -update")
	}
	for _, m := range exporter.Catalog() {
		if !bytes.Contains(got, []byte("`"+m.Name+"`")) {
			t.Errorf("docs/metrics.md lacks %s", m.Name)
		}
	}
	for _, m := range slurm.Metrics {
		if !bytes.Contains(got, []byte("`"+m.Name+"`")) {
			t.Errorf("docs/metrics.md lacks %s", m.Name)
		}
	}
}

// TestREADMEDriverSupportTable keeps the README's metric group × driver
// branch table equal to the one gpuwatch derives from the branch tables.
func TestREADMEDriverSupportTable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := driverSupportMarkdown(nvmlbackend.DriverSupport())
	if !bytes.Contains(readme, []byte(table)) {
		t.Errorf("README.md's driver-support table is out of date; replace it with:\n%s", table)
	}
}
