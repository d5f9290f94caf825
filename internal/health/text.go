package health

import (
	"fmt"
	"io"
	"strings"
)

// Exit statuses of `gpuwatch health`, after the convention of Nagios
// plugins and node-problem-detector's custom plugins.
const (
	ExitHealthy   = 0 // every GPU ok or warn
	ExitUnhealthy = 1 // a GPU, or the node, failed
	ExitUnknown   = 2 // health could not be told
)

// ExitCode is the report's exit status: 0 for ok and warn, 1 for fail,
// 2 for unknown.
func (r Report) ExitCode() int {
	switch r.Status {
	case "ok", "warn":
		return ExitHealthy
	case "fail":
		return ExitUnhealthy
	}
	return ExitUnknown
}

// Line is the node's verdict and its reason on one line, the first line
// of WriteText: what a checker that keeps one line of output shows.
func (r Report) Line() string {
	if r.Reason == "" {
		return strings.ToUpper(r.Status)
	}
	return strings.ToUpper(r.Status) + ": " + oneLine(r.Reason)
}

// WriteText writes the report for a person: the node's verdict first,
// then one line per GPU, with each GPU's failing checks below it.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.Line())
	b.WriteString("\n")
	if r.Source != "" {
		fmt.Fprintf(&b, "source: %s", r.Source)
		if r.From != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(r.From))
		}
		b.WriteString("\n")
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", oneLine(w))
	}
	for _, g := range r.GPUs {
		fmt.Fprintf(&b, "GPU %d  %-7s  %s\n", g.GPU, g.Status, g.UUID)
		for _, c := range g.Checks {
			if c.Status != "ok" {
				fmt.Fprintf(&b, "    %s %s: %s\n", c.Name, c.Status, oneLine(c.Reason))
			}
		}
	}
	for _, c := range r.Node {
		if c.Status != "ok" {
			fmt.Fprintf(&b, "node  %s %s: %s\n", c.Name, c.Status, oneLine(c.Reason))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine drops control characters, so that a reason is one line of
// plain text wherever it is printed.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
