// Package doctor checks a host for what gpuwatch needs and says, for each
// problem, how to fix it: `gpuwatch doctor`.
//
// Each check is a function of an Env (what the flags point at, and one
// snapshot read through the chosen backend) and returns Results. A check
// never blocks past Env.Timeout: sockets are dialled and commands run with
// that bound.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Status is a check's outcome.
type Status string

// The outcomes: passed, failed, or not applicable (skipped, or only
// informative).
const (
	OK   Status = "ok"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Result is one line of the report.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Found  string `json:"found"`
	Fix    string `json:"fix,omitempty"`
	// Needed: a failure of this check makes gpuwatch doctor exit non-zero,
	// because the chosen flags depend on it.
	Needed bool `json:"needed"`
}

func ok(check, found string) Result { return Result{Check: check, Status: OK, Found: found} }

func skip(check, found string) Result { return Result{Check: check, Status: Skip, Found: found} }

func fail(check, found, fix string, needed bool) Result {
	return Result{Check: check, Status: Fail, Found: found, Fix: fix, Needed: needed}
}

// Report is every result, in check order.
type Report struct {
	Results []Result `json:"checks"`
	// Healthy: no needed check failed.
	Healthy bool `json:"healthy"`
}

// NewReport sums up results.
func NewReport(results []Result) Report {
	r := Report{Results: results, Healthy: true}
	for _, res := range results {
		if res.Status == Fail && res.Needed {
			r.Healthy = false
		}
	}
	return r
}

var marks = map[Status]string{OK: "✔", Fail: "✘", Skip: "–"}

// WriteText prints one line per check, and the fix under each failure.
func (r Report) WriteText(w io.Writer) error {
	width := 0
	for _, res := range r.Results {
		width = max(width, len(res.Check))
	}
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%s %-*s  %s\n", marks[res.Status], width, res.Check, res.Found)
		if res.Status == Fail {
			prefix := "fix"
			if !res.Needed {
				prefix = "fix (optional)"
			}
			fmt.Fprintf(&b, "  %*s  %s: %s\n", width, "", prefix, res.Fix)
		}
	}
	if r.Healthy {
		b.WriteString("\nEvery check the chosen flags need passed.\n")
	} else {
		b.WriteString("\nSome checks the chosen flags need failed; see the fixes above.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
