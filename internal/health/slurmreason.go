package health

import (
	"fmt"
	"strings"
)

// FailSummary names what failed, for a scheduler's one-line field (the
// reason of a drained Slurm node): each failed GPU with its failed checks,
// then the node's, such as
//
//	GPU 3 XID 79 (GPU has fallen off the bus); GPU 5 gpu_lost, ecc_uncorrectable; node gpu_count
//
// It holds no time and no count, so the same failures give the same text
// on every run, and a changed text means a changed cause. "" when nothing
// failed.
func (r Report) FailSummary() string {
	var parts []string
	for _, g := range r.GPUs {
		if g.Status != "fail" {
			continue
		}
		var labels []string
		for _, c := range g.Checks {
			if c.Status == "fail" {
				labels = append(labels, checkLabel(c))
			}
		}
		if len(labels) == 0 {
			labels = []string{"failed"}
		}
		parts = append(parts, fmt.Sprintf("GPU %d %s", g.GPU, strings.Join(labels, ", ")))
	}
	var node []string
	for _, c := range r.Node {
		if c.Status == "fail" {
			node = append(node, c.Name)
		}
	}
	if len(node) > 0 {
		parts = append(parts, "node "+strings.Join(node, ", "))
	}
	return oneLine(strings.Join(parts, "; "))
}

// checkLabel is a failed check's name, or for the xid check the XID that
// decided it and what NVIDIA's catalog calls it: its reason starts with
// "XID <code> " (xidCheck).
func checkLabel(c CheckReport) string {
	var code uint64
	if c.Name != CheckXID {
		return c.Name
	}
	if _, err := fmt.Sscanf(c.Reason, "XID %d ", &code); err != nil {
		return c.Name
	}
	what, _ := describeXID(code)
	return fmt.Sprintf("XID %d (%s)", code, what)
}
