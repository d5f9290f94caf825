//go:build cgo

package doctor

import (
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/backend/smibackend"
)

// With --backend=nvidia-smi the checks that are NVML's say so instead of
// giving NVML's advice: the limits come from nvidia-smi, not the driver
// branch; there is no NVML call to time; a remote host's device nodes are
// not this host's; nvidia-smi is not compared with itself.
func TestNvidiaSMIBackendChecks(t *testing.T) {
	env := baseEnv(t)
	env.Backend, env.Snapshot, env.RemoteHost, env.NvidiaSMI = "nvidia-smi", smibackend.Fullest(), "gpu-box", "/usr/bin/nvidia-smi"
	r := Run(env)
	if res := find(t, r, "driver limits"); res.Status != Fail || res.Needed || !strings.Contains(res.Fix, "--backend=nvml") || strings.Contains(res.Fix, "newer driver branch") {
		t.Errorf("driver limits = %+v", res)
	}
	for _, check := range []string{"NVML latency", "device nodes", "nvidia-smi"} {
		if res := find(t, r, check); res.Status != Skip {
			t.Errorf("%s = %+v, want skipped", check, res)
		}
	}
	env.RemoteHost = ""
	if res := find(t, Run(env), "device nodes"); res.Status == Skip {
		t.Errorf("device nodes skipped for this host's nvidia-smi: %+v", res)
	}
}
