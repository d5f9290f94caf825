package exporter

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDCGMTable = flag.Bool("update-dcgm-table", false, "rewrite the 4.9 and 4.10 columns of docs/dcgm-compat.md's default counter table")

// dcgmTableVersions are the columns of docs/dcgm-compat.md's "Default
// counters by GPU generation" table that give each counter's name under a
// later dcgm-exporter release; the GPU columns hold for that name too.
var dcgmTableVersions = []DCGMVersion{DCGM49, DCGM410}

// dcgmTableCell is the table's cell for counter under v: "same" when v
// keeps the name, the name v serves the reading as, or "–" when v has no
// counterpart.
func dcgmTableCell(counter string, v DCGMVersion) string {
	switch name := DCGMNameIn(counter, v); name {
	case counter:
		return "same"
	case "":
		return "–"
	default:
		return "`" + name + "`"
	}
}

// TestDCGMDefaultCounterTableNames: the 4.9 and 4.10 name columns of the
// default counter table are what DCGMNameIn (the catalog the exporter
// serves from) says. Regenerate with
//
//	go test ./internal/exporter -run TestDCGMDefaultCounterTableNames -update-dcgm-table
func TestDCGMDefaultCounterTableNames(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "dcgm-compat.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Default counters by GPU generation"
	before, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatal("docs/dcgm-compat.md has no default counter table")
	}
	section, after, _ := strings.Cut(section, "\n## ")
	lines := strings.Split(section, "\n")
	var header []string
	rows := 0
	for i, line := range lines {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.TrimSpace(line), "|")
		cells = cells[1 : len(cells)-1]
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if header == nil {
			header = cells
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows++
		counter := strings.Trim(cells[0], "`")
		for k, v := range dcgmTableVersions {
			col := len(header) - len(dcgmTableVersions) + k
			want := dcgmTableCell(counter, v)
			if *updateDCGMTable {
				lines[i] = rewriteCell(lines[i], col, want)
				continue
			}
			if header[col] != v.String() || len(cells) != len(header) {
				t.Fatalf("the table's column %d is %q, want %s (regenerate with -update-dcgm-table after adding the column)", col, header[col], v)
			}
			if cells[col] != want {
				t.Errorf("%s under %s: cell %q, want %q", counter, v, cells[col], want)
			}
		}
	}
	if rows < 25 {
		t.Fatalf("only %d rows in the table", rows)
	}
	if *updateDCGMTable {
		out := before + heading + strings.Join(lines, "\n") + "\n## " + after
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rewriteCell sets cell col (0-based) of a Markdown table row.
func rewriteCell(line string, col int, value string) string {
	cells := strings.Split(strings.TrimSpace(line), "|")
	cells[col+1] = " " + value + " "
	return strings.Join(cells, "|")
}
