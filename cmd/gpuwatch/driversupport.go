//go:build cgo

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpuwatch/gpuwatch/internal/backend/nvmlbackend"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// driverSupportIntro says what the table is; docs/metrics-guide.md carries
// the same table (TestDocsDriverSupportTable keeps them equal).
const driverSupportIntro = `Which collector groups each NVIDIA driver branch can serve: "yes", "no" (the
group is off), or "partial" and the readings that are missing. Derived from the
functions and field IDs in each branch's nvml.h (internal/fakedriver/nvmlbranch); at start
gpuwatch makes the same judgement about the library it loaded, logs it, and
exports it as gpuwatch_driver_limited_group.
`

// writeDriverSupport writes the metric group × driver branch table.
func writeDriverSupport(w io.Writer, format string) error {
	support := nvmlbackend.DriverSupport()
	switch format {
	case "markdown":
		_, err := io.WriteString(w, "\n## Metric groups by driver branch\n\n"+driverSupportIntro+"\n"+driverSupportMarkdown(support))
		return err
	case "table":
		return writeDriverSupportTable(w, support)
	}
	return nil
}

// writeDriverSupportTable writes the table to fit a terminal: a partial
// cell is a numbered note ("partial (1)") and the notes follow the table,
// since eight branches of full reasons would be over 200 columns wide.
func writeDriverSupportTable(w io.Writer, support []nvmlbackend.BranchSupport) error {
	var notes []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nGROUP")
	for _, b := range support {
		fmt.Fprintf(tw, "\t%s", b.Branch)
	}
	fmt.Fprintln(tw)
	for _, g := range snapshot.AllGroups {
		fmt.Fprint(tw, g)
		for _, b := range support {
			cell := nvmlbackend.SupportCell(b.Limits, g)
			if reason, partial := strings.CutPrefix(cell, "partial: "); partial {
				n := slices.Index(notes, reason)
				if n < 0 {
					notes = append(notes, reason)
					n = len(notes) - 1
				}
				cell = fmt.Sprintf("partial (%d)", n+1)
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, n := range notes {
		if _, err := fmt.Fprintf(w, "(%d) %s\n", i+1, n); err != nil {
			return err
		}
	}
	return nil
}

// driverSupportMarkdown is the table alone, as in docs/metrics-guide.md.
func driverSupportMarkdown(support []nvmlbackend.BranchSupport) string {
	var b strings.Builder
	b.WriteString("| Group |")
	for _, s := range support {
		b.WriteString(" " + s.Branch + " |")
	}
	b.WriteString("\n|---|")
	for range support {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, g := range snapshot.AllGroups {
		b.WriteString("| " + g + " |")
		for _, s := range support {
			b.WriteString(" " + nvmlbackend.SupportCell(s.Limits, g) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
