//go:build cgo

package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
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

// TestDocsDriverSupportTable keeps docs/metrics-guide.md's metric group ×
// driver branch table equal to the one gpuwatch derives from the branch tables.
func TestDocsDriverSupportTable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := driverSupportMarkdown(nvmlbackend.DriverSupport())
	if !bytes.Contains(readme, []byte(table)) {
		t.Errorf("docs/metrics-guide.md's driver-support table is out of date; replace it with:\n%s", table)
	}
}

// The driver table of `gpuwatch metrics` fits a 100-column terminal, and
// every partial cell's reason is in a note below it, once.
func TestDriverSupportTableFitsATerminal(t *testing.T) {
	var b bytes.Buffer
	support := nvmlbackend.DriverSupport()
	if err := writeDriverSupportTable(&b, support); err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	for _, s := range support {
		for _, l := range s.Limits {
			if l.Unavailable {
				continue
			}
			reason := strings.TrimPrefix(l.Reason, "partial: ")
			if c := strings.Count(b.String(), ") "+reason+"\n"); c != 1 {
				t.Errorf("%s %s: note %q appears %d times:\n%s", s.Branch, l.Group, reason, c, b.String())
			}
		}
	}
}
