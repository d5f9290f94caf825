package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	nvmlbackend "github.com/gpuwatch/gpuwatch/internal/backend/nvml"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// driverSupportIntro says what the table is; the README carries the same
// table (TestREADMEDriverSupportTable keeps them equal).
const driverSupportIntro = `Which collector groups each NVIDIA driver branch can serve: "yes", "no" (the
group is off), or "partial" and the readings that are missing. Derived from the
functions and field IDs in each branch's nvml.h (internal/nvmlbranch); at start
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
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\nGROUP")
		for _, b := range support {
			fmt.Fprintf(tw, "\t%s", b.Branch)
		}
		fmt.Fprintln(tw)
		for _, g := range snapshot.AllGroups {
			fmt.Fprint(tw, g)
			for _, b := range support {
				fmt.Fprintf(tw, "\t%s", nvmlbackend.SupportCell(b.Limits, g))
			}
			fmt.Fprintln(tw)
		}
		return tw.Flush()
	}
	return nil
}

// driverSupportMarkdown is the table alone, as in the README.
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
