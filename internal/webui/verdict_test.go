package webui

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/snapshot"
)

// TestSnapshotDocCarriesVerdicts: each GPU's verdict and reason from the
// health stage; none at all (not "ok") when the stage did not run or has
// no verdict on the GPU.
func TestSnapshotDocCarriesVerdicts(t *testing.T) {
	s := testSnapshot(time.Unix(1000, 0))
	doc := newSnapshotDoc(s, false, time.Second)
	for _, d := range doc.Devices {
		if d.Verdict != "" || d.VerdictReason != "" {
			t.Errorf("GPU %d without a health stage: verdict %q %q", d.Index, d.Verdict, d.VerdictReason)
		}
	}
	s.Health = &snapshot.Health{Status: snapshot.HealthFail, GPUs: []snapshot.GPUHealth{
		{GPU: 1, UUID: "GPU-1", Status: snapshot.HealthFail, Reason: "GPU 1 (GPU-1): lost (gpu_is_lost); reboot the node"},
	}}
	doc = newSnapshotDoc(s, false, time.Second)
	if d := doc.Devices[1]; d.Verdict != "fail" || d.VerdictReason != "GPU 1 (GPU-1): lost (gpu_is_lost); reboot the node" {
		t.Errorf("GPU 1: %q %q", d.Verdict, d.VerdictReason)
	}
	if d := doc.Devices[0]; d.Verdict != "" {
		t.Errorf("GPU 0 has no verdict in the stage, got %q", d.Verdict)
	}
}
