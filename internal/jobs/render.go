package jobs

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Formats of Render.
var Formats = []string{"table", "json", "markdown"}

// Render writes the summary as a table, JSON or Markdown.
func Render(w io.Writer, s Summary, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	case "table":
		return renderText(w, s, false)
	case "markdown":
		return renderText(w, s, true)
	}
	return fmt.Errorf("unknown format %q (want table, json or markdown)", format)
}

var columns = []string{"NODE", "GPU", "MODEL", "ALLOCATED", "SM UTIL MEAN", "SM UTIL MAX", "PEAK MEMORY", "ENERGY", "IDLE", "XIDS", "THROTTLED"}

func renderText(w io.Writer, s Summary, md bool) error {
	var b strings.Builder
	writeHeading(&b, s, md)
	if err := writeTable(&b, summaryRows(s), md); err != nil {
		return err
	}
	b.WriteString("\nALLOCATED, IDLE and ENERGY are per GPU, summed in the total; SM UTIL is SM time over allocated time.\n")
	if len(s.Notes) == 0 {
		b.WriteString("\nNo efficiency problems found.\n")
	} else {
		b.WriteString("\nNotes:\n")
		for _, n := range s.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err := io.WriteString(w, printable(b.String()))
	return err
}

// printable makes text safe for a terminal: the job name, user, node
// and every other string in a record come from whoever ran the job or
// answered for a node. Control characters but the newline and tab (a
// terminal acts on them: escape sequences move the cursor, retitle the
// window, hide text), the bidirectional formatting characters (they
// reorder what a reader sees), line and paragraph separators and invalid
// UTF-8 become U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r), r == utf8.RuneError, r == '\u2028', r == '\u2029',
			r >= '\u200e' && r <= '\u200f', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return unicode.ReplacementChar
		}
		return r
	}, s)
}

// writeHeading writes what job it is, whose, when and where it ran, and
// the nodes that sent no record.
func writeHeading(b *strings.Builder, s Summary, md bool) {
	title := "Job " + s.JobID
	if s.Kind == KindPod && s.Pod != nil {
		title = fmt.Sprintf("Pod %s/%s", s.Pod.Namespace, s.Pod.Name)
	}
	if md {
		fmt.Fprintf(b, "## %s\n\n", title)
	} else {
		fmt.Fprintf(b, "%s\n", title)
	}
	if who := owner(s); len(who) > 0 {
		fmt.Fprintf(b, "%s\n", strings.Join(who, ", "))
	}
	switch {
	case s.Start.IsZero() && s.Source == "prometheus": // the counters have no times
		fmt.Fprintf(b, "on %s (from Prometheus's counters)\n", strings.Join(s.Nodes, ", "))
	case s.Start.IsZero():
		fmt.Fprintf(b, "on %s (start and end not recorded)\n", strings.Join(s.Nodes, ", "))
	default:
		state := "ended"
		if s.Running {
			state = "running"
		}
		fmt.Fprintf(b, "%s to %s (%s, %s) on %s\n", s.Start.UTC().Format(time.DateTime), s.End.UTC().Format(time.DateTime),
			duration(s.End.Sub(s.Start).Seconds()), state, strings.Join(s.Nodes, ", "))
	}
	for _, m := range s.MissingNodes {
		fmt.Fprintf(b, "no record from %s\n", m)
	}
	b.WriteString("\n")
}

// owner is the job's Slurm identity (user, account, partition, name) and
// its pod's UID, those that are known.
func owner(s Summary) []string {
	var who []string
	if id := s.Slurm; id != nil {
		for _, kv := range [][2]string{{"user", id.User}, {"account", id.Account}, {"partition", id.Partition}, {"name", id.JobName}} {
			if kv[1] != "" {
				who = append(who, kv[0]+" "+kv[1])
			}
		}
	}
	if p := s.Pod; p != nil && p.UID != "" {
		who = append(who, "uid "+p.UID)
	}
	return who
}

// summaryRows are the cells of each GPU's row, then the total's.
func summaryRows(s Summary) [][]string {
	rows := [][]string{}
	for _, g := range s.GPUs {
		gpu := fmt.Sprint(g.Index)
		if g.MIGUUID != "" {
			gpu += " " + g.MIGProfile
		}
		rows = append(rows, []string{
			g.Node, gpu, strings.TrimPrefix(g.Model, "NVIDIA "), duration(g.AllocatedSeconds),
			percent(g.SMUtilizationMean), percent(g.SMUtilizationMax), memory(g.MemoryUsedBytesMax, g.MemoryTotalBytes),
			energy(g.EnergyJoules), share(g.IdleSeconds, g.AllocatedSeconds), count(g.XIDErrors), share(g.ThrottleSeconds, g.AllocatedSeconds),
		})
	}
	t := s.Total
	return append(rows, []string{
		"total", fmt.Sprintf("%d GPUs", t.GPUs), "", duration(t.AllocatedSeconds), percent(t.SMUtilizationMean), "",
		memory(t.MemoryUsedBytesMax, nil), energy(t.EnergyJoules), share(t.IdleSeconds, t.AllocatedSeconds), count(t.XIDErrors), "",
	})
}

// writeTable writes the columns and rows as a Markdown table or aligned
// plain text.
func writeTable(b *strings.Builder, rows [][]string, md bool) error {
	if md {
		b.WriteString("| " + strings.Join(columns, " | ") + " |\n|" + strings.Repeat(" --- |", len(columns)) + "\n")
		for _, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		return nil
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// The cells: "-" is absent, never 0.
func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100**v)
}

func share(v *float64, of float64) string {
	if v == nil || of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", 100**v/of)
}

func count(v *uint64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func memory(used, total *uint64) string {
	switch {
	case used == nil:
		return "-"
	case total == nil:
		return Bytes(*used)
	}
	return Bytes(*used) + " of " + Bytes(*total)
}

func energy(j *float64) string {
	if j == nil {
		return "-"
	}
	wh := *j / 3600
	switch {
	case wh >= 1000:
		return fmt.Sprintf("%.2f kWh", wh/1000)
	case wh >= 100:
		return fmt.Sprintf("%.0f Wh", wh)
	case wh >= 10:
		return fmt.Sprintf("%.1f Wh", wh)
	}
	return fmt.Sprintf("%.2f Wh", wh)
}

// duration writes seconds as "1h05m", "4m10s" or "12s".
func duration(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}
