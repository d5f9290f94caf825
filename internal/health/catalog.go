package health

// xidEntry is what the default policy knows of one XID code: what it means
// and what to do, in gpuwatch's words after NVIDIA's XID catalog (the
// pinned rows and their source are in testdata/xid-catalog.tsv), and
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
)

// xidCatalog classifies the XID codes the default policy knows. A code the
// catalog marks for the application (restart it, or ignore the event) never
// fails a GPU; one that needs a GPU reset or a reboot does. Codes not
// listed warn: a person should look, but nothing is drained for them.
var xidCatalog = map[uint64]xidEntry{
	8:   {"GPU stopped processing (a channel timed out)", actionRestartApp, LevelOff},
	13:  {"graphics engine exception (an application fault)", actionRestartApp, LevelOff},
	31:  {"GPU memory page fault (an application's bad address)", actionRestartApp, LevelOff},
	43:  {"GPU stopped processing an application's channel", actionRestartApp, LevelOff},
	45:  {"preemptive cleanup after earlier errors", actionRestartApp, LevelOff},
	48:  {"double-bit ECC error", actionResetGPU, LevelFail},
	61:  {"internal micro-controller breakpoint", actionResetGPU, LevelFail},
	62:  {"internal micro-controller halt", actionResetGPU, LevelFail},
	63:  {"memory page retirement or row remapping recorded", actionResetGPU, LevelFail},
	64:  {"memory page retirement or row remapping failed", actionResetGPU + "; if it repeats, replace the GPU", LevelFail},
	68:  {"video decoder exception", actionRestartApp, LevelOff},
	69:  {"graphics engine class error", actionRestartApp, LevelOff},
	74:  {"NVLink error", actionResetGPU, LevelFail},
	79:  {"GPU has fallen off the bus", actionReboot, LevelFail},
	92:  {"high single-bit ECC error rate", "watch the GPU's corrected ECC errors", LevelWarn},
	94:  {"contained ECC error (the row waits for a remap)", actionResetGPU, LevelFail},
	95:  {"uncontained ECC error", actionResetGPU, LevelFail},
	109: {"context switch timeout", actionRestartApp, LevelOff},
	119: {"GSP firmware RPC timeout", actionResetGPU, LevelFail},
	120: {"GSP firmware error", actionResetGPU, LevelFail},
	121: {"C2C link error", actionResetGPU, LevelFail},
	140: {"unrecovered ECC error", actionResetGPU, LevelFail},
	154: {"the driver asks for a GPU recovery action", actionResetGPU, LevelFail},
}

// stricterThanCatalog lists the codes the default policy fails although
// the catalog's immediate action is the application's, and why.
var stricterThanCatalog = map[uint64]string{
	94: "the contained error leaves a memory row pending a remap, which takes effect only at a GPU reset",
}

// describeXID is the catalog's line for code, or a generic one.
func describeXID(code uint64) (what, action string) {
	if e, ok := xidCatalog[code]; ok {
		return e.what, e.action
	}
	return "not in gpuwatch's XID table", "look the code up in NVIDIA's XID catalog"
}
