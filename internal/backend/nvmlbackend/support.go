//go:build cgo

package nvmlbackend

import (
	"github.com/gpuwatch/gpuwatch/internal/fakedriver/nvmlbranch"
	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// BranchSupport is how well one driver branch serves the collector groups:
// the same judgement gpuwatch makes at start about the loaded library,
// made here from each branch's function and field-ID tables (nvmlbranch).
type BranchSupport struct {
	Branch string // "R535"
	// Limits are the groups the branch cannot fully serve, in group order.
	Limits []snapshot.DriverLimit
}

// DriverSupport returns, for every branch nvmlbranch knows (oldest first),
// the groups it limits, with every group enabled. The README's
// driver-support table and `gpuwatch metrics` are made from it.
func DriverSupport() []BranchSupport {
	all, _ := parseGroups(AllGroups())
	var out []BranchSupport
	for _, b := range nvmlbranch.Branches() {
		var caps capabilities
		for c := range numCalls {
			caps.has[c], caps.missing[c] = callAvailable(c, b.HasFunction)
		}
		caps.branch = b
		out = append(out, BranchSupport{Branch: b.Name, Limits: caps.limits(all)})
	}
	return out
}

// SupportCell is the short form of one group on one branch for a table:
// "yes", "no", or "partial: no <readings>".
func SupportCell(limits []snapshot.DriverLimit, group string) string {
	for _, l := range limits {
		if l.Group != group {
			continue
		}
		if l.Unavailable {
			return "no"
		}
		return l.Reason
	}
	return "yes"
}
