package health

// xidEntry is what the default policy knows of one XID code: what it means
// and what to do, in gpuwatch's words after NVIDIA's XID catalog (the
// pinned rows and their sources are in testdata/xid-catalog.tsv), and
// whether it fails the GPU.
type xidEntry struct {
	what   string
	action string
	level  Level
}

// Actions, after the catalog's resolution buckets.
const (
	actionRestartApp = "restart the application; the GPU is fine"
	actionResetGPU   = "drain the GPU's jobs, then reset the GPU (nvidia-smi -r) or reboot"
	actionReboot     = "drain the node and reboot it"
	actionWatch      = "nothing to do at once; watch the GPU's other checks"
)

// xidCatalog classifies the XID codes the default policy knows. A code the
// catalog marks for the application (restart it, or ignore the event) never
// fails a GPU: application faults are off, ignored hardware events warn.
// One that needs a GPU reset, a reboot or support fails it. Codes whose
// catalog action is a workflow are classed as workflowDecisions says.
// Codes not listed warn: a person should look, but nothing is drained.
var xidCatalog = map[uint64]xidEntry{
	8:   {"GPU stopped processing (a channel timed out)", actionRestartApp, LevelOff},
	13:  {"graphics engine exception (an application fault)", actionRestartApp, LevelOff},
	31:  {"GPU memory page fault (an application's bad address)", actionRestartApp, LevelOff},
	43:  {"GPU stopped processing an application's channel", actionRestartApp, LevelOff},
	45:  {"preemptive cleanup after earlier errors", actionRestartApp + "; the XIDs logged with it decide", LevelOff},
	48:  {"double-bit ECC error", actionResetGPU, LevelFail},
	61:  {"internal micro-controller breakpoint", actionResetGPU, LevelFail},
	62:  {"internal micro-controller halt", actionResetGPU, LevelFail},
	63:  {"memory page retirement or row remapping recorded", actionWatch + " (a pending remap fails row_remap_pending)", LevelWarn},
	64:  {"memory page retirement or row remapping failed", actionResetGPU + "; if it repeats, replace the GPU", LevelFail},
	68:  {"video decoder exception", actionRestartApp, LevelOff},
	69:  {"graphics engine class error", actionRestartApp, LevelOff},
	74:  {"NVLink error", actionResetGPU, LevelFail},
	79:  {"GPU has fallen off the bus", actionReboot, LevelFail},
	92:  {"high single-bit ECC error rate", "watch the GPU's corrected ECC errors", LevelWarn},
	94:  {"contained ECC error (one application was stopped)", actionRestartApp + " (a pending remap fails row_remap_pending)", LevelWarn},
	95:  {"uncontained ECC error", actionResetGPU, LevelFail},
	109: {"context switch timeout", actionResetGPU, LevelFail},
	119: {"GSP firmware RPC timeout", actionResetGPU, LevelFail},
	120: {"GSP firmware error", actionResetGPU, LevelFail},
	121: {"C2C (chip-to-chip) link error", actionWatch, LevelWarn},
	140: {"unrecoverable ECC error escaped containment", actionResetGPU, LevelFail},
	154: {"the driver asks for a GPU recovery action", actionResetGPU + " (the kernel log line names the action)", LevelFail},
}

// workflowDecisions lists the codes whose catalog immediate action is a
// workflow (a decision tree in NVIDIA's catalog) rather than a bucket, and
// why the default policy classes each as it does.
var workflowDecisions = map[uint64]string{
	45:  "the catalog follows the XIDs logged with it; those decide, and alone it concerns the fabric manager, not this GPU",
	48:  "the catalog's workflow for a double-bit error ends in a GPU reset",
	74:  "the workflow decodes the NVLink error's registers, which gpuwatch does not read; an unread NVLink error is treated as needing a reset",
	154: "the action is named in the kernel log line, which the NVML event does not carry; a change of recovery action is treated as needing a reset",
}

// describeXID is the catalog's line for code, or a generic one.
func describeXID(code uint64) (what, action string) {
	if e, ok := xidCatalog[code]; ok {
		return e.what, e.action
	}
	return "not in gpuwatch's XID table", "look the code up in NVIDIA's XID catalog"
}
