package health

import (
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// Report is the verdicts of one node as /api/v1/health serves them and
// `gpuwatch health -o json` prints them.
type Report struct {
	// Time is when the readings judged were taken.
	Time time.Time `json:"time"`
	// Status is the node's verdict: ok, warn, unknown or fail.
	Status string `json:"status"`
	// Reason is the deciding line; "" when ok.
	Reason string      `json:"reason,omitempty"`
	GPUs   []GPUReport `json:"gpus"`
	// Node holds the node-wide checks (gpu_count).
	Node []CheckReport `json:"node"`
	// Source says who judged: SourceServe (the running serve, with its
	// XID history since it started) or SourceLocal (`gpuwatch health`
	// reading the GPUs itself, with the kernel log's XIDs).
	Source string `json:"source,omitempty"`
	// From details the source: the serve's URL, or what was read.
	From string `json:"from,omitempty"`
	// Warnings are what the command could not use: a serve that did not
	// answer, kernel log lines it could not read. None changes a verdict.
	Warnings []string `json:"warnings,omitempty"`
}

// The values of Report.Source.
const (
	SourceServe = "serve"
	SourceLocal = "local"
)

// GPUReport is one GPU's verdict.
type GPUReport struct {
	GPU    int           `json:"gpu"`
	UUID   string        `json:"uuid,omitempty"`
	Status string        `json:"status"`
	Reason string        `json:"reason,omitempty"`
	Checks []CheckReport `json:"checks"`
}

// CheckReport is one check's outcome.
type CheckReport struct {
	Name   string     `json:"name"`
	Status string     `json:"status"`
	Reason string     `json:"reason,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
}

// NewReport turns a judged snapshot into its report; a snapshot without
// verdicts gives an unknown one.
func NewReport(s *snapshot.Snapshot) Report {
	r := Report{Time: s.Time, Status: snapshot.HealthUnknown, Reason: "the health stage did not run", GPUs: []GPUReport{}, Node: []CheckReport{}}
	h := s.Health
	if h == nil {
		return r
	}
	r.Status, r.Reason = h.Status, h.Reason
	for _, g := range h.GPUs {
		gr := GPUReport{GPU: g.GPU, UUID: g.UUID, Status: g.Status, Reason: g.Reason, Checks: make([]CheckReport, 0, len(g.Checks))}
		for _, c := range g.Checks {
			gr.Checks = append(gr.Checks, checkReport(c))
		}
		r.GPUs = append(r.GPUs, gr)
	}
	for _, c := range h.Node {
		r.Node = append(r.Node, checkReport(c))
	}
	return r
}

func checkReport(c snapshot.HealthCheck) CheckReport {
	cr := CheckReport{Name: c.Name, Status: c.Status, Reason: c.Reason}
	if !c.Since.IsZero() {
		t := c.Since.UTC()
		cr.Since = &t
	}
	return cr
}
