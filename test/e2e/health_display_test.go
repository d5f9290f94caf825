//go:build linux

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

// TestPsShowsVerdicts: `gpuwatch ps` lists each GPU's verdict and reason
// below its table: a lost GPU fails, with why; the others are ok. (ps
// exits 1 here, as always when a GPU's processes are unknown.)
func TestPsShowsVerdicts(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nfaults:\n  - {gpu: 4, lost_after: 0s}\n")
	out, code := runGpuwatch(t, "ps", "--backend=sim", "--sim.config="+cfg)
	if code != 1 || !strings.Contains(out, "GPU 4: down (gpu_is_lost); its processes are unknown") {
		t.Errorf("gpuwatch ps with GPU 4 lost: exit %d\n%s", code, out)
	}
	for _, want := range []string{"\nGPU 0  ok    -\n", "\nGPU 4  fail  GPU 4 (UUID unknown): lost (gpu_is_lost); reboot the node"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpuwatch ps lacks %q:\n%s", want, out)
		}
	}
}

// TestLivePageShowsVerdicts: the live page's GPU cards show the health
// verdict and its reason, read in Chromium.
func TestLivePageShowsVerdicts(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "sim.yaml")
	writeFile(t, cfg, "profile: dgx-h100\nfaults:\n  - {gpu: 4, lost_after: 0s}\n  - {gpu: 2, xid: 79, at: 1s}\n")
	base, _ := startGpuwatch(t, "--backend=sim", "--sim.config="+cfg, "--ui.interval=1s")
	b := newBrowser(t)
	b.run(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`article.card[data-gpu="4"] .verdict`))
	var lost, xid, ok string
	testenv.WaitFor(t, 30*time.Second, "GPU 2's card to show the XID 79 verdict", func() bool {
		b.run(t, visibleText(`article.card[data-gpu="2"] .verdict`, &xid))
		return strings.HasPrefix(xid, "Verdict: fail")
	})
	b.run(t, visibleText(`article.card[data-gpu="4"] .verdict`, &lost), visibleText(`article.card[data-gpu="0"] .verdict`, &ok))
	if !strings.Contains(xid, "XID 79") || !strings.Contains(xid, "GPU has fallen off the bus") {
		t.Errorf("GPU 2's verdict: %q", xid)
	}
	if !strings.HasPrefix(lost, "Verdict: fail") || !strings.Contains(lost, "lost (gpu_is_lost)") {
		t.Errorf("GPU 4's verdict: %q", lost)
	}
	if ok != "Verdict: ok" {
		t.Errorf("GPU 0's verdict: %q", ok)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
