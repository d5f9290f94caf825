package jobs

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Strings in a record come from whoever named the job or answered for a
// node: escape sequences and bidirectional controls reach the terminal
// inert, in the table and in Markdown.
func TestRenderEscapesTerminalControls(t *testing.T) {
	r := testRecord(7)
	r.Slurm.JobName = "train\x1b]0;pwned\x07\x1b[2J\u202egnp.exe\u009b31m"
	r.Node = "gpu01\x1b[8m"
	s, _ := Summarize("7", []Record{r})
	for _, format := range []string{"table", "markdown"} {
		var b bytes.Buffer
		if err := Render(&b, s, format); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if strings.ContainsAny(out, "\x1b\x07\u202e\u009b") {
			t.Errorf("%s: a control character got through: %q", format, out)
		}
		if !strings.Contains(out, "train\ufffd]0;pwned") {
			t.Errorf("%s: the name is not shown with its controls replaced: %q", format, out)
		}
	}
}

// A record without start and end is said to come from Prometheus's
// counters only when it does.
func TestRenderSaysWhereTimelessFiguresComeFrom(t *testing.T) {
	r := testRecord(7)
	r.Start, r.End = time.Time{}, time.Time{}
	for source, want := range map[string]string{"prometheus": "(from Prometheus's counters)", "journal": "(start and end not recorded)", "nodes": "(start and end not recorded)"} {
		s, _ := Summarize("7", []Record{r})
		s.Source = source
		var b bytes.Buffer
		if err := Render(&b, s, "table"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) || (source != "prometheus" && strings.Contains(b.String(), "Prometheus")) {
			t.Errorf("source %s: want %q:\n%s", source, want, b.String())
		}
	}
}
