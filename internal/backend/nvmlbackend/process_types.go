//go:build cgo

package nvmlbackend

import "strings"

// processTypeMPS is the Process.Type of a client of an MPS server, listed by
// nvmlDeviceGetMPSComputeRunningProcesses (nvidia-smi's "M").
const processTypeMPS = "mps"

// processTypeOrder is the order of the kinds in a combined Process.Type:
// "compute+graphics", "compute+mps" (nvidia-smi's "M+C"),
// "compute+graphics+mps".
var processTypeOrder = [...]string{"compute", "graphics", processTypeMPS}

// combineProcessTypes is the type of a process listed under both a and b
// (each a kind or a combination), in processTypeOrder.
func combineProcessTypes(a, b string) string {
	has := func(kind string) bool {
		for _, t := range []string{a, b} {
			for part := range strings.SplitSeq(t, "+") {
				if part == kind {
					return true
				}
			}
		}
		return false
	}
	var parts []string
	for _, kind := range processTypeOrder {
		if has(kind) {
			parts = append(parts, kind)
		}
	}
	return strings.Join(parts, "+")
}
