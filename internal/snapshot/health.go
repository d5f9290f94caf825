package snapshot

import "time"

// Health verdicts, from best to worst. Unknown ranks between warn and fail:
// a GPU that did not answer is neither passed nor failed.
const (
	HealthOK      = "ok"
	HealthWarn    = "warn"
	HealthUnknown = "unknown"
	HealthFail    = "fail"
)

// HealthRank orders verdicts: a larger rank is worse. An unrecognised
// verdict ranks as unknown.
func HealthRank(status string) int {
	switch status {
	case HealthOK:
		return 0
	case HealthWarn:
		return 1
	case HealthFail:
		return 3
	default:
		return 2
	}
}

// Health is the health stage's judgement of a snapshot (internal/health):
// one verdict per device, in the snapshot's device order, and the findings
// that belong to no one GPU. Nil when the health stage does not run.
type Health struct {
	// Status is the node's verdict: the worst of every GPU's and of Node's.
	Status string
	// Reason is the deciding finding's line, "" when Status is ok.
	Reason string
	GPUs   []GPUHealth
	// Node holds node-wide findings: fewer GPUs than expected.
	Node []HealthCheck
}

// GPUHealth is one GPU's verdict and the checks that decided it.
type GPUHealth struct {
	GPU    int
	UUID   string
	Status string
	// Reason is one line a person understands, naming the GPU, the worst
	// check and what to do; "" when Status is ok.
	Reason string
	// Checks lists every check the GPU's readings allowed, passing ones
	// included, in the policy's order. A check whose reading is absent is
	// left out: it is neither passing nor failing.
	Checks []HealthCheck
}

// HealthCheck is one check's outcome on one GPU (or on the node).
type HealthCheck struct {
	Name   string // "xid", "ecc_uncorrectable", ... (internal/health)
	Status string
	// Reason says what was seen ("XID 79 at 12:03:04Z: fallen off the
	// bus") and what to do; "" when the check passes.
	Reason string
	// Since is when gpuwatch first saw the condition; zero when passing.
	Since time.Time `json:",omitzero"`
}

// ForGPU is the verdict on the GPU of index gpu; ok is false when h is nil
// (the health stage did not run) or has no verdict on that GPU.
func (h *Health) ForGPU(gpu int) (GPUHealth, bool) {
	if h == nil {
		return GPUHealth{}, false
	}
	for _, g := range h.GPUs {
		if g.GPU == gpu {
			return g, true
		}
	}
	return GPUHealth{}, false
}
